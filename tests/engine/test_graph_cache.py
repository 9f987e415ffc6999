"""The graph cache: capture once, replay as an array program. Replays are compared with eager runs of the same
function (same ops in the same order, so equal bit for bit), and key gradients with closed forms in numpy
float64; misses, LRU eviction, refusals (data-dependent Python, raw data-derived constants), random ops, events.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import rtxviz
from rtxviz import Op, Tensor, Variable, apply, no_grad
from rtxviz.engine import hooks
from rtxviz.engine import random as rrandom
from rtxviz.engine.cache import (
    GraphCacheError,
    cache_graph,
    get_cached_graph,
    graph_cache_stats,
    init_graph_cache,
    run_cached,
)
from rtxviz.engine.ops.shape import compare

RNG = np.random.default_rng(7)


def _param(*shape: int, dtype: str = "float32") -> Variable:
    return Variable(RNG.standard_normal(shape).astype(dtype) * 0.3, requires_grad=True)


def _t(*shape: int, dtype: str = "float32") -> Tensor:
    return Tensor(RNG.standard_normal(shape).astype(dtype))


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    init_graph_cache()


def _zero(params: list) -> None:
    for p in params:
        p.grad = None


def _compare_with_eager(fn, graph, params: list, inputs: tuple) -> None:
    """Replay and eager on the same inputs from the same parameter values and random state: equal exactly."""
    state = rrandom.get_state()
    _zero(params)
    got = graph.execute(*inputs)
    got_grads = [None if p.grad is None else p.grad.data.copy() for p in params]
    rrandom.set_state(state)
    _zero(params)
    want = fn(*inputs)
    assert got.grad_fn is None if isinstance(got, Variable) else True
    np.testing.assert_array_equal(got.data, want.data)
    assert got.dtype == want.dtype
    for p, g in zip(params, got_grads, strict=True):
        assert (g is None) == (p.grad is None)
        if g is not None:
            np.testing.assert_array_equal(g, p.grad.data)
            assert g.dtype == p.grad.dtype


# -- an MLP train step over several steps, with SGD between replays ------------------------------------------------
class _MLP:
    def __init__(self) -> None:
        self.params = [_param(16, 32), _param(32), _param(32, 32), _param(32), _param(32, 1), _param(1)]

    def step(self, x: Tensor, y: Tensor) -> Variable:
        w1, b1, w2, b2, w3, b3 = self.params
        h = (x @ w1 + b1).tanh()
        h = (h @ w2 + b2).tanh()
        out = h @ w3 + b3
        loss = ((out - y) ** 2).mean()
        loss.backward()
        return loss


def test_mlp_train_steps_replay_equal_eager_with_sgd_between() -> None:
    mlp = _MLP()
    twin = _MLP()  # same values, separate objects: trained eagerly beside the replayed one
    for p, q in zip(mlp.params, twin.params, strict=True):
        q.data = p.data.copy()
    x, y = _t(8, 16), _t(8, 1)
    _zero(mlp.params)
    graph = cache_graph(mlp.step, x, y)
    assert graph.ops > 20 and graph.input_shapes == ((8, 16), (8, 1))
    for _ in range(4):
        x, y = _t(8, 16), _t(8, 1)
        _zero(mlp.params + twin.params)
        got = graph.execute(x, y)
        want = twin.step(x, y)
        np.testing.assert_array_equal(got.data, want.data)
        for p, q in zip(mlp.params, twin.params, strict=True):
            np.testing.assert_array_equal(p.grad.data, q.grad.data)
            p.data -= 0.01 * p.grad.data  # the optimizer changes values in place: no invalidation
            q.data -= 0.01 * q.grad.data
    # and a step where SGD rebinds .data to a new array of the same shape: read afresh, still a hit
    for p in mlp.params:
        p.data = p.data - 0.0
    _compare_with_eager(mlp.step, graph, mlp.params, (x, y))
    stats = graph_cache_stats()
    assert stats["hits"] == 5 and stats["captures"] == 1 and stats["misses"] == 0


def test_linear_regression_gradients_match_closed_form() -> None:
    w, b = _param(3, 2, dtype="float64"), _param(2, dtype="float64")
    x, y = _t(5, 3, dtype="float64"), _t(5, 2, dtype="float64")

    def step(x: Tensor, y: Tensor) -> Variable:
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        return loss

    cache_graph(step, x, y)
    x2, y2 = _t(5, 3, dtype="float64"), _t(5, 2, dtype="float64")
    _zero([w, b])
    loss = get_cached_graph((5, 3)).execute(x2, y2)
    r = x2.data @ w.data + b.data - y2.data
    np.testing.assert_allclose(loss.item(), (r**2).mean(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.data, 2 * x2.data.T @ r / r.size, rtol=1e-12)
    np.testing.assert_allclose(b.grad.data, 2 * r.sum(0) / r.size, rtol=1e-12)  # broadcast bias: summed back


def test_grads_accumulate_across_replays_like_eager() -> None:
    w = _param(4, dtype="float64")

    def step(x: Tensor) -> Variable:
        loss = (x * w).sum()
        loss.backward()
        return loss

    x1, x2 = _t(4, dtype="float64"), _t(4, dtype="float64")
    _zero([w])
    graph = cache_graph(step, x1)  # w.grad = x1
    graph.execute(x2)  # no zero_grad between: accumulates, as eager would
    np.testing.assert_allclose(w.grad.data, x1.data + x2.data, rtol=1e-15)


# -- fan-out, broadcasting, reductions -----------------------------------------------------------------------------
def test_fan_out_accumulates_through_the_add_op() -> None:
    w = _param(3, dtype="float64")

    def step(x: Tensor) -> Variable:
        y = x * w  # y fans out to three consumers: gradients meet and add
        loss = (y * y + y + y.exp()).sum()
        loss.backward()
        return loss

    x = _t(3, dtype="float64")
    _zero([w])
    graph = cache_graph(step, x)
    assert graph.ops > 8
    x2 = _t(3, dtype="float64")
    _zero([w])
    graph.execute(x2)
    y = x2.data * w.data
    np.testing.assert_allclose(w.grad.data, (2 * y + 1 + np.exp(y)) * x2.data, rtol=1e-12)
    _compare_with_eager(step, graph, [w], (_t(3, dtype="float64"),))


def test_reductions_and_broadcasting() -> None:
    w, b = _param(4, 5), _param(1, 5)

    def step(x: Tensor) -> Variable:
        h = x @ w + b
        loss = h.sum(dim=0).mean() + h.var(dim=1).sum() + h.logsumexp(dim=1).mean() + (h * b).mean()
        loss.backward()
        return loss

    graph = cache_graph(step, _t(3, 4))
    for _ in range(2):
        _compare_with_eager(step, graph, [w, b], (_t(3, 4),))


def test_masks_are_recomputed_from_new_data() -> None:
    """Capture where every value is positive; replay where values are negative: the masks of relu, abs,
    leaky_relu, clamp, elu, maximum/minimum are built by ops, so they follow the new data."""
    w = _param(6, dtype="float64")
    c = Tensor(np.zeros(6))

    def step(x: Tensor) -> Variable:
        h = x * w
        loss = (h.relu() + h.abs() + h.leaky_relu(0.2) + h.clamp(-0.5, 0.5) + h.elu(1.5)
                + h.maximum(c) + h.minimum(c)).sum()
        loss.backward()
        return loss

    w.data = np.abs(w.data) + 1.0
    _zero([w])
    graph = cache_graph(step, Tensor(np.full(6, 1.0)))
    x = Tensor(np.linspace(-1.0, -0.1, 6))
    _zero([w])
    graph.execute(x)
    h = x.data * w.data
    dh = ((h > 0) + np.sign(h) + np.where(h > 0, 1, 0.2) + ((h >= -0.5) & (h <= 0.5))
          + np.where(h > 0, 1, 1.5 * np.exp(h)) + (h > 0) + (h < 0))
    np.testing.assert_allclose(w.grad.data, dh * x.data, rtol=1e-12)
    _compare_with_eager(step, graph, [w], (Tensor(RNG.standard_normal(6)),))


def test_mask_rules_stay_differentiable_for_higher_order() -> None:
    x = Variable(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
    (g,) = rtxviz.grad((x.relu() * x * x).sum(), x, create_graph=True)  # d/dx = 3x² [x>0]
    np.testing.assert_allclose(g.data, 3 * x.data**2 * (x.data > 0))
    (h,) = rtxviz.grad(g.sum(), x)
    np.testing.assert_allclose(h.data, 6 * x.data * (x.data > 0))


def test_fn_inputs_that_require_grad_receive_grads() -> None:
    w = _param(3, dtype="float64")

    def step(x: Variable) -> Variable:
        loss = (x * x * w).sum()
        loss.backward()
        return loss

    graph = cache_graph(step, Variable(np.ones(3), requires_grad=True))
    x = Variable(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    _zero([w])
    graph.execute(x)
    np.testing.assert_allclose(x.grad.data, 2 * x.data * w.data)
    with pytest.raises(GraphCacheError, match="captured as a var"):
        graph.execute(Tensor(np.ones(3)))


def test_zero_grad_inside_fn_is_replayed() -> None:
    w = _param(3, dtype="float64")

    def step(x: Tensor) -> Variable:
        w.grad = None  # what optimizer.zero_grad() does
        loss = (x * w).sum()
        loss.backward()
        return loss

    w.grad = Variable(np.ones(3))
    graph = cache_graph(step, _t(3, dtype="float64"))
    x = _t(3, dtype="float64")
    w.grad = Variable(np.full(3, 5.0))
    graph.execute(x)
    np.testing.assert_array_equal(w.grad.data, x.data)


def test_forward_only_under_no_grad_and_tuple_results() -> None:
    w = _param(4, 4)

    def infer(x: Tensor) -> tuple:
        h = (x @ w).tanh()
        return h.sum(dim=1), h.mean()

    with no_grad():
        graph = cache_graph(infer, _t(2, 4))
        x = _t(2, 4)
        a, b = graph.execute(x)
        ea, eb = infer(x)
    np.testing.assert_array_equal(a.data, ea.data)
    np.testing.assert_array_equal(b.data, eb.data)
    assert a.grad_fn is None
    with pytest.raises(GraphCacheError, match="grad mode"):
        graph.execute(x)  # grad mode is on again: part of the signature


# -- classifiers: cross_entropy, relu, conv2d, max_pool2d, with targets as fn inputs ------------------------------
def _train_replay_vs_eager(make_params, step_fn, batches) -> None:
    """Capture on the first batch, then replay on the rest while an eager twin (same values, separate objects)
    trains beside it with the same SGD between steps: losses and grads equal bit for bit at every step."""
    params = make_params()
    twin = [Variable(p.data.copy(), requires_grad=True) for p in params]
    step, twin_step = step_fn(params), step_fn(twin)
    _zero(params + twin)
    x0, t0 = batches[0]
    graph = cache_graph(step, x0, t0)
    twin_step(x0, t0)
    for (x, t) in [batches[0], *batches[1:]]:
        for ps in (params, twin):
            for p in ps:
                p.data -= 0.1 * p.grad.data
        _zero(params + twin)
        got = graph.execute(x, t)
        want = twin_step(x, t)
        np.testing.assert_array_equal(got.data, want.data)
        for p, q in zip(params, twin, strict=True):
            np.testing.assert_array_equal(p.grad.data, q.grad.data)
            assert p.grad.dtype == q.grad.dtype
    assert graph_cache_stats()["hits"] == len(batches) and graph_cache_stats()["refusals"] == 0


def _targets(n: int, classes: int) -> Tensor:
    return Tensor(RNG.integers(0, classes, n).astype(np.int64))


def test_mlp_cross_entropy_train_steps_replay_equal_eager() -> None:
    nn = pytest.importorskip("rtxviz.engine.ops.nn")

    def make() -> list:
        return [_param(64, 32), _param(32), _param(32, 10), _param(10)]

    def step_fn(params: list):
        w1, b1, w2, b2 = params

        def step(x: Tensor, t: Tensor) -> Variable:
            loss = nn.cross_entropy((x @ w1 + b1).relu() @ w2 + b2, t)
            loss.backward()
            return loss

        return step

    batches = [(_t(16, 64), _targets(16, 10)) for _ in range(5)]
    _train_replay_vs_eager(make, step_fn, batches)


def test_mlp_cross_entropy_gradient_matches_closed_form_on_replay() -> None:
    """Replayed with new targets: dZ = (softmax(Z) - onehot(T)) / N, from numpy in float64."""
    nn = pytest.importorskip("rtxviz.engine.ops.nn")
    w = _param(5, 4, dtype="float64")

    def step(x: Tensor, t: Tensor) -> Variable:
        loss = nn.cross_entropy(x @ w, t)
        loss.backward()
        return loss

    graph = cache_graph(step, _t(6, 5, dtype="float64"), _targets(6, 4))
    x, t = _t(6, 5, dtype="float64"), Tensor(np.array([3, 0, 0, 2, 1, 3], dtype=np.int64))
    _zero([w])
    loss = graph.execute(x, t)
    z = x.data @ w.data
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(loss.item(), -np.log(p[np.arange(6), t.data]).mean(), rtol=1e-12)
    p[np.arange(6), t.data] -= 1.0
    np.testing.assert_allclose(w.grad.data, x.data.T @ p / 6, rtol=1e-12)


def test_cnn_conv_relu_max_pool_cross_entropy_train_steps_replay_equal_eager() -> None:
    nn = pytest.importorskip("rtxviz.engine.ops.nn")

    def make() -> list:
        return [_param(4, 1, 3, 3), _param(4), _param(4 * 4 * 4, 10), _param(10)]

    def step_fn(params: list):
        wc, bc, w, b = params

        def step(x: Tensor, t: Tensor) -> Variable:
            h = nn.max_pool2d(nn.conv2d(x, wc, bc, padding=1).relu(), 2)
            loss = nn.cross_entropy(h.reshape(x.shape[0], -1) @ w + b, t)
            loss.backward()
            return loss

        return step

    batches = [(_t(6, 1, 8, 8), _targets(6, 10)) for _ in range(4)]
    _train_replay_vs_eager(make, step_fn, batches)


def test_remaining_mask_rules_replay_from_new_data() -> None:
    """where / masked_fill, max / min reductions, nll_loss (ignore_index), layer_norm's default weight, overlapping
    max_pool2d and label-smoothed per-row cross_entropy: their gradients follow the replayed values."""
    nn = pytest.importorskip("rtxviz.engine.ops.nn")
    w, v = _param(4, 5, dtype="float64"), _param(1, 1, 3, 3, dtype="float64")

    def step(x: Tensor, t: Tensor) -> Variable:
        h = x @ w
        # masks from the compare op (what `h > 0` is, once the comparison operators go through it)
        a = h.where(compare(h, 0.0, "__gt__"), h * h).masked_fill(compare(h, -0.5, "__lt__"), 0.25)
        b = h.max(dim=1).values.sum() + h.min(dim=0, keepdim=True).values.sum() + h.max() - h.min()
        c = nn.nll_loss(nn.log_softmax(nn.layer_norm(h, 5), 1), t)
        d = nn.cross_entropy(h, t, reduction="none", label_smoothing=0.1).sum()
        e = nn.max_pool2d(nn.conv2d(h.reshape(1, 1, 6, 5), v, padding=1), 3, 1).sum()
        loss = a.sum() + b + c + d + e
        loss.backward()
        return loss

    t0 = Tensor(np.array([0, 1, 2, -100, 4, 3], dtype=np.int64))
    graph = cache_graph(step, _t(6, 4, dtype="float64"), t0)
    for _ in range(3):
        _compare_with_eager(step, graph, [w, v], (_t(6, 4, dtype="float64"), _targets(6, 5)))
    # ignored rows elsewhere, and twice: the 1/count of the mean is recomputed too
    t = Tensor(np.array([-100, 1, -100, 3, 4, 0], dtype=np.int64))
    _compare_with_eager(step, graph, [w, v], (_t(6, 4, dtype="float64"), t))


def test_capture_patches_nothing_and_ignores_other_threads() -> None:
    """The capture listens through hooks only: engine functions and Tensor methods stay as they are while fn
    runs, and ops another thread runs meanwhile are not recorded."""
    import threading

    from rtxviz.engine import backward as bw

    w = _param(3)
    seen: dict = {}
    originals = (bw._initial_grad, bw.accumulate_leaf_grad, Tensor.item, Tensor.numpy, Tensor.__bool__)

    def other_thread() -> None:
        seen["other"] = (Variable(np.ones(3, dtype=np.float32), requires_grad=True) * 3.0).sum().item()

    def step(x: Tensor, threaded: bool = True) -> Variable:
        seen["same"] = (bw._initial_grad, bw.accumulate_leaf_grad, Tensor.item, Tensor.numpy, Tensor.__bool__)
        if threaded:
            th = threading.Thread(target=other_thread)
            th.start()
            th.join()
        loss = (x * w).sum()
        loss.backward()
        return loss

    alone = cache_graph(lambda x: step(x, False), _t(3))
    graph = cache_graph(step, _t(3))
    assert all(a is b for a, b in zip(seen["same"], originals, strict=True))
    assert seen["other"] == 9.0 and graph.ops == alone.ops  # nothing from the other thread was recorded
    _compare_with_eager(step, graph, [w], (_t(3),))


def test_trace_events_reach_only_hooks_that_ask_for_them() -> None:
    class Listener(hooks.EngineHook):
        def __init__(self, traces: bool) -> None:
            self.traces = traces
            self.kinds: list = []

        def event(self, kind: str, **fields: object) -> None:
            self.kinds.append(kind)

    quiet, tracer = Listener(False), Listener(True)
    w = Variable(np.array([1.0, 2.0]), requires_grad=True)
    with quiet, tracer:
        loss = (w * np.array([3.0, 4.0])).sum()  # a numpy operand: a constant, coerced by as_tensor_like
        loss.backward()
        loss.item()
        repr(loss)  # printing is not a value read
    assert quiet.kinds == []
    assert tracer.kinds == ["constant", "seed_grad", "leaf_grad_accumulated", "value_read"]
    assert not hooks.TRACING and not hooks.ACTIVE


# -- random ops: fresh numbers each replay -------------------------------------------------------------------------
def test_dropout_replays_fresh_random_numbers() -> None:
    nn = pytest.importorskip("rtxviz.engine.ops.nn")
    if not hasattr(nn, "dropout"):
        pytest.skip("no dropout op")
    w = _param(50)

    def step(x: Tensor) -> Variable:
        loss = (nn.dropout(x * w, 0.5) ** 2).sum()
        loss.backward()
        return loss

    graph = cache_graph(step, _t(50))
    x = _t(50)
    _zero([w])
    graph.execute(x)
    first = w.grad.data.copy()
    _zero([w])
    graph.execute(x)
    assert not np.array_equal(first, w.grad.data)  # a new mask: the captured one was not reused
    _compare_with_eager(step, graph, [w], (x,))  # same generator state: the very same mask as eager


def test_layer_norm_softmax_embedding_state_bindings() -> None:
    nn = pytest.importorskip("rtxviz.engine.ops.nn")
    emb, lw, lb, a = _param(10, 8), _param(8), _param(8), _param(8, 8)

    def step(ids: Tensor) -> Variable:
        h = nn.layer_norm(nn.embedding(ids, emb) @ a, 8, lw, lb)
        loss = (nn.softmax(h, -1) * h).sum()
        loss.backward()
        return loss

    graph = cache_graph(step, Tensor(np.array([1, 2, 3], dtype=np.int64)))
    # new indices: the embedding's index attribute was bound to the input, not baked in
    _compare_with_eager(step, graph, [emb, lw, lb, a], (Tensor(np.array([9, 0, 9], dtype=np.int64)),))


# -- misses --------------------------------------------------------------------------------------------------------
def _simple() -> tuple:
    w = _param(4)

    def step(x: Tensor) -> Variable:
        loss = (x @ w).sum()
        loss.backward()
        return loss

    return w, step


def test_changed_shape_dtype_device_kind_miss() -> None:
    w, step = _simple()
    graph = cache_graph(step, _t(2, 4))
    with pytest.raises(GraphCacheError, match=r"shape \(3, 4\), captured with \(2, 4\)"):
        graph.execute(_t(3, 4))
    with pytest.raises(GraphCacheError, match="dtype float64"):
        graph.execute(_t(2, 4, dtype="float64"))
    with pytest.raises(GraphCacheError, match="1 input.*got 2"):
        graph.execute(_t(2, 4), _t(2, 4))
    assert get_cached_graph((3, 4)) is None
    assert get_cached_graph((2, 4)) is graph
    assert get_cached_graph(((2, 4),)) is graph  # the full signature: every input's shape
    assert get_cached_graph(((2, 4), (1,))) is None
    stats = graph_cache_stats()
    assert stats["misses"] == 5 and stats["hits"] == 0


def test_changed_parameter_shape_or_object_misses() -> None:
    w, step = _simple()
    graph = cache_graph(step, _t(2, 4), params=[w])
    w.data = np.zeros((5,), dtype=np.float32)
    with pytest.raises(GraphCacheError, match="parameter 0 is now"):
        graph.execute(_t(2, 4))
    w.data = np.ones((4,), dtype=np.float32)
    graph.execute(_t(2, 4))
    other = _param(4)
    with pytest.raises(GraphCacheError, match="params="):
        graph.execute(_t(2, 4), params=[other])
    # run_cached: a different parameter object is a different key, so it captures afresh instead of replaying
    x = _t(2, 4)
    run_cached(step, x, params=[w])
    assert graph_cache_stats()["hits"] == 2
    before = graph_cache_stats()["captures"]
    with pytest.raises(GraphCacheError, match="not in params="):
        run_cached(step, x, params=[other])
    assert graph_cache_stats()["captures"] == before and graph_cache_stats()["refusals"] == 1


def test_hooks_are_part_of_the_signature_and_see_cache_events() -> None:
    w, step = _simple()
    graph = cache_graph(step, _t(2, 4))

    class Events(hooks.EngineHook):
        def __init__(self) -> None:
            self.seen: list = []

        def event(self, kind: str, **fields: object) -> None:
            if kind == "graph_cache":
                self.seen.append((fields["action"], fields["ops"]))

    ev = Events()
    with ev:
        with pytest.raises(GraphCacheError, match="hooks"):
            graph.execute(_t(2, 4))  # a hook attached after capture expects to see ops: miss
        x = _t(2, 4)
        run_cached(step, x)  # miss, capture (with the hook attached)
        run_cached(step, x)  # hit
    actions = [a for a, _ in ev.seen]
    assert actions == ["miss", "miss", "capture", "hit"]
    assert ev.seen[-1][1] == graph.ops


def test_lru_eviction_at_capacity() -> None:
    init_graph_cache(2)
    w, step = _simple()
    g2 = cache_graph(step, _t(2, 4))
    g3 = cache_graph(step, _t(3, 4))
    assert get_cached_graph((2, 4)) is g2  # now most recently used
    cache_graph(step, _t(5, 4))  # evicts the least recently used: the (3, 4) graph
    assert get_cached_graph((3, 4)) is None
    assert get_cached_graph((2, 4)) is g2
    stats = graph_cache_stats()
    assert stats["evictions"] == 1 and stats["size"] == 2 and stats["captures"] == 3
    assert g3.execute(_t(3, 4)) is not None  # an evicted graph still runs; it just is not in the cache
    with pytest.raises(ValueError):
        init_graph_cache(0)


def test_user_key_separates_python_branches() -> None:
    w = _param(3)
    flags = {"double": False}

    def step(x: Tensor) -> Variable:
        y = x * w
        if flags["double"]:  # a Python-level branch the capture cannot see: the key says which
            y = y * 2.0
        return y.sum()

    x = _t(3)
    a = run_cached(step, x, key=False)
    flags["double"] = True
    b = run_cached(step, x, key=True)
    np.testing.assert_allclose(b.data, 2 * a.data, rtol=1e-6)
    flags["double"] = False
    np.testing.assert_array_equal(run_cached(step, x, key=False).data, a.data)
    assert graph_cache_stats()["captures"] == 2 and graph_cache_stats()["hits"] == 1


# -- nn.Module state: the training flag and the structure of every module fn called ------------------------------
def _np_mlp(model, x: Tensor) -> np.ndarray:
    """Linear -> (dropout off) -> Linear in float64 numpy, from the model's current parameters."""
    h = x.data.astype(np.float64) @ model[0].weight.data.T.astype(np.float64) + model[0].bias.data
    return h @ model[2].weight.data.T.astype(np.float64) + model[2].bias.data


