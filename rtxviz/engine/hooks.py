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
#: The attached hooks that asked for trace events (`EngineHook.traces`); the engine tests this list before
#: reporting a fine-grained happening, so those reports cost nothing unless such a hook is attached.
TRACING: list[EngineHook] = []

#: The trace events, reported through `EngineHook.event` only to hooks with ``traces = True`` (they happen often,
#: e.g. one per Python-scalar operand, and only a tracer such as the graph cache's capture needs them):
#:
#: - ``constant(tensor)``: the engine made a constant Tensor from a Python/numpy value (an operand such as the
#:   2.0 of ``x * 2.0``, coerced by `as_tensor_like`) or a data-independent constant inside an op's rule or
#:   wrapper (`ops._base.constant`: a 0-d zero, layer_norm's default weight).
#: - ``seed_grad(root, grad)``: backward made the implicit ones seed of `root` (grad_output omitted).
#: - ``value_read(tensor, how)``: a tensor's values were read into Python (``how``: "item", "tolist", "numpy",
#:   "__bool__", "__float__", "__int__", "__array__"); printing a tensor is not reported.
#: - ``leaf_grad_accumulated(leaf, grad, create_graph)``: `grad` (the contribution the `leaf_grad` hook method
#:   was just called with) has been added into ``leaf.grad``; between the two calls only that accumulation ran.
#: - ``module_call(module, training)``: `nn.Module.__call__` is about to run `module.forward` (`training` is the
#:   module's flag at that moment); the graph cache's capture uses it to check each module's mode and
#:   `structure_version` on replay.
TRACE_KINDS = frozenset({"constant", "seed_grad", "value_read", "leaf_grad_accumulated", "module_call"})


class EngineHook:
    """Override the methods you need; each is called with the engine's own objects.

    forward_preprocess / forward_postprocess: around each op's forward (`node` is None when no graph is
    recorded for the op). backward_preprocess / backward_postprocess: around each node's backward rule.
    backward_begin / backward_end: around a whole backward pass. leaf_grad: a gradient accumulated into a
    leaf. event: anything else the engine reports (checkpoint segments, graph-cache hits, scopes...), and, for a
    hook whose class sets ``traces = True``, the trace events of `TRACE_KINDS` too.
    """

    name = "hook"
    #: Also receive the trace events (constant, seed_grad, value_read, leaf_grad_accumulated, module_call)
    #: through `event`.
    traces = False

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
        if getattr(hook, "traces", False):
            TRACING.append(hook)
    return hook


def remove_hook(hook: EngineHook) -> None:
    if hook in ACTIVE:
        ACTIVE.remove(hook)
    if hook in TRACING:
        TRACING.remove(hook)


def emit(kind: str, **fields: Any) -> None:
    """Report a happening that is not an op (checkpoint, cache, scope) to every hook."""
    for hook in ACTIVE:
        hook.event(kind, **fields)


def trace(kind: str, **fields: Any) -> None:
    """Report a trace event (one of `TRACE_KINDS`) to the hooks that asked for them. Call sites test
    ``if hooks.TRACING:`` first, so nothing is paid when no such hook is attached."""
    for hook in TRACING:
        hook.event(kind, **fields)
