"""The optimizers' measured update (rtxviz/_native.c `add_measured`): bit for bit the parameters of an unwatched
step, and the norms it reports equal to float64 norms computed independently. Both paths run: the kernel, and
numpy's `+=` with the watcher measuring on its own (what a machine without a C compiler gets)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import rtxviz.events as events
from rtxviz import Tensor, Variable
from rtxviz.accel import add_measured
from rtxviz.optim import SGD, Adam, AdamW, RMSprop
from rtxviz.optim import optimizer as optimizer_module
from tests.native import need_native

needs_native = pytest.mark.skipif(
    add_measured is None and os.environ.get("RTXVIZ_REQUIRE_NATIVE") != "1",
    reason="rtxviz._native is not built (python setup.py build_ext --inplace)",
)

OPTIMIZERS = {
    "sgd": lambda ps: SGD(ps, lr=0.05),
    "sgd-momentum-nesterov-wd": lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: Adam(ps, lr=0.01),
    "adamw-amsgrad": lambda ps: AdamW(ps, lr=0.01, amsgrad=True),
    "rmsprop-centered-momentum": lambda ps: RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
}


class Sink:
    def __init__(self):
        self.events: list[dict] = []

    def send(self, run, lines, dropped):
        import json

        self.events.extend(json.loads(line) for line in lines)

    def close(self):
        pass


def _params(dtype, seed=0):
    rng = np.random.default_rng(seed)
    # sizes with a tail past the kernel's 32 lanes and a block boundary (4096)
    shapes = {"w": (67, 65), "b": (33,), "s": ()}
    return [Variable.from_tensor(Tensor(rng.standard_normal(s).astype(dtype)), name=n) for n, s in shapes.items()]


def _train(opt_name, dtype, watch, steps=4):
    params = _params(dtype)
    opt = OPTIMIZERS[opt_name](params)
    rng = np.random.default_rng(1)
    targets = [rng.standard_normal(p.shape).astype(dtype) for p in params]
    sink = Sink()
    snapshots = []

    def one_step():
        opt.zero_grad()
        loss = None
        for p, t in zip(params, targets, strict=True):
            term = ((p - Tensor(t)) * (p - Tensor(t))).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        before = [p.data.copy() for p in params]
        opt.step()
        snapshots.append((before, [p.data.copy() for p in params]))

    if watch:
        with events.watch(transport=sink, flush_interval=0.01) as run:
            for i in range(steps):
                with run.step(i):
                    one_step()
    else:
        for _ in range(steps):
            one_step()
    return snapshots, [e for e in sink.events if e["kind"] == "optimizer_step"]


@pytest.fixture(params=["native", "numpy"])
def update_path(request, monkeypatch):
    if request.param == "native":
        need_native(add_measured is not None)
    else:
        monkeypatch.setattr(optimizer_module, "_add_measured", None)
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_watched_steps_match_unwatched_bit_for_bit_and_report_true_norms(opt_name, dtype, update_path):
    plain, _ = _train(opt_name, dtype, watch=False)
    watched, reports = _train(opt_name, dtype, watch=True)
    for (_, a), (_, b) in zip(plain, watched, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)  # the same floats, not merely close
    assert len(reports) == len(watched)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for (before, after), rep in zip(watched, reports, strict=True):
        for row, b, a in zip(rep["params"], before, after, strict=True):
            a64, u64 = a.astype(np.float64), a.astype(np.float64) - b.astype(np.float64)
            assert row["param_norm"] == pytest.approx(math.sqrt(float(np.sum(a64 * a64))), rel=tol)
            # u is the array the optimizer added; (p + u) - p recovers it up to one rounding of p's size
            assert row["update_norm"] == pytest.approx(math.sqrt(float(np.sum(u64 * u64))),
                                                       rel=1e-3 if dtype == np.float32 else 1e-9)
            assert row["update_ratio"] == pytest.approx(row["update_norm"] / row["param_norm"], rel=1e-12)


@needs_native
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 4096, 4096 * 3 + 45])
def test_add_measured_adds_exactly_and_sums_squares(dtype, n):
    rng = np.random.default_rng(n)
    p = rng.standard_normal(n).astype(dtype)
    u = (rng.standard_normal(n) * 1e-3).astype(dtype)
    expected = p + u  # numpy's own addition
    psq, usq = add_measured(p, u)
    assert np.array_equal(p, expected)
    e64, u64 = expected.astype(np.float64), u.astype(np.float64)
    rel = 1e-6 if dtype == np.float32 else 1e-13
    assert psq == pytest.approx(float(np.sum(e64 * e64)), rel=rel, abs=1e-300)
    assert usq == pytest.approx(float(np.sum(u64 * u64)), rel=rel, abs=1e-300)


@needs_native
def test_add_measured_refuses_without_writing():
    p = np.arange(64, dtype=np.float32)
    original = p.copy()
    for args, error in [
        ((p[:32], p[16:48]), ValueError),                  # overlapping buffers
        ((p, np.ones(63, np.float32)), TypeError),         # sizes differ
        ((p, np.ones(64, np.float64)), TypeError),         # formats differ
        ((p[::2], np.ones(32, np.float32)), ValueError),   # not contiguous
        ((p.astype(np.int32), np.ones(64, np.int32)), TypeError),
        ((p.astype(">f4"), np.ones(64, ">f4")), TypeError),  # byte-swapped
    ]:
        with pytest.raises(error):
            add_measured(*args)
        assert np.array_equal(p, original)
    ro = p.copy()
    ro.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        add_measured(ro, np.ones(64, np.float32))
    # NaN/Inf: added as numpy adds them; the sums say so (the report then carries None)
    q = np.array([1.0, np.inf, 2.0], np.float32)
    psq, _ = add_measured(q, np.array([np.nan, 0.0, 1.0], np.float32))
    assert math.isnan(psq) and np.isnan(q[0]) and np.isinf(q[1]) and q[2] == 3.0


class ClampSGD(SGD):
    """A user's optimizer that changes the parameter after the built-in update added to it."""

    def _update(self, param, grad, state, group):
        u = super()._update(param, grad, state, group)
        np.clip(param, -0.5, 0.5, out=param)
        return u