def _dropout_mlp():
    from rtxviz import nn

    rrandom.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    return model, (lambda x: model(x).sum())


def test_train_eval_switch_misses_and_keeps_one_graph_per_mode() -> None:
    model, f = _dropout_mlp()
    x = _t(5, 4)
    model.train()
    train_graph = cache_graph(f, x)
    model.eval()
    with pytest.raises(GraphCacheError, match=r"module model \(Sequential\) is in eval mode, captured in training"):
        get_cached_graph(x.shape).execute(x)  # the only graph for this shape is the training one: execute says why
    want = _np_mlp(model, x).sum()  # eval: dropout is the identity
    np.testing.assert_allclose(run_cached(f, x).data, want, rtol=1e-5)  # miss: captures the eval variant
    np.testing.assert_allclose(run_cached(f, x).data, want, rtol=1e-5)  # hit on the eval variant
    eval_graph = get_cached_graph(x.shape)
    assert eval_graph is not train_graph and "dropout" not in eval_graph.source
    stats = graph_cache_stats()
    assert (stats["captures"], stats["hits"], stats["misses"], stats["size"]) == (2, 1, 2, 2)
    model.train()  # back to training: the training variant is still there and fits again
    assert get_cached_graph(x.shape) is train_graph
    _compare_with_eager(f, train_graph, list(model.parameters()), (x,))
    run_cached(f, x)
    stats = graph_cache_stats()
    assert (stats["captures"], stats["hits"], stats["size"]) == (2, 3, 2)


