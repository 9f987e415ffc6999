"""The replay program's two shortcuts: constant folding (fold.py) and the ops' replay kernels (`Op.specialize`).
Replays are compared bit for bit with eager runs of the same function; a folded array must never reach the
caller, so the tests write into what a replay hands out and replay again."""

from __future__ import annotations

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, Variable, nn
from rtxviz.engine.cache import cache_graph, init_graph_cache, run_cached
from rtxviz.nn import functional as F

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    init_graph_cache()


def _batch() -> tuple[Tensor, Tensor]:
    return (Tensor(RNG.standard_normal((8, 16)).astype("float32")),
            Tensor(RNG.standard_normal((8, 1)).astype("float32")))


def test_the_mse_seed_chain_is_folded_and_the_replay_equals_eager_bit_for_bit() -> None:
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    params = list(model.parameters())

    def step(x: Tensor, y: Tensor) -> Variable:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    graph = cache_graph(step, *_batch(), params=params)
    # backward's seed and its 2/N scaling are computed once, at capture: no seed, no mul_scalar in the program
    assert "ONE" not in graph.source and "Z" in graph.source
    ctx_calls = [line for line in graph.source.splitlines() if "(c, " in line or "(c0, " in line]
    assert len(ctx_calls) == 1, ctx_calls  # only mse_loss runs its forward with a ctx; the others take kernels
    for _ in range(3):
        x, y = _batch()
        for p in params:
            p.grad = None
        got = graph.execute(x, y)
        got_grads = [p.grad.data.copy() for p in params]
        for p in params:
            p.grad = None
        want = step(x, y)
        assert got.data.tobytes() == want.data.tobytes()
        for g, p in zip(got_grads, params, strict=True):
            assert g.dtype == p.grad.data.dtype and g.tobytes() == p.grad.data.tobytes()


def test_a_constant_gradient_given_to_a_leaf_is_never_the_folded_array() -> None:
    # d(3w)/dw = 3 for a 0-d w: the gradient is backward's seed times 3, data-independent, and it becomes w.grad.
    # Folded and handed out, the caller's write into w.grad would change every later replay's gradient.
    w = Variable(np.array(2.0, dtype=np.float32), requires_grad=True)

    def fn(x: Tensor) -> Variable:
        out = w * 3.0 + x
        out.backward()
        return out

    x = Tensor(np.array(1.0, dtype=np.float32))
    graph = cache_graph(fn, x, params=[w])
    assert "ONE" not in graph.source  # the seed itself folds: only an op (mul_scalar) reads it
    assert "_acca(P0, s" in graph.source  # but the gradient is computed in every replay
    for _ in range(3):
        w.grad = None
        graph.execute(x)
        assert w.grad.item() == 3.0
        w.grad.data[...] = 99.0  # the caller owns the gradient it was given
    for _ in range(2):  # and through run_cached, which captures anew and then replays
        w.grad = None
        run_cached(fn, x, params=[w])
        assert w.grad.item() == 3.0
        w.grad.data[...] = 99.0


def test_a_folded_value_read_through_a_view_is_not_folded() -> None:
    # w.sum()'s gradient is the seed expanded to w's shape: a broadcast view of the seed. The seed is read by an
    # op whose result shares its memory, so it stays a per-replay array, and w.grad is w's own writable copy.
    w = Variable(np.arange(3.0, dtype=np.float32), requires_grad=True)

    def fn(x: Tensor) -> Variable:
        out = (w * 2.0).sum() + x
        out.backward()
        return out

    x = Tensor(np.array(0.5, dtype=np.float32))
    graph = cache_graph(fn, x, params=[w])
    assert "ONE" in graph.source
    for _ in range(3):
        w.grad = None
        graph.execute(x)
        np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0, 2.0])
        w.grad.data[...] = -7.0
