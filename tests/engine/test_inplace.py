"""In-place ops and version counters (issue 13): values and gradients through in-place ops, and a backward that
would read a saved tensor modified in place raises, naming the op, the tensor, both versions and the sites."""

from __future__ import annotations

import numpy as np
import pytest

import rtxviz
from rtxviz import GraphError, Tensor, Variable, nn, optim
from rtxviz.engine.gradcheck import gradcheck, gradgradcheck
from rtxviz.engine.versions import InplaceError

HERE = __file__


def _leaf(values: list[float]) -> Variable:
    return Variable(np.asarray(values, dtype=np.float64), requires_grad=True)


@pytest.mark.parametrize("name, fn, closed", [
    ("add_", lambda h, o: h.add_(o), lambda x, o: x + o),
    ("add_ alpha", lambda h, o: h.add_(o, alpha=2.0), lambda x, o: x + 2 * o),
    ("sub_", lambda h, o: h.sub_(o), lambda x, o: x - o),
    ("mul_", lambda h, o: h.mul_(o), lambda x, o: x * o),
    ("div_", lambda h, o: h.div_(o), lambda x, o: x / o),
    ("+=", lambda h, o: h.__iadd__(o), lambda x, o: x + o),
    ("*=", lambda h, o: h.__imul__(o), lambda x, o: x * o),
    ("clamp_", lambda h, o: h.clamp_(-0.5, 0.5), lambda x, o: np.clip(x, -0.5, 0.5)),
    ("copy_", lambda h, o: h.copy_(o), lambda x, o: o + 0 * x),
    ("masked_fill_", lambda h, o: h.masked_fill_(h > 0, 9.0), lambda x, o: np.where(x > 0, 9.0, x)),
])
def test_in_place_ops_compute_in_place_and_differentiate(name: str, fn: object, closed: object) -> None:
    rng = np.random.default_rng(1)
    x0, o0 = rng.uniform(-1, 1, (3, 4)), rng.uniform(0.5, 1.5, (3, 4))

    def f(x: Tensor, o: Tensor) -> Tensor:
        h = x * 1.0  # a non-leaf: in-place ops on it are recorded
        buffer = h.data
        out = fn(h, o)
        assert out is h and h.data is buffer, "not in place"
        return h

    got = f(Tensor(x0), Tensor(o0))
    np.testing.assert_allclose(got.numpy(), closed(x0, o0), err_msg=name)
    inputs = [Tensor(x0), Tensor(o0)]
    assert gradcheck(f, inputs), name
    assert gradgradcheck(f, inputs), name


def test_setitem_values_and_gradients() -> None:
    x0, v0 = np.arange(12.0).reshape(3, 4) / 7, np.array([0.5, -2.0])

    def f(x: Tensor, v: Tensor) -> Tensor:
        h = x * 2.0
        h[1:, 2] = v
        return h

    want = x0 * 2.0
    want[1:, 2] = v0
    np.testing.assert_allclose(f(Tensor(x0), Tensor(v0)).numpy(), want)
    assert gradcheck(f, [Tensor(x0), Tensor(v0)]) and gradgradcheck(f, [Tensor(x0), Tensor(v0)])


def test_plain_tensors_and_no_grad_write_in_place_too() -> None:
    t = Tensor(np.ones(3))
    t += 2.0
    t[0] = 5.0
    t.mul_(2.0)
    assert t.tolist() == [10.0, 6.0, 6.0] and t._version == 3
    w = _leaf([1.0, 2.0])
    with rtxviz.no_grad():
        w -= 0.5
        w.zero_()
    assert w.tolist() == [0.0, 0.0] and w.is_leaf and w.requires_grad


def test_in_place_on_a_leaf_that_requires_grad_raises_as_in_pytorch() -> None:
    w = _leaf([1.0, 2.0])
    for write in (lambda: w.__iadd__(1.0), lambda: w.add_(1.0), lambda: w.__setitem__(0, 3.0), lambda: w.zero_()):
        with pytest.raises(GraphError, match="leaf Variable that requires grad.*in-place"):
            write()
    assert w.tolist() == [1.0, 2.0] and w._version == 0


def test_views_share_the_version_of_their_buffer() -> None:
    t = Tensor(np.zeros((2, 3)))
    view = t.reshape(6)
    view.add_(1.0)
    assert t._version == 1 and view._version == 1 and t.tolist() == [[1.0] * 3] * 2


def test_writing_a_saved_tensor_makes_its_backward_raise_with_versions_and_sites() -> None:
    a = _leaf([1.0, 2.0])
    h = a * 1.0
    y = h.exp()  # exp saves its output
    z = h * h    # mul saves its inputs: h itself
    h.add_(1.0)  # the write (this line is named in the error)
    with pytest.raises(InplaceError) as err:
        z.sum().backward()
    text = str(err.value)
    assert "backward of mul" in text and "input 0" in text and "float64 of shape (2,)" in text
    assert "saved at version 0 and is now at version 1" in text
    assert f"add_ at {HERE}:" in text
    assert "detect_anomaly" in text
    y.sum().backward()  # exp saved its own output (a separate buffer): untouched, its backward runs


def test_under_detect_anomaly_the_error_names_the_line_that_created_the_op() -> None:
    a = _leaf([1.0, 2.0])
    with rtxviz.detect_anomaly():
        h = a * 1.0
        z = h * h; line = z.grad_fn and __import__("inspect").currentframe().f_lineno  # noqa: E702
        h.mul_(2.0)
        with pytest.raises(InplaceError, match=f"created at {HERE}:{line}"):
            z.sum().backward()


def test_an_optimizer_step_between_forward_and_backward_is_caught() -> None:
    rtxviz.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = Tensor(np.ones((4, 3), dtype=np.float32))
    loss = model(x).sum()
    loss.backward()
    opt.step()              # fine: after backward
    loss = model(x).sum()
    opt.step()              # the weights the forward saved change before backward
    with pytest.raises(InplaceError, match=r"`model.weight`.*SGD\.step"):
        loss.backward()


def test_the_normal_training_loop_is_untouched() -> None:
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = Tensor(np.ones((4, 3), dtype=np.float32))
    for _ in range(3):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    assert all(p._version == 3 for p in model.parameters())