def test_replaced_parameter_misses_and_recaptures() -> None:
    from rtxviz.nn import Parameter

    model, f = _dropout_mlp()
    model.eval()
    x = _t(5, 4)
    graph = cache_graph(f, x)
    model[0].weight = Parameter(Tensor(RNG.standard_normal((8, 4)).astype(np.float32)))
    with pytest.raises(GraphCacheError, match=r"module model.0 \(Linear\) had a parameter, buffer, child module"):
        graph.execute(x)
    np.testing.assert_allclose(run_cached(f, x).data, _np_mlp(model, x).sum(), rtol=1e-5)  # the new weight
    np.testing.assert_allclose(run_cached(f, x).data, _np_mlp(model, x).sum(), rtol=1e-5)
    stats = graph_cache_stats()
    assert (stats["captures"], stats["hits"], stats["size"]) == (2, 1, 1)  # the stale graph was dropped
    # a child module swapped for another of the same shapes is a structure change of its parent
    from rtxviz import nn

    model.add_module("2", nn.Linear(8, 1))
    np.testing.assert_allclose(run_cached(f, x).data, _np_mlp(model, x).sum(), rtol=1e-5)
    assert graph_cache_stats()["captures"] == 3


def test_replaced_tensor_attribute_and_dead_module_miss() -> None:
    from rtxviz import nn

    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.factor = Tensor(np.full(3, 2.0, dtype=np.float32))  # a plain tensor attribute, read by reference

        def forward(self, x: Tensor) -> Tensor:
            return x * self.factor

    holder = {"m": Scale()}
    f = lambda x: holder["m"](x)  # noqa: E731
    x = _t(3)
    graph = cache_graph(f, x)
    holder["m"].factor = Tensor(np.full(3, 5.0, dtype=np.float32))
    with pytest.raises(GraphCacheError, match="tensor attribute assigned since the capture"):
        graph.execute(x)
    np.testing.assert_allclose(run_cached(f, x).data, 5.0 * x.data, rtol=1e-6)
    graph = get_cached_graph(x.shape)
    holder["m"] = Scale()  # the module the graph called is gone (a fresh model of the same shapes)
    gc.collect()
    with pytest.raises(GraphCacheError, match=r"module .*Scale.*no longer exists"):
        graph.execute(x)
    np.testing.assert_allclose(run_cached(f, x).data, 2.0 * x.data, rtol=1e-6)


