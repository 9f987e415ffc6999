"""The emitter with fake transports: batching, sampling, drops, a slow or dead server, reports."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

import rtxviz.events as events
from rtxviz import Tensor, Variable
from rtxviz.engine import hooks
from rtxviz.schema import validate_batch


class Recorder:
    """Keeps every batch; optionally slow or failing."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.batches: list[tuple[list[dict], int]] = []
        self.delay, self.fail = delay, fail
        self.lock = threading.Lock()

    def send(self, run, lines, dropped):
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise ConnectionRefusedError("no server")
        with self.lock:
            self.batches.append(([json.loads(line) for line in lines], dropped))

    def close(self):
        pass

    @property
    def events(self) -> list[dict]:
        return [e for b, _ in self.batches for e in b]


def train_steps(run, n, size=4):
    w = Variable.from_tensor(Tensor(np.ones(size, np.float32)), name="w")
    for i in range(n):
        with run.step(i):
            (w * w).sum().backward()


def test_run_sends_valid_batches_in_order():
    rec = Recorder()
    with events.watch(transport=rec, run_name="t", batch_size=7, flush_interval=0.01) as run:
        train_steps(run, 3)
    evs = rec.events
    validate_batch(evs)
    assert evs[0]["kind"] == "run_start" and evs[0]["name"] == "t" and evs[-1]["kind"] == "run_end"
    assert [e["step"] for e in evs if e["kind"] == "step_begin"] == [0, 1, 2]
    assert all(len(b) <= 7 for b, _ in rec.batches)
    assert run.stats()["sent"] == len(evs) and run.dropped == 0
    assert not hooks.ACTIVE and events.current_run() is None


def test_sampling_records_every_kth_step_and_detaches_between():
    rec = Recorder()
    with events.watch(transport=rec, sample_every=3, flush_interval=0.01) as run:
        w = Variable.from_tensor(Tensor(np.ones(2, np.float32)), name="w")
        attached = []
        for i in range(7):
            events.step(i)  # the marker form, without `with`
            attached.append(run.recording)
            (w * w).sum().backward()
    assert attached == [True, False, False, True, False, False, True]
    steps_with_nodes = sorted({e["step"] for e in rec.events if e["kind"] == "node"})
    assert steps_with_nodes == [0, 3, 6]
    begins = [e for e in rec.events if e["kind"] == "step_begin"]
    assert [b["sampled"] for b in begins] == attached
    assert len([e for e in rec.events if e["kind"] == "step_end"]) == 7


def test_full_queue_drops_and_counts_and_reports_the_count():
    rec = Recorder(delay=0.2)
    with events.watch(transport=rec, max_queue=20, batch_size=10, flush_interval=0.01) as run:
        t0 = time.perf_counter()
        train_steps(run, 30)
        elapsed = time.perf_counter() - t0
    assert elapsed < 2.0  # training never waited for the 0.2 s sends
    assert run.dropped > 0 and run.stats()["queue_dropped"] == run.dropped
    reports = [e for e in rec.events if e["kind"] == "dropped"]
    assert reports and reports[-1]["total"] <= run.dropped
    assert rec.events[-1]["kind"] == "run_end" or run.stats()["send_dropped"] > 0


def test_dead_server_never_blocks_and_counts_everything():
    rec = Recorder(fail=True)
    t0 = time.perf_counter()
    with events.watch(transport=rec, flush_interval=0.01, close_timeout=0.5) as run:
        train_steps(run, 20)
    assert time.perf_counter() - t0 < 3.0
    st = run.stats()
    assert st["sent"] == 0 and st["dropped"] > 0 and st["failed_batches"] >= 1
    assert "ConnectionRefusedError" in st["last_error"]


def test_url_from_environment_and_missing_url(monkeypatch):
    monkeypatch.setenv("RTXVIZ_SERVER", "http://127.0.0.1:9/base")
    run = events.watch(run_name="env")
    assert (run.transport.host, run.transport.port, run.transport.base) == ("127.0.0.1", 9, "/base")
    monkeypatch.delenv("RTXVIZ_SERVER")
    with pytest.raises(ValueError, match="RTXVIZ_SERVER"):
        events.watch()


def test_step_marker_without_a_run_is_a_no_op():
    with events.step(1):
        pass
    assert not hooks.ACTIVE


