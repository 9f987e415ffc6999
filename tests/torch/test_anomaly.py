"""rtxviz.torch.detect_anomaly names the forward op where a NaN/Inf started, with the user's line; PyTorch's own
detect_anomaly, which only checks backward, blames a different op."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from rtxviz.debug import AnomalyError  # noqa: E402
from rtxviz.torch import detect_anomaly  # noqa: E402


def overflowing_forward(w, c):
    h = w * w  # the cause: 1e20² overflows float32 to Inf
    p = torch.softmax(h, 0)  # Inf - Inf inside: NaN from here on
    return (p * c).sum()


CAUSE_LINE = inspect.getsourcelines(overflowing_forward)[1] + 1


def _inputs():
    return torch.tensor([1e20, 1.0], requires_grad=True), torch.tensor([1.0, 2.0])


def test_forward_check_names_the_op_and_line_where_it_started():
    w, c = _inputs()
    with pytest.raises(AnomalyError) as info, detect_anomaly():
        overflowing_forward(w, c).backward()
    e = info.value
    assert (e.op, e.phase, e.nan, e.inf) == ("mul", "forward", 0, 1)
    assert e.site.filename == __file__ and e.site.lineno == CAUSE_LINE
    assert "from finite inputs" in str(e) and "h = w * w" in str(e)
    assert e.inputs[0]["max"] == pytest.approx(1e20, rel=1e-6)


def test_pytorchs_detect_anomaly_blames_another_op():
    w, c = _inputs()
    with pytest.raises(RuntimeError) as info, pytest.warns(UserWarning), torch.autograd.detect_anomaly():
        overflowing_forward(w, c).backward()
    assert "SoftmaxBackward0" in str(info.value) and "Mul" not in str(info.value)


def test_backward_check_alone_finds_the_first_bad_gradient_with_its_forward_line():
    w, c = _inputs()
    with pytest.raises(AnomalyError) as info, detect_anomaly(forward=False):
        overflowing_forward(w, c).backward()
    e = info.value
    assert (e.op, e.phase, e.nan) == ("softmax", "backward", 2)
    assert e.site.lineno == CAUSE_LINE + 1


def test_finite_runs_pass_and_leave_no_mode():
    x = torch.randn(3, requires_grad=True)
    with detect_anomaly():
        (x.exp() * 2).sum().backward()
    assert torch._C._len_torch_function_stack() == 0
    assert torch.equal(x.grad, 2 * x.detach().exp())