def test_optimizer_steps_on_module_parameters_still_hit() -> None:
    from rtxviz import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    params = list(model.parameters())

    def step(x: Tensor, y: Tensor) -> Variable:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    x, y = _t(6, 4), _t(6, 1)
    model.zero_grad()
    graph = cache_graph(step, x, y)
    for _ in range(3):
        for p in params:
            p.data -= 0.1 * p.grad.data  # in place: values change, objects and structure do not
        model.zero_grad()
        _compare_with_eager(step, graph, params, (x, y))
    model.train()  # setting the same mode again changes nothing
    run_cached(step, x, y)
    run_cached(step, x, y)
    stats = graph_cache_stats()
    assert (stats["hits"], stats["captures"], stats["misses"]) == (5, 1, 0)


def test_refuses_mode_or_structure_changes_inside_fn() -> None:
    from rtxviz import nn
    from rtxviz.nn import Parameter

    model = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5))

    def eval_inside(x: Tensor) -> Tensor:
        model.eval()
        out = model(x)
        model.train()
        return out.sum()

    with pytest.raises(GraphCacheError, match=r"switched module model \(Sequential\) to training mode"):
        cache_graph(eval_inside, _t(4, 3))
    spare = Parameter(Tensor(np.zeros((2, 3), dtype=np.float32)))

    def swap_inside(x: Tensor) -> Tensor:
        out = model(x).sum()
        model[0].weight = spare
        return out

    model.eval()
    with pytest.raises(GraphCacheError, match=r"assigned a parameter.*model.0 \(Linear\) after calling it"):
        cache_graph(swap_inside, _t(4, 3))


