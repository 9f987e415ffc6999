"""The one hook interface of the engine, in the shape of Chainer's FunctionHook.

Everything that watches the engine (the event stream, anomaly detection, checkpoint segments, the graph cache's
capture, user tools) subclasses `EngineHook` and is attached with `add_hook` or used as a context manager. With
no hook attached the hot path pays one truth test of a module-level list.

A hook sees every thread's engine work unless it is attached for one thread (`add_hook(h, this_thread=True)`,
or ``this_thread_only = True`` on its class): the interface then filters for it, so no hook compares thread
ids itself. A hook that sets ``overrides_forward = True`` may also replace the forward of a single op call
(`EngineHook.forward_override`): the seam that checkpointing's SELECTIVE strategy uses to store and reuse kept
outputs, so no feature ever patches an op class.

>>> from rtxviz import Tensor, Variable
>>> class CountOps(EngineHook):
...     def __init__(self):
...         self.count = 0
...     def forward_postprocess(self, op, node, inputs, output):
...         self.count += 1
>>> x = Variable.from_tensor(Tensor.ones([2]))
>>> with CountOps() as counter:
...     y = (x * x).sum()
>>> counter.count
2
"""

from __future__ import annotations

from collections.abc import Callable
from threading import get_ident
from typing import Any

#: Attached hooks, in order. Read by the engine on every op: keep it a plain list.
ACTIVE: list[EngineHook] = []
#: The attached hooks that asked for trace events (`EngineHook.traces`); the engine tests this list before
#: reporting a fine-grained happening, so those reports cost nothing unless such a hook is attached.
TRACING: list[EngineHook] = []
#: The attached hooks that may replace an op's forward (`EngineHook.overrides_forward`); `apply` consults them
#: only when this list is not empty.
OVERRIDING: list[EngineHook] = []

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
#: - ``grad_assigned(variable, value)``: user code set ``variable.grad = value`` (``optimizer.zero_grad()`` sets
#:   None); backward's own accumulation is reported by ``leaf_grad`` instead.
TRACE_KINDS = frozenset({"constant", "seed_grad", "value_read", "leaf_grad_accumulated", "module_call",
                         "grad_assigned"})

#: A forward as `apply` calls it: ``forward(ctx, *arrays) -> array``.
Forward = Callable[..., Any]


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
    #: Be asked `forward_override` for every op call (after `forward_preprocess`).
    overrides_forward = False
    #: Used as a context manager, watch only the thread that entered it.
    this_thread_only = False

    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None: ...

    def forward_override(self, op: Any, inputs: tuple, attrs: dict, forward: Forward) -> Forward | None:
        """A replacement for `forward` (the op's own, or the override of a hook attached before this one) for this
        one call, or None to leave it. Called only on hooks with ``overrides_forward = True``."""
        return None

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None: ...

    def backward_begin(self, roots: list, create_graph: bool) -> None: ...

    def backward_preprocess(self, node: Any, grad_output: Any) -> None: ...

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None: ...

    def leaf_grad(self, variable: Any, grad: Any) -> None: ...

    def backward_end(self) -> None: ...

    def event(self, kind: str, **fields: Any) -> None: ...

    def __enter__(self) -> Any:
        add_hook(self, this_thread=self.this_thread_only)
        return self

    def __exit__(self, *exc: object) -> None:
        remove_hook(self)


class _ThisThread(EngineHook):
    """A hook attached for one thread: forwards each call made on that thread, drops the others."""

    def __init__(self, hook: EngineHook, thread: int) -> None:
        self.hook, self.thread = hook, thread
        self.name = hook.name
        self.traces = hook.traces
        self.overrides_forward = hook.overrides_forward

    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None:
        if get_ident() == self.thread:
            self.hook.forward_preprocess(op, inputs, attrs)

    def forward_override(self, op: Any, inputs: tuple, attrs: dict, forward: Forward) -> Forward | None:
        if get_ident() == self.thread:
            return self.hook.forward_override(op, inputs, attrs, forward)
        return None

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        if get_ident() == self.thread:
            self.hook.forward_postprocess(op, node, inputs, output)

    def backward_begin(self, roots: list, create_graph: bool) -> None:
        if get_ident() == self.thread:
            self.hook.backward_begin(roots, create_graph)

    def backward_preprocess(self, node: Any, grad_output: Any) -> None:
        if get_ident() == self.thread:
            self.hook.backward_preprocess(node, grad_output)

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None:
        if get_ident() == self.thread:
            self.hook.backward_postprocess(node, grad_output, grad_inputs)

    def leaf_grad(self, variable: Any, grad: Any) -> None:
        if get_ident() == self.thread:
            self.hook.leaf_grad(variable, grad)

    def backward_end(self) -> None:
        if get_ident() == self.thread:
            self.hook.backward_end()

    def event(self, kind: str, **fields: Any) -> None:
        if get_ident() == self.thread:
            self.hook.event(kind, **fields)


def _attached(hook: EngineHook) -> EngineHook | None:
    """The entry of ACTIVE that stands for `hook` (itself, or its one-thread wrapper)."""
    for h in ACTIVE:
        if h is hook or (type(h) is _ThisThread and h.hook is hook):
            return h
    return None


def add_hook(hook: EngineHook, this_thread: bool = False) -> EngineHook:
    """Attach `hook` to the engine: for every thread, or (`this_thread`) for the calling thread only.
    Attaching an attached hook again does nothing."""
    if _attached(hook) is not None:
        return hook
    entry = _ThisThread(hook, get_ident()) if this_thread else hook
    ACTIVE.append(entry)
    if hook.traces:
        TRACING.append(entry)
    if hook.overrides_forward:
        OVERRIDING.append(entry)
    return hook


def remove_hook(hook: EngineHook) -> None:
    entry = _attached(hook)
    if entry is None:
        return
    for hooks in (ACTIVE, TRACING, OVERRIDING):
        if entry in hooks:
            hooks.remove(entry)


def emit(kind: str, **fields: Any) -> None:
    """Report a happening that is not an op (checkpoint, cache, scope) to every hook."""
    for hook in ACTIVE:
        hook.event(kind, **fields)


def trace(kind: str, **fields: Any) -> None:
    """Report a trace event (one of `TRACE_KINDS`) to the hooks that asked for them. Call sites test
    ``if hooks.TRACING:`` first, so nothing is paid when no such hook is attached."""
    for hook in TRACING:
        hook.event(kind, **fields)


def forward_for(op: Any, inputs: tuple, attrs: dict, forward: Forward) -> Forward:
    """The forward `apply` runs for this call: `forward`, or what the overriding hooks replaced it with (each hook
    sees the choice of the ones attached before it)."""
    for hook in OVERRIDING:
        replaced = hook.forward_override(op, inputs, attrs, forward)
        if replaced is not None:
            forward = replaced
    return forward