def test_optimizer_step_reports_norms_and_ratio():
    rec = Recorder()
    p = Variable.from_tensor(Tensor(np.array([3.0, 4.0], np.float32)), name="fc.weight")
    with events.watch(transport=rec, flush_interval=0.01) as run:
        with run.step(0):
            (p * p).sum().backward()   # grad = 2p = [6, 8], norm 10
            with events.optimizer_step([p]):
                p.data -= 0.1 * p.grad.data  # update [-0.6, -0.8], norm 1; p -> [2.4, 3.2], norm 4
    (rep,) = [e for e in rec.events if e["kind"] == "optimizer_step"]
    (row,) = rep["params"]
    assert row["name"] == "fc.weight"
    assert row["grad_norm"] == pytest.approx(10.0, rel=1e-6)
    assert row["update_norm"] == pytest.approx(1.0, rel=1e-6)
    assert row["param_norm"] == pytest.approx(4.0, rel=1e-6)
    assert row["update_ratio"] == pytest.approx(0.25, rel=1e-6)
    leaf_ids = {e["name"]: e["id"] for e in rec.events if e["kind"] == "leaf"}
    assert row["leaf"] == leaf_ids["fc.weight"]


def test_gradcheck_report_and_custom_events():
    rec = Recorder()
    with events.watch(transport=rec, flush_interval=0.01) as run:
        events.report_gradcheck("tanh", True, max_abs_error=1e-9, eps=1e-6)
        run.emit("lesson.note", text="look at the tanh node")
    (gc,) = [e for e in rec.events if e["kind"] == "gradcheck"]
    assert gc["passed"] and gc["eps"] == 1e-6
    assert [e["text"] for e in rec.events if e["kind"] == "lesson.note"] == ["look at the tanh node"]
    validate_batch(rec.events)


def test_exception_in_the_loop_marks_the_run_failed():
    rec = Recorder()
    with pytest.raises(RuntimeError):
        with events.watch(transport=rec, flush_interval=0.01):
            raise RuntimeError("boom")
    end = rec.events[-1]
    assert end["kind"] == "run_end" and end["status"] == "error" and "boom" in end["error"]


class PlainSGD:
    """Stands in for rtxviz.optim: reports its update through the engine hooks only."""

    def __init__(self, params, lr):
        self.param_groups = [{"params": list(params), "lr": lr}]

    def step(self):
        if hooks.ACTIVE:
            hooks.emit("optimizer_step_begin", optimizer=self)
        for g in self.param_groups:
            for p in g["params"]:
                p.data -= g["lr"] * p.grad.data
        if hooks.ACTIVE:
            hooks.emit("optimizer_step_end", optimizer=self)


def test_optimizer_reporting_through_engine_hooks():
    rec = Recorder()
    p = Variable.from_tensor(Tensor(np.array([3.0, 4.0], np.float32)), name="w")
    opt = PlainSGD([p], lr=0.1)
    with events.watch(transport=rec, flush_interval=0.01, sample_every=2) as run:
        for i in range(2):
            with run.step(i):
                p.grad = None
                (p * p).sum().backward()
                opt.step()
    (rep,) = [e for e in rec.events if e["kind"] == "optimizer_step"]  # step 1 is not sampled
    assert rep["optimizer"] == "PlainSGD" and rep["step"] == 0
    (row,) = rep["params"]
    # grad 2p = [6, 8]: norm 10; update 0.1 * grad: norm 1; p after [2.4, 3.2]: norm 4
    assert (row["grad_norm"], row["update_norm"], row["param_norm"]) == pytest.approx((10.0, 1.0, 4.0), rel=1e-6)
    assert row["update_ratio"] == pytest.approx(0.25, rel=1e-6)


def test_run_end_counts_the_events_still_queued_for_the_final_flush():
    # user review: run_end.sent was the count the server had acknowledged when run_end was built, before the final
    # flush, so it left out what that flush delivered
    rec = Recorder(delay=0.05)
    with events.watch(transport=rec, batch_size=5, flush_interval=0.01, close_timeout=30) as run:
        train_steps(run, 10)
    evs = rec.events
    end = evs[-1]
    assert end["kind"] == "run_end" and end["dropped"] == run.dropped == 0
    assert end["sent"] == len(evs) == run.stats()["sent"]  # every event of the run, run_end included


def test_run_end_sent_and_dropped_account_for_every_event_of_the_run():
    # with drops: `sent` counts the run's own events delivered (not the emitter's `dropped` notices), `dropped`
    # those lost, as known when run_end was built (nothing is lost after it here: close_timeout is long)
    rec = Recorder(delay=0.1)
    with events.watch(transport=rec, max_queue=20, batch_size=10, flush_interval=0.01, close_timeout=30) as run:
        train_steps(run, 30)
    evs = rec.events
    end = evs[-1]
    assert end["kind"] == "run_end" and run.stats()["send_dropped"] == 0 and end["dropped"] == run.dropped > 0
    assert end["sent"] == sum(e["kind"] != "dropped" for e in evs)
