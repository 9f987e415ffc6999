"""The spec's basic example and the reuse cases learners trip on; expected values by hand."""

import numpy as np
import pytest

from rtxviz import Device, GraphError, Tensor, Variable, no_grad


def var(values, dtype="float64"):
    return Variable.from_tensor(Tensor.from_slice(values, [len(values)], Device.cpu(), dtype=dtype))


def test_spec_basic_example():
    x = Variable.from_tensor(Tensor.from_slice([2.0, 3.0], [2], Device.cpu()))
    w = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2], Device.cpu()))
    y = x.multiply(w)
    assert y.tolist() == [2.0, 6.0]
    z = y.sum()
    assert z.item() == 8.0
    z.backward()
    assert x.grad.tolist() == [1.0, 2.0]
    assert w.grad.tolist() == [2.0, 3.0]


def test_a_plus_a_then_b_plus_b():
    a = var([1.0, -2.0])
    b = a + a
    c = b + b
    c.sum().backward()
    assert a.grad.tolist() == [4.0, 4.0]  # c = 4a


def test_x_times_x():
    x = var([3.0, -1.5])
    (x * x).sum().backward()
    assert x.grad.tolist() == [6.0, -3.0]


def test_value_feeding_several_branches():
    x = var([0.5, 2.0])
    h = x * 3.0
    out = (h * h + h.exp() - h).sum()
    out.backward()
    xv = np.array([0.5, 2.0])
    hv = 3 * xv
    assert np.allclose(x.grad.numpy(), 3 * (2 * hv + np.exp(hv) - 1))


def test_accumulates_across_backward_calls():
    x = var([1.0, 2.0])
    (x * 2.0).sum().backward()
    (x * 3.0).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_second_backward_through_freed_graph_raises():
    x = var([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(GraphError, match="second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = var([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_no_grad_builds_no_graph():
    x = var([1.0])
    with no_grad():
        y = x * 2.0
    assert not y.requires_grad and y.grad_fn is None


def test_detach_cuts_the_graph():
    x = var([1.0, 2.0])
    y = x * 2.0
    d = y.detach()
    assert not d.requires_grad
    (d * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
