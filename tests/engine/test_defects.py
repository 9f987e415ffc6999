"""Defects found while rebuilding the house, each reproduced here first."""

from __future__ import annotations

import weakref

import rtxviz
from rtxviz import Tensor
from rtxviz.engine.cache import init_graph_cache, run_cached


class _Thing:
    pass


def test_a_dead_weak_proxy_anywhere_does_not_break_the_scans_of_live_tensors() -> None:
    """memory_stats and the graph cache's capture scan every live object; isinstance() on a weakref.proxy whose
    object died raises ReferenceError (found when the suite started running every module's doctests)."""
    thing = _Thing()
    proxy = weakref.proxy(thing)
    del thing  # the proxy stays alive (gc-tracked), its object is gone
    stats = rtxviz.memory_stats()
    assert stats["tensor_bytes"] >= 0
    init_graph_cache()
    assert run_cached(lambda x: x * 2.0, Tensor.ones([2])).tolist() == [2.0, 2.0]
    assert proxy is not None