def test_module_calls_reach_only_tracing_hooks() -> None:
    from rtxviz import nn

    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())

    class Listener(hooks.EngineHook):
        def __init__(self, traces: bool) -> None:
            self.traces = traces
            self.calls: list = []

        def event(self, kind: str, **fields: object) -> None:
            if kind == "module_call":
                self.calls.append((fields["module"], fields["training"]))

    tracer, plain = Listener(True), Listener(False)
    with tracer, plain:
        model.eval()
        model(_t(1, 3))
    assert plain.calls == []
    assert tracer.calls == [(model, False), (model[0], False), (model[1], False)]


# -- refusals ------------------------------------------------------------------------------------------------------
def test_refuses_data_dependent_python() -> None:
    w = _param(3)

    def step(x: Tensor) -> Variable:
        loss = (x * w).sum()
        if loss.item() > 0:  # a branch on data: a replay could not follow it
            loss = loss * 2.0
        loss.backward()
        return loss

    with pytest.raises(GraphCacheError, match=r"Tensor\.item") as info:
        cache_graph(step, _t(3))
    assert isinstance(info.value.result, Variable)  # fn ran once eagerly: its result is kept
    assert graph_cache_stats()["refusals"] == 1 and graph_cache_stats()["size"] == 0

    def branchy(x: Tensor) -> Variable:
        return x * 2.0 if bool((x * w).sum() > 0) else x

    with pytest.raises(GraphCacheError, match="__bool__"):
        cache_graph(branchy, _t(3))
    assert Tensor(np.array([1.5])).item() == 1.5