def test_a_subclass_that_writes_after_the_add_reports_the_true_parameter_norm(update_path):
    p = Variable.from_tensor(Tensor(np.array([3.0, -4.0, 0.25], np.float32)), name="w")
    opt = ClampSGD([p], lr=0.1)
    sink = Sink()
    with events.watch(transport=sink, flush_interval=0.01) as run:
        with run.step(0):
            (p * p).sum().backward()
            opt.step()
    (rep,) = [e for e in sink.events if e["kind"] == "optimizer_step"]
    # after the step: [3, -4, 0.25] - 0.1 * 2p = [2.4, -3.2, 0.2], clamped to [0.5, -0.5, 0.2]
    assert rep["params"][0]["param_norm"] == pytest.approx(math.sqrt(0.25 + 0.25 + 0.04), rel=1e-6)


def test_mismatched_shapes_fail_as_numpy_does_while_watched(update_path):
    opt = SGD([Variable.from_tensor(Tensor(np.zeros((2, 3), np.float32)))], lr=0.1)
    opt._measuring = True
    for shape in [(3, 2), (1, 6)]:
        param = np.zeros((2, 3), np.float32)
        with pytest.raises(ValueError):
            opt._add_update(param, np.ones(shape, np.float32))
        assert not param.any()
    param = np.zeros((2, 3), np.float32)
    opt._add_update(param, np.ones(3, np.float32))  # broadcasting, as numpy's += allows
    assert param.tolist() == [[1.0] * 3] * 2


@needs_native
def test_unaligned_buffers_are_refused_and_summarised_by_numpy():
    from rtxviz.accel import summary
    from rtxviz.summary import tensor_stats

    raw = np.zeros(4 * 64 + 1, np.uint8)
    x = raw[1:].view(np.float32)  # one byte off: not a multiple of 4
    x[:] = np.arange(64, dtype=np.float32)
    assert not x.flags.aligned
    with pytest.raises(ValueError):
        summary(x)
    with pytest.raises(ValueError):
        add_measured(x, np.ones(64, np.float32))
    assert x.tolist() == list(range(64))
    s = tensor_stats(x)
    assert (s["min"], s["max"], s["mean"]) == (0.0, 63.0, 31.5)
    from rtxviz.summary import count_nonfinite, norm

    assert norm(x) == pytest.approx(math.sqrt(sum(i * i for i in range(64))))
    assert count_nonfinite(x) == (0, 0)
