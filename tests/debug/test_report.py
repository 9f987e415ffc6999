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


def test_optimizer_alone_says_how_to_get_update_ratios():
    net = _net()
    opt = optim.SGD(net.parameters(), lr=0.1)
    opt.zero_grad()
    net(X).sum().backward()
    opt.step()
    rep = grad_report(net, optimizer=opt)
    assert rep.optimizer == "SGD"
    assert all(r.update_ratio is None for r in rep.params)  # the values before the step are gone
    text = rep.text()
    assert ("update ratio ‖Δ‖/‖p‖: pass before=grad_report.snapshot(model) taken before opt.step(), or use "
            "`with grad_report.track(model, opt) as rep:`") in text
    assert "dead ReLU units: not watched" in text and "grad_report.relu_monitor()" in text
    assert grad_report.snapshot is snapshot and grad_report.relu_monitor is relu_monitor
    # the hinted pair works as written
    snap = grad_report.snapshot(net)
    opt.step()  # same gradients: fc2.bias moves by -0.1·2 again
    rep = grad_report(net, optimizer=opt, before=snap)
    assert rep.row("fc2.bias").update_norm == pytest.approx(0.2, rel=1e-6)
    assert "update ratio ‖Δ‖/‖p‖: pass" not in rep.text()


def test_track_around_a_whole_loop_reports_the_last_sgd_step():
    net = _net()
    opt = optim.SGD(net.parameters(), lr=0.1)
    with grad_report.track(net, opt) as rep:
        for _ in range(2):
            opt.zero_grad()
            net(X).sum().backward()
            opt.step()
    # by hand, step 1 (see EXPECTED): W1 = [[0.6, -0.3], [-0.4, 0.7], [-1, -1]], b1 = [-0.2, -0.2, -10],
    # W2 = [0.6, 0.7, 1.0], b2 = -0.2. Step 2: pre = [[-0.2, 0.8, -13], [1.3, -0.7, -14]],
    # h = [[0, 0.8, 0], [1.3, 0, 0]]: dL/dW2 = [1.3, 0.8, 0], dL/db2 = 2.
    assert rep.row("fc2.weight").grad_norm == pytest.approx(math.sqrt(1.69 + 0.64), rel=1e-5)
    # Δ(W2) = -0.1·[1.3, 0.8, 0] -> W2 = [0.47, 0.62, 1.0]
    assert rep.row("fc2.weight").update_norm == pytest.approx(0.1 * math.sqrt(2.33), rel=1e-5)
    assert rep.row("fc2.weight").update_ratio == pytest.approx(
        0.1 * math.sqrt(2.33) / math.sqrt(0.47 ** 2 + 0.62 ** 2 + 1.0), rel=1e-5)
    assert rep.row("fc2.bias").update_ratio == pytest.approx(0.2 / 0.4, rel=1e-5)  # b2: -0.2 -> -0.4
    assert rep.dead_fraction("model.act") == pytest.approx(1 / 3)  # unit 2 dead in the last forward
    assert rep.optimizer == "SGD" and rep.unused == ["unused"]
    assert "update ratio ‖Δ‖/‖p‖: pass" not in rep.text() and "not watched" not in rep.text()


def test_track_without_optimizer_watches_any_step_and_hand_updates():
    net = _net()
    opt = optim.SGD(net.parameters(), lr=0.1)
    with grad_report.track(net) as rep:
        opt.zero_grad()
        net(X).sum().backward()
        opt.step()
    assert rep.optimizer == "SGD"
    assert rep.row("fc2.bias").update_ratio == pytest.approx(0.2 / 0.2, rel=1e-5)  # b2: 0 -> -0.2
    net = _net()
    with grad_report.track(net) as rep:
        net(X).sum().backward()
        for p in net.parameters():
            if p.grad is not None:
                p.data -= 0.5 * p.grad.data  # by hand: measured against the values at entry
    assert rep.row("fc1.bias").update_norm == pytest.approx(0.5 * math.sqrt(8.0), rel=1e-6)
