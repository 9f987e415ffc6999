"""A watched PyTorch run carries what rtxviz.torch.detect_anomaly finds: the same `anomaly` events an rtxviz run
sends, on the node PyTorch's graph has for the op, naming the op, its module path and the user's file and line."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import rtxviz.torch as rt  # noqa: E402
from rtxviz.debug import AnomalyError  # noqa: E402
from rtxviz.schema import validate_event  # noqa: E402


class Overflow(nn.Module):
    """`self.scale` squares its input inside `blow`: 1e20 squared overflows float32 to Inf."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.blow = Square()

    def forward(self, x):
        return self.blow(self.lin(x)).softmax(-1).sum()


class Square(nn.Module):
    def forward(self, h):
        return h * h  # the cause


CAUSE_LINE = inspect.getsourcelines(Square.forward)[1] + 1


def _model() -> Overflow:
    torch.manual_seed(0)
    m = Overflow()
    with torch.no_grad():
        m.lin.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        m.lin.bias.zero_()
    return m


@pytest.mark.parametrize("watch_outside", [True, False])
def test_forward_nan_under_detect_anomaly_is_an_anomaly_event_on_its_node(watch_outside):
    model = _model()
    rec = rt.record(model)
    x = torch.tensor([[1e20, 1.0]])
    with pytest.raises(AnomalyError) as info:
        if watch_outside:
            with rec, rt.detect_anomaly():
                model(x)
        else:
            with rt.detect_anomaly(), rec:
                model(x)
    assert info.value.op == "mul"
    for e in rec.events:
        validate_event(e)
    anomalies = [e for e in rec.events if e["kind"] == "anomaly"]
    assert len(anomalies) == 1
    a = anomalies[0]
    nodes = {e["id"]: e for e in rec.events if e["kind"] == "node"}
    # the node it names is the one PyTorch's graph holds for h * h: MulBackward0 behind linear
    bad = nodes[a["node"]]
    assert (bad["op"], bad["attrs"]["grad_fn"], bad["module"]) == ("mul", "MulBackward0", "blow")
    assert nodes[bad["inputs"][0]["node"]]["op"] == "linear"
    assert (a["phase"], a["op"], a["inf"], a["nan"], a["origin"]) == ("forward", "mul", 1, 0, True)
    assert f"{__file__}:{CAUSE_LINE}" in a["message"] and "h * h" in a["message"] and "in blow" in a["message"]
    # the node comes before the event that names it (the page resolves the id on arrival)
    assert rec.events.index(bad) < rec.events.index(a)


def test_backward_nonfinite_gradient_is_an_anomaly_event_after_its_grad():
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    rec = rt.record(None)
    with pytest.raises(AnomalyError) as info, rec, rt.detect_anomaly(forward=False):
        y = x.sqrt()  # d sqrt(x)/dx = 1 / (2 sqrt(x)): Inf at 0
        line = inspect.currentframe().f_lineno - 1
        (y * 3).sum().backward()
    assert (info.value.op, info.value.phase) == ("sqrt", "backward")
    for e in rec.events:
        validate_event(e)
    kinds = [e["kind"] for e in rec.events]
    sqrt = next(e for e in rec.events if e["kind"] == "node" and e["op"] == "sqrt")
    a = next(e for e in rec.events if e["kind"] == "anomaly")
    assert (a["phase"], a["node"], a["inf"], a["origin"], a["bad_inputs"]) == ("backward", sqrt["id"], 1, True, [0])
    assert f"{__file__}:{line}" in a["message"]
    # the gradient it sent is reported too, before the anomaly, with PyTorch's value: 3 / (2 sqrt(x)) = [inf, 0.75]
    g = next(e for e in rec.events if e["kind"] == "grad" and e["node"] == sqrt["id"])
    assert rec.events.index(g) < rec.events.index(a)
    assert g["inputs"][0]["inf"] == 1 and g["inputs"][0]["max"] == pytest.approx(0.75)
    assert kinds.index("backward_end") > kinds.index("anomaly")  # backward ends: the page stops saying running


def test_no_anomaly_events_without_detect_anomaly():
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    with rt.record(None) as rec:
        (x.log() * 3).sum().backward()  # -Inf in forward, Inf in backward: nobody asked to check
    assert [e for e in rec.events if e["kind"] == "anomaly"] == []


def test_a_backward_that_raises_is_an_error_event_before_its_end():
    # PyTorch refuses a backward whose saved tensor was modified in place; the run says so, as an rtxviz run does
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError) as info, rt.record(None) as rec:
        y = x.exp()
        z = y * 2
        y.add_(1)  # exp saved its output: backward can no longer use it
        z.sum().backward()
    for e in rec.events:
        validate_event(e)
    errors = [e for e in rec.events if e["kind"] == "anomaly"]
    assert len(errors) == 1 and errors[0]["reason"] == "error"
    assert errors[0]["message"] == f"RuntimeError: {info.value}"[:2000]
    kinds = [e["kind"] for e in rec.events]
    assert kinds.index("backward_begin") < kinds.index("anomaly") < kinds.index("backward_end")


def test_detect_anomaly_in_backward_is_not_reported_twice():
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    with pytest.raises(AnomalyError), rt.record(None) as rec, rt.detect_anomaly(forward=False):
        x.sqrt().sum().backward()
    assert [e.get("reason") for e in rec.events if e["kind"] == "anomaly"] == ["nonfinite"]
