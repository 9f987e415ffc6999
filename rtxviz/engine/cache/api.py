"""The cache itself (an LRU over input signatures) and the public functions that capture into it and replay."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..errors import GraphCacheError
from ..grad_mode import STATE
from ..tensor import Tensor
from .bindings import SLOT, param_ids, signature_of
from .capture import Capture
from .codegen import Codegen
from .replay import CachedGraph, Counters, active_hook_ids, emit


class _Cache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.graphs: OrderedDict[tuple, CachedGraph] = OrderedDict()
        # base key (fn, signature, grad mode, hooks, key=, params=) -> keys of its variants, one per state of
        # the modules fn called (training / eval graphs of one step live side by side).
        self.by_base: dict[tuple, list[tuple]] = {}
        # fn -> the graph run_cached last served or captured for it: tried first, by the graph's own checks
        # (`CachedGraph._fits_call`), which test everything the key holds without building and hashing the key
        # (signatures, dtypes and all: a tenth of a small model's replayed step). Forgotten when the graph leaves.
        self.recent: dict[Any, CachedGraph] = {}
        self.counts = Counters()

    def insert(self, graph: CachedGraph) -> None:
        self.remove(graph.key)
        graph.counts = self.counts
        self.graphs[graph.key] = graph
        self.by_base.setdefault(graph.base_key, []).append(graph.key)
        while len(self.graphs) > self.capacity:
            old = self.graphs[next(iter(self.graphs))]
            self.remove(old.key)
            self.counts.evictions += 1
            emit("evict", old)

    def remove(self, key: tuple) -> CachedGraph | None:
        graph = self.graphs.pop(key, None)
        if graph is not None:
            if self.recent.get(graph.fn) is graph:
                del self.recent[graph.fn]
            keys = self.by_base.get(graph.base_key)
            if keys is not None:
                keys.remove(key)
                if not keys:
                    del self.by_base[graph.base_key]
        return graph

    def lookup(self, base: tuple) -> tuple[CachedGraph | None, str | None]:
        """The variant of `base` whose modules are as they were at its capture, else (None, why the most recent
        one does not fit). Variants that can never fit again (a module died or changed structure) are dropped."""
        keys = self.by_base.get(base)
        if not keys:
            return None, None
        graph = self.graphs[keys[-1]]  # the most recent variant, nearly always the one: no copy of the list
        if graph._modules_changed() is None:
            self.graphs.move_to_end(graph.key)
            return graph, None
        why = None
        for key in reversed(list(keys)):
            graph = self.graphs[key]
            reason = graph._modules_changed()
            if reason is None:
                self.graphs.move_to_end(key)
                return graph, None
            why = why or reason
            if graph._stale():
                self.remove(key)
                emit("evict", graph, why=reason)
        return None, why


_CACHE = _Cache(1024)


def init_graph_cache(capacity: int = 1024) -> None:
    """Start an empty graph cache holding up to `capacity` graphs (least recently used evicted first); resets
    the statistics.

    >>> init_graph_cache(4)
    >>> graph_cache_stats()["capacity"]
    4
    """
    global _CACHE
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise ValueError(f"init_graph_cache: capacity must be a positive int, got {capacity!r}")
    _CACHE = _Cache(capacity)


def graph_cache_stats() -> dict[str, int]:
    """hits (replays served), misses (lookups or calls that found no fitting graph), evictions, captures,
    refusals (captures refused as unsafe), size and capacity."""
    c = _CACHE.counts
    return {"hits": c.hits, "misses": c.misses, "evictions": c.evictions, "captures": c.captures,
            "refusals": c.refusals, "size": len(_CACHE.graphs), "capacity": _CACHE.capacity}


def _make_key(fn: Callable, signature: tuple, user_key: Any, params: tuple | None) -> tuple:
    return (fn, signature, STATE.enabled, active_hook_ids(), user_key, params)


def _capture(fn: Callable, inputs: tuple, user_key: Any, params: Any = None) -> tuple[CachedGraph, Any]:
    pids = param_ids(params)
    for j, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise GraphCacheError(f"cache_graph: input {j} is a {type(t).__name__}; inputs must be Tensors or leaf "
                                  "Variables (Python values belong in the function or in key=)")
        if t._node is not None:
            raise GraphCacheError(f"cache_graph: input {j} has a graph of its own (grad_fn {t._node.op.name}); "
                                  "pass a leaf or detach() it")
    arrays = [id(t.data) for t in inputs]
    if len(set(arrays)) != len(arrays):
        raise GraphCacheError("cache_graph: two inputs share one array; pass distinct tensors")
    signature = tuple(signature_of(t) for t in inputs)
    grad_enabled = STATE.enabled
    hook_ids = active_hook_ids()
    cap = Capture(inputs)
    with cap:  # attached for this thread only
        result = fn(*inputs)
    cap.audit()
    modules = cap.module_sig()
    if pids is not None:
        allowed = set(pids)
        for p in cap.params:
            if id(p) not in allowed:
                cap.refuse(f"fn reads a {tuple(p.data.shape)} parameter that is not in params=; list every "
                           "parameter, so that swapping one for another object is noticed as a miss")
    out_tpl = None if result is None else cap.bind_attr(result, "fn's result")
    if isinstance(result, Tensor) and out_tpl is None:  # pragma: no cover - Tensors always bind or refuse
        out_tpl = ("tensor", result._is_var, cap.bind_tensor(result, "fn's result"))
    if cap.refusals:
        _CACHE.counts.refusals += 1
        name = getattr(fn, "__qualname__", type(fn).__name__)
        msg = f"graph cache: cannot capture {name}: " + "; ".join(cap.refusals)
        msg += " (fn ran once eagerly; its result is on this error's .result)"
        raise GraphCacheError(msg, result)
    cap.keep_by_slot = _slot_values(cap)
    program = Codegen(cap).build(out_tpl, result, len(inputs))
    key = _make_key(fn, signature, user_key, pids)
    graph = CachedGraph(fn, key, signature, program, cap.params, cap.refs, cap.n_ops, grad_enabled, hook_ids,
                        user_key, modules)
    graph.param_ids = pids
    _CACHE.counts.captures += 1
    _CACHE.insert(graph)
    emit("capture", graph)
    return graph, result


def _slot_values(cap: Capture) -> list:
    vals: list[Any] = [None] * cap.n_slots
    for obj_id, ref in cap.where.items():
        if ref[0] == SLOT:
            vals[ref[1]] = obj_id
    by_id = {id(o): o for o in cap.keep}
    return [by_id.get(i) for i in vals]


def cache_graph(fn: Callable, *example_inputs: Any, key: Any = None, params: Any = None) -> CachedGraph:
    """Run `fn(*example_inputs)` once, eagerly, recording its ops; cache and return the replayable graph.

    `fn` typically runs a forward pass, a loss and ``loss.backward()`` and returns the loss; the capture's own
    run counts as one real step (gradients accumulate as usual). `key` is any hashable that tells apart
    captures of the same function and signature that take different Python-level branches (a training flag).
    `params` (e.g. ``model.parameters()``), when given, lists every parameter fn may read; their identities
    join the cache key, so `run_cached` with a swapped parameter object misses instead of replaying the old one.
    Raises GraphCacheError when the function cannot be replayed safely (the message says which op and why).
    """
    return _capture(fn, example_inputs, key, params)[0]


def get_cached_graph(input_shape: Any, fn: Callable | None = None, key: Any = None) -> CachedGraph | None:
    """The most recently used cached graph whose first input has `input_shape` (or whose inputs have exactly
    the shapes, or the `signature`, given as a tuple of those), captured in the current grad mode and with the
    currently attached hooks; None when there is none (counted as a miss). `fn` / `key` narrow the search.
    """
    want = tuple(input_shape) if input_shape is not None else ()
    full = bool(want) and all(isinstance(s, tuple | list) for s in want)
    if full:
        want = tuple(tuple(s[0]) if s and isinstance(s[0], tuple | list) else tuple(s) for s in want)
        sig = tuple(input_shape)
    hooks_now, grad_now = active_hook_ids(), STATE.enabled
    fallback = None  # fits but for the state of its modules: returned when nothing fits fully (execute says why)
    for graph in reversed(_CACHE.graphs.values()):
        if fn is not None and graph.fn is not fn:
            continue
        if key is not None and graph.user_key != key:
            continue
        if graph._grad_enabled != grad_now or graph._hook_ids != hooks_now:
            continue
        if full:
            if graph.input_shapes != want:
                continue
            if isinstance(sig[0], tuple | list) and len(sig[0]) > 1 and isinstance(sig[0][0], tuple | list) \
                    and tuple(tuple(s[:3]) for s in graph.signature) != tuple(
                        (tuple(s[0]), *s[1:3]) for s in sig):
                continue
        elif not graph.input_shapes or graph.input_shapes[0] != want:
            continue
        if graph.modules and graph._modules_changed() is not None:
            fallback = fallback or graph
            continue
        _CACHE.graphs.move_to_end(graph.key)
        return graph
    if fallback is not None:
        return fallback
    _CACHE.counts.misses += 1
    emit("miss", None, shape=want)
    return None


def run_cached(fn: Callable, *inputs: Any, key: Any = None, params: Any = None) -> Any:
    """`fn(*inputs)`, replayed from the cache when a graph fits the call, captured (run eagerly) otherwise.

    >>> from rtxviz import Tensor
    >>> init_graph_cache()
    >>> double = lambda x: x * 2.0
    >>> run_cached(double, Tensor.ones([2])).tolist(), run_cached(double, Tensor.ones([2])).tolist()
    ([2.0, 2.0], [2.0, 2.0])
    >>> graph_cache_stats()["hits"], graph_cache_stats()["captures"]
    (1, 1)
    """
    cache = _CACHE
    graph = cache.recent.get(fn)
    if graph is not None and graph._fits_call(inputs, key, params):
        graphs = cache.graphs
        if next(reversed(graphs)) is not graph.key:  # keep the LRU order a lookup keeps (no hashing when it is)
            graphs.move_to_end(graph.key)
        return graph._replay(inputs)
    try:
        signature = tuple(signature_of(t) for t in inputs)
    except AttributeError:
        raise GraphCacheError("run_cached: inputs must be Tensors or leaf Variables") from None
    graph, why = cache.lookup(_make_key(fn, signature, key, param_ids(params)))
    if graph is not None:
        out = graph._execute(inputs, True)  # lookup found its modules as they were: not checked twice
        cache.recent[fn] = graph
        return out
    cache.counts.misses += 1
    if why is None:
        emit("miss", None, fn=getattr(fn, "__qualname__", None))
    else:
        emit("miss", None, fn=getattr(fn, "__qualname__", None), why=why)
    graph, result = _capture(fn, inputs, key, params)
    cache.recent[fn] = graph  # inserted last: the newest graph is never the one evicted
    return result
