"""Gradient checkpointing: exact gradients against the unchecked path (float64), memory counted in saved bytes,
dropout replay, nesting, no_grad inside, closures over captured Variables, recompute-mismatch errors, events.

Expected values: the unchecked run of the same program (same ops in the same order, so float64 results must be
bitwise equal), central finite differences, and closed forms for the segment splits and byte counts."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

import rtxviz
from rtxviz import EngineHook, GraphError, Tensor, Variable, no_grad
from rtxviz.engine import memory_stats, reset_peak_memory_stats
from rtxviz.engine.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointStrategy,
    checkpoint,
    checkpoint_sequential,
)
from rtxviz.engine.errors import RtxvizError
from rtxviz.engine.ops.linalg import MatMul
from tests.finite_differences import numeric_grad

S = CheckpointStrategy


def var(array: np.ndarray, requires_grad: bool = True) -> Variable:
    return Variable(np.asarray(array, dtype=np.float64), requires_grad=requires_grad)


def make_mlp(n_layers: int, width: int, seed: int = 0) -> tuple[list, list]:
    """`n_layers` of relu(x @ W + b), written with Variables; returns (layers, parameters)."""
    rng = np.random.default_rng(seed)
    params, layers = [], []
    for _ in range(n_layers):
        w = var(rng.standard_normal((width, width)) / math.sqrt(width))
        b = var(rng.standard_normal(width) * 0.1)
        params += [w, b]
        layers.append(lambda x, w=w, b=b: (x.matmul(w) + b).relu())
    return layers, params


def run(layers: list, params: list, x: Variable, strategy: CheckpointStrategy) -> tuple[float, list]:
    for p in params:
        p.zero_grad()
    x.zero_grad()
    out = checkpoint_sequential(layers, x, strategy=strategy)
    loss = (out * out).mean()
    loss.backward()
    grads = [p.grad.numpy().copy() for p in params]
    if x.requires_grad:
        grads.append(x.grad.numpy().copy())
    return float(loss.numpy()), grads


# -- strategies ----------------------------------------------------------------------------------------------------
def test_segments_closed_forms() -> None:
    assert S.SQRT_N.segments(16) == [(0, 4), (4, 8), (8, 12), (12, 16)]
    assert S.SQRT_N.segments(32) == [(0, 6), (6, 12), (12, 17), (17, 22), (22, 27), (27, 32)]
    assert len(S.SQRT_N.segments(100)) == 10 and len(S.SQRT_N.segments(101)) == 11
    assert S.EVERY(4).segments(10) == [(0, 4), (4, 8), (8, 10)]
    assert S.NONE.segments(5) == [(0, 5)]
    assert S.SELECTIVE({"matmul"}).segments(3) == [(0, 1), (1, 2), (2, 3)]
    assert S.EVERY(3) == S.EVERY(3) and S.EVERY(3) != S.EVERY(4)
    with pytest.raises(ValueError, match="positive int"):
        S.EVERY(0)
    with pytest.raises(TypeError, match="CheckpointStrategy"):
        checkpoint_sequential([lambda t: t], var([1.0]), strategy="sqrt")


# -- exact gradients -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", [S.SQRT_N, S.EVERY(4), S.EVERY(3), S.SELECTIVE({"matmul"}),
                                      S.SELECTIVE(lambda name: name in ("matmul", "add"))])
@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_gradients_equal_unchecked_exactly(strategy: CheckpointStrategy, input_requires_grad: bool) -> None:
    layers, params = make_mlp(10, 8, seed=1)
    x = var(np.random.default_rng(2).standard_normal((5, 8)), requires_grad=input_requires_grad)
    loss0, ref = run(layers, params, x, S.NONE)
    loss1, got = run(layers, params, x, strategy)
    assert loss0 == loss1
    assert len(ref) == len(got)
    for a, b in zip(ref, got, strict=True):
        assert np.array_equal(a, b)


def test_checkpoint_matches_finite_differences() -> None:
    rng = np.random.default_rng(3)
    w = var(rng.standard_normal((3, 3)))
    x0 = rng.standard_normal((2, 3))

    def f(xv: np.ndarray) -> float:
        x = var(xv, requires_grad=False)
        return float(checkpoint(lambda t: (t.matmul(w)).tanh(), x).sum().numpy())

    x = var(x0)
    checkpoint(lambda t: (t.matmul(w)).tanh(), x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), numeric_grad(f, x0), rtol=1e-6, atol=1e-8)


def test_grad_function_through_checkpoint_leaves_dot_grad_alone() -> None:
    layers, params = make_mlp(6, 4, seed=4)
    x = var(np.random.default_rng(5).standard_normal((3, 4)))
    out = checkpoint_sequential(layers, x)
    ref = rtxviz.grad((checkpoint_sequential(layers, x, strategy=S.NONE) ** 2).sum(), [x, params[0], params[-1]])
    got = rtxviz.grad((out ** 2).sum(), [x, params[0], params[-1]])
    for a, b in zip(ref, got, strict=True):
        assert np.array_equal(a.numpy(), b.numpy())
    assert all(p.grad is None for p in params) and x.grad is None


# -- what is saved -------------------------------------------------------------------------------------------------
def _peak(strategy: CheckpointStrategy, layers: list, params: list, x: Variable) -> int:
    for p in params:
        p.zero_grad()
    base = memory_stats(scan=False)["current"]
    reset_peak_memory_stats()
    out = checkpoint_sequential(layers, x, strategy=strategy)
    ((out * out).mean()).backward()
    del out
    stats = memory_stats(scan=False)
    assert stats["current"] == base  # everything saved for backward was given back
    return stats["peak"] - base


def test_peak_saved_bytes_is_order_sqrt_n() -> None:
    n, width, batch = 16, 64, 32
    layers, params = make_mlp(n, width, seed=6)
    x = var(np.random.default_rng(7).standard_normal((batch, width)), requires_grad=False)
    act = batch * width * 8
    none = _peak(S.NONE, layers, params, x)
    sqrt_n = _peak(S.SQRT_N, layers, params, x)
    every4 = _peak(S.EVERY(4), layers, params, x)
    every8 = _peak(S.EVERY(8), layers, params, x)
    # NONE keeps one activation per layer (relu's output, which is also the next matmul's input).
    assert none == n * act
    # SQRT_N: 4 segments of 4; peak = 2 checkpointed boundaries + the last segment's 4 relu outputs and its input.
    assert sqrt_n == 7 * act
    assert sqrt_n <= 2.5 * math.sqrt(n) / n * none
    assert sqrt_n <= every4 < every8 < none


def test_selective_keeps_matmul_outputs_and_does_not_recompute_them(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    original = MatMul.forward

    def counting(ctx, a, b):
        calls["n"] += 1
        return original(ctx, a, b)

    monkeypatch.setattr(MatMul, "forward", staticmethod(counting))
    layers, params = make_mlp(4, 8, seed=8)
    x = var(np.random.default_rng(9).standard_normal((3, 8)), requires_grad=False)
    _, ref = run(layers, params, x, S.NONE)
    calls["n"] = 0
    reset_peak_memory_stats()
    out = checkpoint_sequential(layers, x, strategy=S.SELECTIVE({"matmul"}))
    after_forward = memory_stats(scan=False)["current"]
    assert calls["n"] == 4
    for p in params:
        p.zero_grad()
    (out * out).mean().backward()
    # backward: one matmul per parameter gradient and one per input gradient of layers 2..4, none recomputed
    assert calls["n"] == 4 + 4 + 3
    assert MatMul.forward is not None and MatMul.__dict__["forward"].__func__ is counting  # patch undone
    for a, p in zip(ref, params, strict=False):
        assert np.array_equal(a, p.grad.numpy())
    # saved after forward: 4 matmul outputs + 3 layer boundaries (the first input is not an activation)
    assert after_forward == 7 * 3 * 8 * 8


# -- random ops ----------------------------------------------------------------------------------------------------
def test_dropout_replays_the_same_numbers() -> None:
    w = var(np.random.default_rng(10).standard_normal((6, 6)))
    x = var(np.random.default_rng(11).standard_normal((4, 6)))

    def seg(t: Variable) -> Variable:
        return t.matmul(w).dropout(0.5).relu()

    grads = []
    for use_ckpt in (False, True):
        w.zero_grad()
        x.zero_grad()
        rtxviz.manual_seed(123)
        y = checkpoint(seg, x) if use_ckpt else seg(x)
        (y * y).sum().backward()
        after = rtxviz.engine.random.generator().random()  # the generator is where the unchecked run left it
        grads.append((x.grad.numpy().copy(), w.grad.numpy().copy(), after))
    assert np.array_equal(grads[0][0], grads[1][0]) and np.array_equal(grads[0][1], grads[1][1])
    assert grads[0][2] == grads[1][2]


# -- nesting, no_grad, closures ------------------------------------------------------------------------------------
def test_nested_checkpoints() -> None:
    layers, params = make_mlp(6, 5, seed=12)
    x = var(np.random.default_rng(13).standard_normal((2, 5)))
    _, ref = run(layers, params, x, S.NONE)

    def inner(t: Variable) -> Variable:
        return checkpoint_sequential(layers[2:5], t, strategy=S.EVERY(1))

    def outer(t: Variable) -> Variable:
        t = layers[1](layers[0](t))
        return checkpoint(inner, t)

    events = _Events()
    for p in params:
        p.zero_grad()
    x.zero_grad()
    with events:
        out = layers[5](checkpoint(outer, x))
        (out * out).mean().backward()
    got = [p.grad.numpy() for p in params] + [x.grad.numpy()]
    for a, b in zip(ref, got, strict=True):
        assert np.array_equal(a, b)
    begins = [e["segment"] for e in events.events if e["phase"] == "begin"]
    recomputes = [e["segment"] for e in events.events if e["phase"] == "recompute_begin"]
    # the outer checkpoint's forward runs `inner` plainly (no_grad: nothing to save); its recompute builds the
    # inner checkpoint (1 segment), whose recompute builds 2 checkpointed layers (the third runs plainly)
    assert len(begins) == 1 + 1 + 2 and len(recomputes) == 1 + 1 + 2


def test_no_grad_inside_checkpoint() -> None:
    rng = np.random.default_rng(14)
    w, v = var(rng.standard_normal((3, 3))), var(rng.standard_normal((3, 3)))
    x = var(rng.standard_normal((2, 3)))

    def seg(t: Variable) -> Variable:
        with no_grad():
            c = t.matmul(v)  # a constant as far as autograd is concerned
        return (t.matmul(w) * c).sum(dim=1)

    grads = []
    for use_ckpt in (False, True):
        for p in (w, v, x):
            p.zero_grad()
        y = checkpoint(seg, x) if use_ckpt else seg(x)
        y.sum().backward()
        assert v.grad is None
        grads.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    assert np.array_equal(grads[0][0], grads[1][0]) and np.array_equal(grads[0][1], grads[1][1])


def test_checkpoint_under_no_grad_just_runs() -> None:
    x = var([1.0, 2.0])
    with no_grad():
        y = checkpoint(lambda t: t * 2.0, x)
    assert not y.requires_grad and y.numpy().tolist() == [2.0, 4.0]
    assert y._node is None


def test_closure_form_with_captured_activation_and_shared_weight() -> None:
    rng = np.random.default_rng(15)
    w = var(rng.standard_normal((4, 4)))
    x = var(rng.standard_normal((3, 4)))
    seen = []
    w.register_hook(lambda g: seen.append(g.numpy().copy()))
    grads = []
    for use_ckpt in (False, True):
        w.zero_grad()
        x.zero_grad()
        seen.clear()
        h = x.matmul(w).tanh()                          # an activation computed outside the segment
        seg = lambda h=h: h.matmul(w).relu()  # noqa: E731
        out = CheckpointManager(S.SQRT_N).checkpoint(seg) if use_ckpt else seg()
        (out ** 2).sum().backward()
        grads.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
        assert len(seen) == 1                           # the leaf hook fires once, with the total gradient
        np.testing.assert_array_equal(seen[0], w.grad.numpy())
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-13, atol=1e-15)


def test_manager_none_runs_plainly() -> None:
    x = var([3.0])
    y = CheckpointManager(S.NONE).checkpoint(lambda t: t * t, x)
    assert y._node.name == "mul"
    y.backward()
    assert x.grad.numpy().tolist() == [6.0]


# -- retain_graph / double backward ---------------------------------------------------------------------------------
def test_retain_graph_and_freed_graph() -> None:
    x = var([1.0, 2.0])
    y = checkpoint(lambda t: (t * t).sum(), x)
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.numpy().tolist() == [4.0, 8.0]
    with pytest.raises(GraphError, match="second time"):
        y.backward()


def test_create_graph_is_refused_clearly() -> None:
    x = var([1.0, 2.0])
    y = checkpoint(lambda t: (t * t * t).sum(), x)
    with pytest.raises(CheckpointError, match="create_graph"):
        rtxviz.grad(y, x, create_graph=True)


# -- recomputation mismatch ---------------------------------------------------------------------------------------
def test_shape_mismatch_names_the_op() -> None:
    rng = np.random.default_rng(16)
    w_small, w_big = var(rng.standard_normal((8, 8))), var(rng.standard_normal((8, 16)))
    calls = {"n": 0}

    def seg(t: Variable) -> Variable:
        calls["n"] += 1
        t = (t * 2.0).relu()
        t = t.relu()
        return t.matmul(w_small if calls["n"] == 1 else w_big)  # op #3 differs on the second call

    x = var(rng.standard_normal((4, 8)))
    y = checkpoint(seg, x)
    with pytest.raises(CheckpointError) as info:
        y.sum().backward()
    msg = str(info.value)
    assert isinstance(info.value, RtxvizError)
    assert "op #3 (matmul) got inputs of shapes (4, 8), (8, 16)" in msg and "gave it (4, 8), (8, 8)" in msg

    def seg2(t: Variable) -> Variable:
        calls["n"] += 1
        rows = np.arange(3 if calls["n"] == 3 else 2)  # an array index: not an attr the check compares
        return t.exp()[rows].relu()  # same input, other output shape

    y = checkpoint(seg2, x)
    expected = r"op #1 \(getitem\) produced shape \(2, 8\), the original forward produced \(3, 8\)"
    with pytest.raises(CheckpointError, match=expected):
        y.sum().backward()


def test_value_mismatch_detected_only_when_asked() -> None:
    shift = Tensor(np.zeros(2))  # a constant tensor the segment reads, changed in place between the two runs

    def seg(t: Variable) -> Variable:
        shift.data += 1.0
        return (t + shift).exp()

    x = var([0.5, 1.5])
    y = checkpoint(seg, x, determinism_check="values")
    with pytest.raises(CheckpointError, match=r"op #0 \(add\) produced different values: sum 6.0"):
        y.sum().backward()
    y = checkpoint(seg, x)  # default: shapes, dtypes and Python attrs only; in-place data changes are not caught
    y.sum().backward()
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(seg, x, determinism_check="bogus")


def test_changed_python_scalar_is_caught_by_the_default_check() -> None:
    k = 1.0
    h = var([1.0, 2.0])
    y = checkpoint(lambda t: t * k, h)  # mul_scalar with attr value=1.0
    k = 2.0  # changed before backward: the recompute would run t * 2.0 (gradient 2, eager gives 1)
    with pytest.raises(CheckpointError, match=r"op #0 \(mul_scalar\) has attr value=2.0, the original forward had "
                                              r"value=1.0"):
        y.sum().backward()
    assert h.grad is None
    k = 1.0
    y = checkpoint(lambda t: (t * k).sum(dim=0), h)
    y.backward()
    np.testing.assert_array_equal(h.grad.numpy(), [1.0, 1.0])  # unchanged: exact, no error
    h.zero_grad()
    y = checkpoint(lambda t: t * k, h, determinism_check="none")
    k = 3.0
    y.sum().backward()  # "none" checks only the op order: the changed scalar goes through
    np.testing.assert_array_equal(h.grad.numpy(), [3.0, 3.0])


def test_selective_checkpoint_ignores_other_threads_ops() -> None:
    """A second thread hammers matmul while a SELECTIVE(matmul) checkpoint runs its forward and recompute: the
    segment neither counts nor patches that thread's ops, its gradients stay exact, and the other thread's
    products stay right (it never receives a kept output)."""
    import sys
    import threading

    rng = np.random.default_rng(40)
    w1, w2 = var(rng.standard_normal((6, 6))), var(rng.standard_normal((6, 3)))
    a, b = var(rng.standard_normal((5, 7)), False), var(rng.standard_normal((7, 2)), False)
    ab = a.numpy() @ b.numpy()
    stop, errors, done = threading.Event(), [], [0]

    def hammer() -> None:
        while not stop.is_set():
            got = a.matmul(b).numpy()
            if not np.array_equal(got, ab):
                errors.append(f"other thread got a wrong product of shape {got.shape}")
                return
            done[0] += 1

    def seg(t: Variable) -> Variable:
        return (t.matmul(w1).tanh()).matmul(w2)

    original = MatMul.__dict__["forward"]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    th = threading.Thread(target=hammer)
    th.start()
    try:
        for i in range(150):
            x = var(rng.standard_normal((4, 6)))
            for p in (w1, w2):
                p.zero_grad()
            y = checkpoint(seg, x, keep_ops={"matmul"})
            (y * y).sum().backward()
            h = np.tanh(x.numpy() @ w1.numpy())
            gy = 2.0 * (h @ w2.numpy())
            gh = (gy @ w2.numpy().T) * (1.0 - h * h)
            np.testing.assert_allclose(w2.grad.numpy(), h.T @ gy, rtol=1e-12, err_msg=f"iteration {i}")
            np.testing.assert_allclose(w1.grad.numpy(), x.numpy().T @ gh, rtol=1e-12)
            np.testing.assert_allclose(x.grad.numpy(), gh @ w1.numpy().T, rtol=1e-12)
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(interval)
    assert errors == [] and done[0] > 0
    assert MatMul.__dict__["forward"] is original  # the dispatcher is gone once no segment needs it


def test_recompute_in_another_thread() -> None:
    """Backward may run in another thread than the forward: the segment follows the thread of each run."""
    import threading

    w = var([[1.0, 2.0], [3.0, 4.0]])
    x = var([[1.0, -1.0]])
    y = checkpoint(lambda t: t.matmul(w).relu(), x, keep_ops={"matmul"})
    errors: list = []

    def back() -> None:
        try:
            y.sum().backward()
        except Exception as exc:
            errors.append(exc)

    th = threading.Thread(target=back)
    th.start()
    th.join()
    assert errors == []
    np.testing.assert_array_equal(w.grad.numpy(), [[0.0, 0.0], [0.0, 0.0]])  # x @ w = [-2, -2]: relu cuts both
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0]])


def test_different_path_on_recompute() -> None:
    calls = {"n": 0}

    def seg(t: Variable) -> Variable:
        calls["n"] += 1
        return t.exp() if calls["n"] == 1 else t.tanh()

    y = checkpoint(seg, var([1.0]))
    with pytest.raises(CheckpointError, match=r"op #0 is tanh, the original forward ran exp"):
        y.backward()


def test_bad_outputs() -> None:
    x = var([1.0])
    with pytest.raises(CheckpointError, match="return one Tensor"):
        checkpoint(lambda t: (t, t), x)
    with pytest.raises(CheckpointError, match="got float"):
        checkpoint(lambda t: 1.0, x)


# -- events ------------------------------------------------------------------------------------------------------------
class _Events(EngineHook):
    def __init__(self) -> None:
        self.events: list[dict] = []

    def event(self, kind: str, **fields: object) -> None:
        if kind == "checkpoint":
            self.events.append(fields)


def test_events_bracket_forward_and_recompute() -> None:
    layers, params = make_mlp(4, 3, seed=17)
    x = var(np.ones((1, 3)))
    with _Events() as ev:
        out = checkpoint_sequential(layers, x, strategy=S.EVERY(2))
        phases = [(e["phase"], e["segment"]) for e in ev.events]
        out.sum().backward()
    seg = phases[0][1]
    assert phases == [("begin", seg), ("end", seg)]  # the second (last) segment is not checkpointed
    assert [(e["phase"], e["segment"]) for e in ev.events[2:]] == [("recompute_begin", seg), ("recompute_end", seg)]


def test_dropped_graph_gives_saved_bytes_back() -> None:
    layers, params = make_mlp(9, 4, seed=18)
    x = var(np.ones((2, 4)), requires_grad=False)
    gc.collect()  # graphs kept alive by earlier tests' tracebacks must not be freed mid-measurement
    base = memory_stats(scan=False)["current"]
    out = checkpoint_sequential(layers, x)  # 3 segments of 3: boundary of segment 2, last one's input + 3 outputs
    assert memory_stats(scan=False)["current"] - base == 5 * 2 * 4 * 8
    del out
    assert memory_stats(scan=False)["current"] == base