class _RawMaskSquare(Op):
    """A deliberately cache-unsafe rule: its mask is a raw array computed from data inside backward."""

    name = "raw_mask_square"
    rule = "dX = 2X·dY·[X > 0]"
    save_inputs = True

    @staticmethod
    def forward(ctx, x):
        return x * x * (x > 0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_inputs
        mask = Tensor._wrap((x.data > 0).astype(x.data.dtype))
        return ((g * x * 2.0) * mask,)


def test_refuses_a_rule_with_a_raw_data_derived_constant() -> None:
    w = _param(3)

    def step(x: Tensor) -> Variable:
        loss = apply(_RawMaskSquare, (x * w,)).sum()
        loss.backward()
        return loss

    with pytest.raises(GraphCacheError, match="op mul .*computed during capture outside the engine's ops"):
        cache_graph(step, _t(3))


def test_refuses_tensors_made_inside_fn_and_parameter_updates() -> None:
    w = _param(3)

    def noisy(x: Tensor) -> Variable:
        return (x + Tensor.randn([3]) * w).sum()

    with pytest.raises(GraphCacheError, match="computed during capture"):
        cache_graph(noisy, _t(3))

    def sgd_inside(x: Tensor) -> Variable:
        loss = (x * w).sum()
        loss.backward()
        w.data -= 0.1 * w.grad.data  # a raw in-place write: invisible to a replay
        return loss

    with pytest.raises(GraphCacheError, match="in place"):
        cache_graph(sgd_inside, _t(3))

    def hooked(x: Tensor) -> Variable:
        y = x * w
        y.register_hook(lambda g: g * 2.0)
        loss = y.sum()
        loss.backward()
        return loss

    with pytest.raises(GraphCacheError, match="hook"):
        cache_graph(hooked, _t(3))

    outer = (w * 2.0).sum()  # a graph recorded before the capture

    def uses_outer(x: Tensor) -> Variable:
        loss = (x * w).sum() + outer
        loss.backward()
        return loss

    with pytest.raises(GraphCacheError, match="graph of its own"):
        cache_graph(uses_outer, _t(3))


def test_constants_made_before_capture_are_read_by_reference() -> None:
    w = _param(3)
    scale = Tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32))

    def step(x: Tensor) -> Variable:
        return (x * w * scale + 1.5).sum()

    graph = cache_graph(step, _t(3))
    scale.data = np.array([0.0, 0.0, 1.0], dtype=np.float32)  # a buffer the user updates
    x = _t(3)
    got = graph.execute(x)
    np.testing.assert_allclose(got.data, (x.data * w.data * scale.data + 1.5).sum(), rtol=1e-6)


