"""The one hook interface of the engine, in the shape of Chainer's FunctionHook.

Everything that watches the engine (the event stream, anomaly detection, user tools) subclasses `EngineHook`
and is attached with `add_hook` or used as a context manager. With no hook attached the hot path pays one
truth test of a module-level list.

>>> from rtxviz.engine.hooks import EngineHook
>>> class CountOps(EngineHook):
...     def __init__(self):
...         self.count = 0
...     def forward_postprocess(self, node, inputs, output):
...         self.count += 1
"""

from __future__ import annotations

from typing import Any

#: Attached hooks, in order. Read by the engine on every op: keep it a plain list.
ACTIVE: list[EngineHook] = []


class EngineHook:
    """Override the methods you need; each is called with the engine's own objects.

    forward_preprocess / forward_postprocess: around each op's forward (`node` is None when no graph is
    recorded for the op). backward_preprocess / backward_postprocess: around each node's backward rule.
    backward_begin / backward_end: around a whole backward pass. leaf_grad: a gradient accumulated into a
    leaf. event: anything else the engine reports (checkpoint segments, graph-cache hits, scopes...).
    """

    name = "hook"

    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None: ...

    def forward_postprocess(self, node: Any, inputs: tuple, output: Any) -> None: ...

    def backward_begin(self, roots: list, create_graph: bool) -> None: ...

    def backward_preprocess(self, node: Any, grad_output: Any) -> None: ...

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None: ...

    def leaf_grad(self, variable: Any, grad: Any) -> None: ...

    def backward_end(self) -> None: ...

    def event(self, kind: str, **fields: Any) -> None: ...

    def __enter__(self) -> EngineHook:
        add_hook(self)
        return self

    def __exit__(self, *exc: object) -> None:
        remove_hook(self)


def add_hook(hook: EngineHook) -> EngineHook:
    """Attach `hook` to the engine (all threads)."""
    if hook not in ACTIVE:
        ACTIVE.append(hook)
    return hook


def remove_hook(hook: EngineHook) -> None:
    if hook in ACTIVE:
        ACTIVE.remove(hook)


def emit(kind: str, **fields: Any) -> None:
    """Report a happening that is not an op (checkpoint, cache, scope) to every hook."""
    for hook in ACTIVE:
        hook.event(kind, **fields)
