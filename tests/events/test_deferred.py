"""Gradient summaries computed by the sender thread (defer_stats) and the optimizer's update report."""

from __future__ import annotations

import numpy as np
import pytest

import rtxviz.events as events
from rtxviz import Tensor, Variable
from rtxviz.optim import SGD
from tests.events.test_emitter import Recorder


def _param(values, name="w"):
    return Variable.from_tensor(Tensor(np.array(values, np.float32)), name=name)


@pytest.mark.parametrize("max_bytes", [64 << 20, 0])  # 0: over the memory bound, summarised inline
def test_sender_side_stats_of_a_known_gradient(max_bytes):
    rec = Recorder()
    w = _param([3.0, -4.0])
    with events.watch(transport=rec, flush_interval=0.01, defer_stats=True, defer_max_bytes=max_bytes) as run:
        with run.step(0):
            (w * w).sum().backward()  # dL/dw = 2w = [6, -8]
    (lg,) = [e for e in rec.events if e["kind"] == "leaf_grad"]
    s = lg["stats"]
    assert s["shape"] == [2] and s["norm"] == pytest.approx(10.0) and (s["min"], s["max"]) == (-8.0, 6.0)
    assert s["mean"] == pytest.approx(-1.0) and s["nan"] == s["inf"] == 0 and s["values"] == [6.0, -8.0]
    grads = [e for e in rec.events if e["kind"] == "grad"]
    assert all("_op" not in e for e in grads)
    # sum's backward sends ones([2]) to the mul node
    assert grads[0]["inputs"][0]["values"] == [1.0, 1.0]
    assert (run.stats()["inline_stats"] == 0) == (max_bytes > 0)


def test_nan_gradient_gives_a_backward_anomaly_right_after_its_grad_event():
    rec = Recorder()
    x = _param([4.0, 0.0], "x")
    with events.watch(transport=rec, flush_interval=0.01, defer_stats=True) as run:
        with run.step(0):
            x.sqrt().sum().backward()  # sqrt(0) = 0 is finite; its gradient 1 / (2·sqrt(0)) is Inf
    evs = rec.events
    i = next(k for k, e in enumerate(evs) if e["kind"] == "anomaly")
    an, grad = evs[i], evs[i - 1]
    assert grad["kind"] == "grad" and grad["node"] == an["node"] and an["op"] == "sqrt"
    assert an["phase"] == "backward" and an["bad_inputs"] == [0] and an["origin"] is True
    assert (an["nan"], an["inf"]) == (0, 1) and grad["inputs"][0]["inf"] == 1
    assert grad["inputs"][0]["values"] == [0.25, None]


def test_sgd_reports_its_update_without_a_snapshot():
    rec = Recorder()
    p = _param([3.0, 4.0], "fc.weight")
    opt = SGD([p], lr=0.1, momentum=0.9)
    with events.watch(transport=rec, flush_interval=0.01) as run:
        for i in range(2):
            with run.step(i):
                opt.zero_grad()
                (p * p).sum().backward()
                opt.step()
        assert not run.hook._snap_bufs  # the update came from the optimizer: nothing was copied
    rows = [e["params"][0] for e in rec.events if e["kind"] == "optimizer_step"]
    # step 0: g = [6, 8], buf = g, update -0.1·g (norm 1), p = [2.4, 3.2] (norm 4)
    # step 1: g = [4.8, 6.4], buf = 0.9·[6, 8] + g = [10.2, 13.6] (norm 17), update norm 1.7, p = [1.38, 1.84]
    # (norm 2.3)
    assert (rows[0]["grad_norm"], rows[0]["update_norm"], rows[0]["param_norm"]) == pytest.approx((10, 1, 4), 1e-6)
    assert rows[0]["update_ratio"] == pytest.approx(0.25, rel=1e-6)
    assert (rows[1]["grad_norm"], rows[1]["update_norm"], rows[1]["param_norm"]) == pytest.approx((8, 1.7, 2.3), 1e-6)
    assert rows[1]["update_ratio"] == pytest.approx(1.7 / 2.3, rel=1e-6)


def test_sgd_update_report_with_deferred_grad_norm():
    rec = Recorder()
    p = _param([3.0, 4.0])
    opt = SGD([p], lr=0.1)
    with events.watch(transport=rec, flush_interval=0.01, defer_stats=True) as run:
        with run.step(0):
            (p * p).sum().backward()
            opt.step()
    (rep,) = [e for e in rec.events if e["kind"] == "optimizer_step"]
    assert rep["params"][0]["grad_norm"] == pytest.approx(10.0, rel=1e-6)
    assert rep["params"][0]["update_ratio"] == pytest.approx(0.25, rel=1e-6)