def test_inputs_must_be_tensors_and_distinct() -> None:
    w, step = _simple()
    with pytest.raises(GraphCacheError, match="Tensors"):
        cache_graph(step, np.ones((2, 4)))
    x = _t(2, 4)
    with pytest.raises(GraphCacheError, match="distinct"):
        cache_graph(lambda a, b: a + b, x, Tensor._wrap(x.data))


def test_replay_source_is_straight_line_code() -> None:
    w, step = _simple()
    graph = cache_graph(step, _t(2, 4))
    assert graph.source.startswith("def _program(ins):")
    assert "_acca(P0" in graph.source  # the leaf gradient of w (its raw array), accumulated as backward does


@pytest.mark.parametrize("reset", ["assign", "optimizer"])
def test_a_reset_inside_fn_is_replayed_when_the_grads_were_none_at_capture(reset: str) -> None:
    # Found by the strict-device work: with every .grad None when fn was captured, `w.grad = None` (or
    # optimizer.zero_grad()) inside fn changed nothing the capture could compare, so replays accumulated
    # (3,4 -> 6,8 -> 9,12) where eager gives 3,4 every time.
    from rtxviz.optim import SGD

    w = _param(2, dtype="float64")
    opt = SGD([w], lr=0.0)

    def step(x: Tensor) -> Variable:
        if reset == "assign":
            w.grad = None
        else:
            opt.zero_grad()
        loss = (x * w).sum()
        loss.backward()
        return loss

    x = Tensor(np.array([3.0, 4.0]))
    assert w.grad is None
    graph = cache_graph(step, x)
    for _ in range(3):
        graph.execute(x)
        np.testing.assert_array_equal(w.grad.data, [3.0, 4.0])


# -- run_cached's first try: the graph it last served for fn, checked without building the key ---------------------
def _counts() -> tuple[int, int]:
    stats = graph_cache_stats()
    return stats["captures"], stats["hits"]


def test_run_cached_recent_graph_is_used_only_where_the_lookup_would_find_it() -> None:
    """run_cached first tries the graph it last served for fn (`_Cache.recent`, checked by `_fits_call`). Every
    part of the lookup key that changes sends it to a capture (a miss), never to a replay of that graph; going
    back to the first call replays again; the losses equal x·w summed in float64 numpy each time."""
    w = _param(4)
    other = _param(4)

    def step(x: Tensor) -> Variable:
        loss = (x @ w).sum()
        loss.backward()
        return loss

    def call(x, expect: tuple[int, int], **kw) -> None:
        before = _counts()
        w.grad = None
        got = run_cached(step, x, **kw)
        assert (_counts()[0] - before[0], _counts()[1] - before[1]) == expect, kw
        want = (x.data.astype(np.float64) @ w.data.astype(np.float64)).sum()
        np.testing.assert_allclose(float(got.data), want, rtol=1e-5)
        np.testing.assert_allclose(w.grad.data, x.data.sum(axis=0), rtol=1e-5)

    x = _t(2, 4)
    call(x, (1, 0), params=[w])
    call(_t(2, 4), (0, 1), params=[w])  # new values, same signature: the recent graph
    call(_t(3, 4), (1, 0), params=[w])  # shape
    call(Variable(x.data.copy(), requires_grad=True), (1, 0), params=[w])  # kind: a leaf that requires grad
    call(x, (1, 0), params=[w], key="other branch")  # key=
    call(x, (1, 0))  # params= left out
    call(x, (1, 0), params=[w, other])  # params= with one more entry
    call(x, (1, 0), params=[other, w])  # ... or in another order
    call(x, (0, 1), params=[w])  # the first call again: found by the lookup, a replay
    call(x, (0, 1), params=[w])  # and now the recent graph
    call(x, (0, 1), params=(w,))  # a tuple of the same objects: the same graph
    call(x, (0, 1), params=iter([w]))  # any other iterable of them too
    call(x, (0, 1), params=(other, w))  # as a tuple: the graph captured for the list [other, w]
    call(x, (0, 1), params=[w])  # back to the first
    def square(t: Tensor) -> Variable:
        return (t * t).sum()

    before = _counts()
    for dtype in ("float32", "float64", "float32", "float64"):  # dtype: one graph each, then replays
        t = _t(2, 4, dtype=dtype)
        got = run_cached(square, t)
        assert got.dtype == t.dtype and float(got.data) == pytest.approx(float((t.data ** 2).sum()), rel=1e-5)
    assert _counts() == (before[0] + 2, before[1] + 2)
    with no_grad():
        before = _counts()
        run_cached(lambda t: (t @ w).sum(), x)
        run_cached(lambda t: (t @ w).sum(), x)  # another lambda each time: another fn, another graph
        assert _counts()[0] - before[0] == 2
    w.requires_grad = False  # no longer a parameter: the lookup's own error, not a replay
    with pytest.raises(GraphCacheError, match="params: entry 0"):
        run_cached(step, x, params=[w])
    w.requires_grad = True
    with pytest.raises(GraphCacheError, match="inputs must be Tensors"):
        run_cached(step, x.data, params=[w])
    call(x, (0, 1), params=[w])


