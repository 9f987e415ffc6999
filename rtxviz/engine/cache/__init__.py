"""The graph cache: run a function once under a recording hook, then replay its ops as a flat array program.

A training step (forward, loss, ``loss.backward()``) is captured once per input signature: every op it applies,
forward and the ops its backward rules run, becomes one line of a generated Python function that calls the op's
``forward`` on raw arrays. Replaying that function builds no Variables, no TapeNodes, runs no backward walk and
no argument checking, which is most of what a small step costs in eager mode.

>>> import rtxviz
>>> from rtxviz import Tensor, Variable
>>> from rtxviz.engine.cache import init_graph_cache, cache_graph, get_cached_graph
>>> w = Variable(Tensor.ones([3]).data, requires_grad=True)
>>> def step(x):
...     loss = (x * w).sum()
...     loss.backward()
...     return loss
>>> init_graph_cache(16)
>>> graph = cache_graph(step, Tensor.ones([3]))        # runs `step` once, eagerly, and records it
>>> w.grad = None
>>> get_cached_graph((3,)) is graph
True
>>> graph.execute(Tensor.full([3], 2.0)).item(), w.grad.tolist()
(6.0, [2.0, 2.0, 2.0])

What a replay can and cannot see is in docs/graph_cache.md. In short: values flow in through the inputs,
parameters (leaf Variables that require grad, read afresh on each replay, so optimizer steps are fine),
constant tensors that existed before the capture (read by reference), and Python scalars (baked in). The training
flag and structure of every nn.Module fn called are checked on each replay (a change is a miss). Anything
else a captured function computes outside the engine's ops makes the capture refuse with `GraphCacheError`
instead of replaying a stale value.

The package, by concern: `bindings` (where a replayed op's arrays come from), `capture` (the hook that records a
run), `codegen` (the straight-line replay function), `replay` (`CachedGraph`: fit checks and execution), `api`
(the LRU cache and the public functions).
"""

from __future__ import annotations

from ..errors import GraphCacheError
from .api import cache_graph, get_cached_graph, graph_cache_stats, init_graph_cache, run_cached
from .replay import CachedGraph

__all__ = [
    "CachedGraph", "GraphCacheError", "cache_graph", "get_cached_graph", "graph_cache_stats", "init_graph_cache",
    "run_cached",
]
