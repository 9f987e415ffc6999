"""Variable.register_hook and retain_grad, as PyTorch users know them (expected values from PyTorch 2.13)."""

from __future__ import annotations

import numpy as np
import pytest

from rtxviz import GraphError, Tensor, Variable


def _x():
    return Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2], dtype="float64"))


def test_leaf_hook_inspects_gradient():
    x = _x()
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    (x * 2.0).sum().backward()
    np.testing.assert_array_equal(seen[0], [2.0, 2.0])
    assert len(seen) == 1
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_leaf_hook_replaces_gradient():
    x = _x()
    x.register_hook(lambda g: g * 10.0)
    (x * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, 20.0])


def test_leaf_used_twice_hook_sees_the_sum_once():
    x = _x()
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    (x * x + x).sum().backward()   # d/dx = 2x + 1
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [3.0, 5.0])


def test_non_leaf_hook_inspects_total_gradient_once():
    x = _x()
    a = x * 3.0
    seen = []
    a.register_hook(lambda g: seen.append(g.numpy().copy()))
    (a * a + a).sum().backward()  # PyTorch: hook called once with 2a + 1 = [7, 13]
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [7.0, 13.0])


def test_non_leaf_hook_replaces_what_flows_on():
    x = _x()
    a = x * 3.0
    a.register_hook(lambda g: g * 0.0)
    (a * a).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])


def test_retain_grad_on_non_leaf_and_accumulation():
    x = _x()
    a = x * 3.0
    a.retain_grad()
    loss = (a * a).sum()
    loss.backward(retain_graph=True)
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 12.0])   # 2a
    loss.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [12.0, 24.0])  # accumulates, as PyTorch
    np.testing.assert_array_equal(x.grad.numpy(), [36.0, 72.0])


def test_non_leaf_without_retain_grad_has_no_grad():
    x = _x()
    a = x * 3.0
    (a * a).sum().backward()
    assert a.grad is None


def test_handle_remove():
    x = _x()
    calls = []
    h = x.register_hook(lambda g: calls.append(1))
    a = x * 3.0
    ha = a.register_hook(lambda g: calls.append(2))
    h.remove()
    ha.remove()
    h.remove()  # removing twice is harmless
    (a * 1.0).sum().backward()
    assert calls == []


def test_hook_on_value_without_grad_raises():
    c = Variable.from_tensor(Tensor.from_slice([1.0], [1]), requires_grad=False)
    with pytest.raises(GraphError, match="does not require grad"):
        c.register_hook(lambda g: g)


def test_retain_grad_sees_hook_replacement_like_pytorch():
    x = _x()
    a = x * 3.0
    a.retain_grad()
    a.register_hook(lambda g: g * 2.0)
    (a * a).sum().backward()
    # PyTorch 2.13: a.grad = 2 · 2a = [12, 24]; x.grad = 3 · [12, 24] = [36, 72]
    np.testing.assert_array_equal(x.grad.numpy(), [36.0, 72.0])
    np.testing.assert_array_equal(a.grad.numpy(), [12.0, 24.0])
