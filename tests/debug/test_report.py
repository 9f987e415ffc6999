"""grad_report on a model built to have a dead ReLU unit and an unused parameter (numbers derived by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, nn, optim
from rtxviz.debug import grad_report, relu_monitor, snapshot
from rtxviz.events import EventHook


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 3)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(3, 1)
        self.unused = nn.Parameter(Tensor.ones([2]))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def _net():
    net = Net()
    net.fc1.weight.data[...] = np.array([[1, 0], [0, 1], [-1, -1]], dtype=np.float32)
    net.fc1.bias.data[...] = np.array([0, 0, -10], dtype=np.float32)   # unit 2 < 0 for every x >= 0: dead
    net.fc2.weight.data[...] = 1.0
    net.fc2.bias.data[...] = 0.0
    return net


X = Tensor.from_slice([1.0, 2.0, 3.0, 1.0], [2, 2])
# by hand: pre = [[1, 2, -13], [3, 1, -14]], h = [[1, 2, 0], [3, 1, 0]], L = sum(h @ 1 + 0)
# dL/dW2 = sum_b h = [4, 3, 0]; dL/db2 = 2; dL/dpre = [[1, 1, 0]] * 2 rows; dL/dW1 = [[4, 3], [4, 3], [0, 0]];
# dL/db1 = [2, 2, 0]
EXPECTED = {"fc2.weight": 5.0, "fc2.bias": 2.0, "fc1.weight": math.sqrt(50.0), "fc1.bias": math.sqrt(8.0)}


def test_track_reports_norms_ratios_dead_units_and_unused():
    net = _net()
    opt = optim.SGD(net.parameters(), lr=0.1)
    with grad_report.track(net, opt) as rep:
        loss = net(X).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for name, norm in EXPECTED.items():
        assert rep.row(name).grad_norm == pytest.approx(norm, rel=1e-6)
    # SGD: Δ(fc2.weight) = -0.1·[4, 3, 0] -> ‖Δ‖ = 0.5; weight after = [0.6, 0.7, 1.0]
    assert rep.row("fc2.weight").update_ratio == pytest.approx(0.5 / math.sqrt(0.36 + 0.49 + 1.0), rel=1e-5)
    assert rep.row("unused").update_ratio == 0.0
    assert rep.unused == ["unused"]
    assert rep.dead_fraction("model.act") == pytest.approx(1 / 3)
    stat = rep.relus[0]
    assert (stat.units, stat.dead, stat.samples) == (3, 1, 2)
    text = rep.text()
    assert "parameters with no gradient: unused" in text
    assert "model.act: 1/3 (33.3%) over 2 sample(s)" in text


def test_plain_report_and_snapshot_pair():
    net = _net()
    with relu_monitor() as relus:
        net(X).sum().backward()
    snap = snapshot(net)
    for p in net.parameters():
        if p.grad is not None:
            p.data -= 0.5 * p.grad.data
    rep = grad_report(net, before=snap, relus=relus)
    assert rep.row("fc1.bias").update_norm == pytest.approx(0.5 * math.sqrt(8.0), rel=1e-6)
    assert rep.dead_fraction("model.act") == pytest.approx(1 / 3)
    plain = grad_report(dict(net.named_parameters()))
    assert plain.row("fc1.weight").grad_norm == pytest.approx(math.sqrt(50.0), rel=1e-6)
    assert plain.relus == [] and plain.row("fc1.weight").update_ratio is None


def test_report_is_emitted_as_an_event():
    net = _net()
    net(X).sum().backward()
    events = []
    hook = EventHook(events.append)
    rtxviz.add_hook(hook)
    try:
        grad_report(net)
    finally:
        rtxviz.remove_hook(hook)
    (ev,) = [e for e in events if e["kind"] == "grad_report"]
    assert ev["unused"] == ["unused"]
    row = next(r for r in ev["params"] if r["name"] == "fc2.weight")
    assert row["grad_norm"] == pytest.approx(5.0)