def test_run_cached_recent_graph_follows_eviction_grad_mode_and_module_mode() -> None:
    """The recent graph is forgotten when the cache drops it (capacity 1: the next signature evicts it) or a new
    cache starts; a grad-mode change or a module switched to eval mode is a miss that finds (or captures) the
    other variant, and the replayed results equal eager ones."""
    from rtxviz import nn

    init_graph_cache(1)
    w, step = _simple()
    x, z = _t(2, 4), _t(3, 4)
    run_cached(step, x)
    run_cached(step, z)  # evicts the (2, 4) graph
    before = _counts()
    run_cached(step, x)
    assert _counts()[0] - before[0] == 1 and graph_cache_stats()["evictions"] == 2

    def other(t: Tensor) -> Variable:
        return (t * 2.0).sum()

    before = _counts()
    for _ in range(2):  # two functions take turns in a cache of one graph: each evicts the other's
        run_cached(other, x)
        run_cached(step, x)
    assert _counts() == (before[0] + 4, before[1])
    init_graph_cache()
    before = _counts()
    run_cached(step, x)
    assert _counts()[0] - before[0] == 1

    rrandom.manual_seed(5)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))

    def forward(t: Tensor) -> Variable:
        return model(t).sum()

    run_cached(forward, x)
    run_cached(forward, x)
    model.eval()
    before = _counts()
    got = run_cached(forward, x)  # eval: dropout off, a graph of its own
    assert _counts()[0] - before[0] == 1
    np.testing.assert_allclose(float(got.data), _np_mlp(model, x).sum(), rtol=1e-5)
    got = run_cached(forward, x)
    assert _counts()[1] - before[1] == 1
    np.testing.assert_allclose(float(got.data), _np_mlp(model, x).sum(), rtol=1e-5)
    with no_grad():
        before = _counts()
        run_cached(forward, x)
        assert _counts()[0] - before[0] == 1  # grad mode is part of the key
    model.train()
    before = _counts()
    run_cached(forward, x)
    assert _counts() == (before[0], before[1] + 1)  # the training graph, found again


def test_module_training_steps_through_run_cached_equal_eager_bit_for_bit() -> None:
    """The benchmark's loop (zero_grad, run_cached(forward + mse_loss + backward), SGD step) over six steps, with
    new batches, equals the same loop run eagerly on a twin model: losses, gradients and parameters bit for bit."""
    from rtxviz import nn, optim
    from rtxviz.nn import functional as F

    def build():
        rtxviz.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
        return model, optim.SGD(model.parameters(), lr=0.05)

    (model, opt), (twin, twin_opt) = build(), build()
    params = list(model.parameters())

    def forward_backward(x: Tensor, y: Tensor) -> Variable:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(6):
        x, y = _t(8, 16), _t(8, 1)
        opt.zero_grad()
        got = run_cached(forward_backward, x, y, params=params)
        twin_opt.zero_grad()
        want = F.mse_loss(twin(x), y)
        want.backward()
        assert got.data.tobytes() == want.data.tobytes()
        for p, q in zip(params, twin.parameters(), strict=True):
            assert p.grad.data.tobytes() == q.grad.data.tobytes()
        opt.step()
        twin_opt.step()
        for p, q in zip(params, twin.parameters(), strict=True):
            assert p.data.tobytes() == q.data.tobytes()
    assert graph_cache_stats()["captures"] == 1 and graph_cache_stats()["hits"] == 5


def test_leaf_gradients_handed_over_as_raw_arrays_equal_eager_over_steps() -> None:
    """The replay passes each leaf gradient to accumulate_leaf_array as a raw array. The cases where eager's
    accumulate_leaf_grad copies or casts: a broadcast (read-only) gradient (w.sum()), one buffer handed to two
    leaves (add's backward gives a and b the same array), float32 and float64 leaves, and grads left from the
    previous step (no zero_grad: they add up). Replay and eager twins agree bit for bit at every step,
    and every .grad is its own writeable buffer."""
    def make() -> list[Variable]:
        rng = np.random.default_rng(3)
        return [Variable(rng.standard_normal(s).astype(dt), requires_grad=True)
                for s, dt in (((3,), "float32"), ((2, 3), "float64"), ((2, 3), "float64"), ((3,), "float64"))]

    def step(params: list[Variable], x: Tensor, x64: Tensor) -> Variable:
        w, a, b, v = params
        loss = w.sum().to(dtype="float64") + ((a + b) * x).sum() + (v * x64).sum()
        loss.backward()
        return loss

    replayed, eager = make(), make()
    fn = lambda x, x64: step(replayed, x, x64)  # noqa: E731  # one function object: run_cached's key
    for n in range(4):
        x, x64 = _t(2, 3, dtype="float64"), _t(3, dtype="float64")
        if n == 3:  # a fresh start: grads None again, so the claimed-buffer copy is taken once more
            _zero(replayed)
            _zero(eager)
        got = run_cached(fn, x, x64)
        want = step(eager, x, x64)
        np.testing.assert_array_equal(got.data, want.data)
        for p, q in zip(replayed, eager, strict=True):
            assert p.grad.dtype == q.grad.dtype == p.dtype
            np.testing.assert_array_equal(p.grad.data, q.grad.data)
            assert p.grad.data.flags.writeable
        grads = [p.grad.data for p in replayed]
        assert not any(np.shares_memory(g, h) for i, g in enumerate(grads) for h in grads[i + 1:])
    assert graph_cache_stats()["hits"] == 3
    assert "_acca(" in get_cached_graph((2, 3), fn).source
