"""Gradient checkpointing: trade activation memory for recomputation.

A checkpointed segment is ONE recorded op. Its forward runs the segment under `no_grad`, so the segment's
internal activations are freed at once; the node keeps only the segment's inputs (and the random generator's
state, so dropout replays the same numbers). Its backward re-runs the segment with grad mode on and
differentiates that fresh graph with the incoming gradient, returning gradients for the segment inputs AND for
every Variable the segment read from outside (parameters, captured activations): those are discovered while
the forward runs and become inputs of the checkpoint node, so the engine routes their gradients exactly as it
would without checkpointing (`.backward()` accumulates them into `.grad`, `rtxviz.grad` returns them).

>>> from rtxviz import Tensor, Variable
>>> from rtxviz.engine.checkpoint import checkpoint
>>> w = Variable(Tensor.from_slice([1.0, 2.0], [2], dtype="float64").data, requires_grad=True)
>>> x = Variable(Tensor.from_slice([3.0, 4.0], [2], dtype="float64").data, requires_grad=True)
>>> y = checkpoint(lambda v: (v * w - 5.0).relu(), x)  # nothing inside is kept for backward
>>> y.sum().backward()                                  # ... it is recomputed here
>>> x.grad.tolist(), w.grad.tolist()
([0.0, 2.0], [0.0, 4.0])

Strategies (`CheckpointStrategy`) decide how `checkpoint_sequential` splits a list of layers into segments:
`NONE`, `SQRT_N`, `EVERY(k)` and `SELECTIVE(keep_ops=...)`. See docs/checkpointing.md.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from . import hooks as _hooks
from . import memory as _memory
from . import random as _random
from .backward import grad as _grad
from .errors import GraphError, RtxvizError
from .grad_mode import STATE, enable_grad, no_grad
from .graph import BackwardContext, BackwardFunction, record_operation
from .tensor import Tensor
from .variable import Variable

__all__ = ["CheckpointError", "CheckpointManager", "CheckpointStrategy", "checkpoint", "checkpoint_sequential"]

_segment_ids = itertools.count(1)
_CHECKS = ("none", "shape", "values")
_MISSING = object()


class CheckpointError(RtxvizError, RuntimeError):
    """A checkpointed segment could not be recomputed faithfully (or was used in an unsupported way)."""


# -- strategies ------------------------------------------------------------------------------------------------
class CheckpointStrategy:
    """How to split n layers into checkpointed segments.

    - ``CheckpointStrategy.NONE``: no checkpointing; every activation is kept (O(n) memory).
    - ``CheckpointStrategy.SQRT_N``: ceil(√n) segments (O(√n) memory, one extra forward).
    - ``CheckpointStrategy.EVERY(k)``: a segment every k layers (O(n/k + k) memory).
    - ``CheckpointStrategy.SELECTIVE(keep_ops={"matmul"})`` (or a predicate on the op name): every layer is a
      segment inside which the outputs of the kept ops are stored during the forward and reused on recompute;
      the other ops (elementwise ones, typically) are recomputed.

    As PyTorch's `checkpoint_sequential`, the last segment of NONE/SQRT_N/EVERY runs without checkpointing: its
    activations are needed first by backward, so recomputing them would save nothing.

    >>> CheckpointStrategy.SQRT_N.segments(10)
    [(0, 3), (3, 6), (6, 8), (8, 10)]
    >>> CheckpointStrategy.EVERY(4).segments(10)
    [(0, 4), (4, 8), (8, 10)]
    """

    NONE: CheckpointStrategy
    SQRT_N: CheckpointStrategy

    def __init__(self, kind: str, k: int | None = None, keep: Callable[[str], bool] | None = None,
                 label: str | None = None) -> None:
        self.kind = kind
        self.k = k
        self.keep = keep
        self._label = label or kind

    @staticmethod
    def EVERY(k: int) -> CheckpointStrategy:  # noqa: N802 - the spec's spelling, `Every(k)`
        """A checkpointed segment every `k` layers."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"CheckpointStrategy.EVERY: k must be a positive int, got {k!r}")
        return CheckpointStrategy("every", k=k, label=f"EVERY({k})")

    @staticmethod
    def SELECTIVE(keep_ops: Iterable[str] | Callable[[str], bool] | None = None) -> CheckpointStrategy:  # noqa: N802
        """Keep the outputs of the ops `keep_ops` names (a set of op names, or a predicate on the name)."""
        if keep_ops is None:
            keep_ops = {"matmul"}
        if callable(keep_ops):
            pred = keep_ops
            label = f"SELECTIVE({getattr(keep_ops, '__name__', 'predicate')})"
        else:
            names = frozenset(keep_ops)
            if not all(isinstance(n, str) for n in names):
                raise TypeError(f"CheckpointStrategy.SELECTIVE: keep_ops must be op names, got {keep_ops!r}")

            def pred(name: str, _names: frozenset = names) -> bool:
                return name in _names

            label = f"SELECTIVE({sorted(names)})"
        return CheckpointStrategy("selective", keep=pred, label=label)

    def segments(self, n: int) -> list[tuple[int, int]]:
        """The [start, stop) layer ranges of n layers; larger segments first (the last one is not recomputed)."""
        if n <= 0:
            return []
        if self.kind == "none":
            return [(0, n)]
        if self.kind == "selective":
            return [(i, i + 1) for i in range(n)]
        if self.kind == "every":
            return [(i, min(i + self.k, n)) for i in range(0, n, self.k)]
        count = math.ceil(math.sqrt(n))
        base, extra = divmod(n, count)
        out, start = [], 0
        for i in range(count):
            stop = start + base + (1 if i < extra else 0)
            out.append((start, stop))
            start = stop
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CheckpointStrategy) and (self.kind, self.k, self._label) == (
            other.kind, other.k, other._label)

    def __hash__(self) -> int:
        return hash((self.kind, self.k, self._label))

    def __repr__(self) -> str:
        return f"CheckpointStrategy.{self._label}"


CheckpointStrategy.NONE = CheckpointStrategy("none", label="NONE")
CheckpointStrategy.SQRT_N = CheckpointStrategy("sqrt_n", label="SQRT_N")


# -- watching the ops of a segment -----------------------------------------------------------------------------
def _checksum(array: Any) -> tuple[float, tuple]:
    """A cheap fingerprint of values: the sum and up to 8 elements at a stride."""
    flat = array.reshape(-1)
    step = max(1, flat.size // 8)
    total = float(flat.sum(dtype="float64")) if flat.size else 0.0
    return total, tuple(float(v) for v in flat[::step][:8].tolist())


_PLAIN = (int, float, bool, str, complex, type(None), type(Ellipsis), np.generic, np.dtype, type)


def _plain(v: Any, depth: int = 0) -> bool:
    """A value `==` compares cheaply and exactly: Python scalars, strings, dtypes, and tuples/lists/slices of
    them (arrays, Tensors and op-private objects are not: their values are covered by the shape/value checks)."""
    if isinstance(v, _PLAIN):
        return True
    if depth < 3:
        if type(v) in (tuple, list):
            return all(_plain(e, depth + 1) for e in v)
        if type(v) is slice:
            return _plain(v.start, depth + 1) and _plain(v.stop, depth + 1) and _plain(v.step, depth + 1)
    return False


def _attr_sig(attrs: Any) -> dict | None:
    """The plain-valued attrs of an op (e.g. the 3.0 of ``h * 3.0``, a dim, a reduction), or None when none."""
    if not attrs:
        return None
    out = {k: v for k, v in attrs.items() if _plain(v)}
    return out or None


def _same(a: Any, b: Any) -> bool:
    if type(a) in (tuple, list) and type(b) is type(a):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        if a == b:
            return True
    except (TypeError, ValueError):  # pragma: no cover - plain values compare
        return False
    return a != a and b != b  # both NaN


def _attrs_differ(before: dict | None, after: dict | None) -> tuple | None:
    """(key, original value, recomputed value) of the first attr that differs, or None."""
    if before is after:
        return None
    before, after = before or {}, after or {}
    for key in (*before, *(k for k in after if k not in before)):
        a, b = before.get(key, _MISSING), after.get(key, _MISSING)
        if a is _MISSING or b is _MISSING or not _same(a, b):
            return key, a, b
    return None


def _fmt_attr(v: Any) -> str:
    return "<not a Python scalar>" if v is _MISSING else repr(v)


def _close(a: float, b: float, dtype: Any) -> bool:
    if a == b or (a != a and b != b):  # equal, or both NaN
        return True
    kind = getattr(dtype, "kind", "f")
    if kind not in "fc":
        return False
    tol = 1e-12 if getattr(dtype, "itemsize", 4) >= 8 else 1e-5
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


# SELECTIVE swaps a kept op's forward for one call. Op forwards are class attributes shared by every thread, so the
# swap is a dispatcher installed on the Op class (while any segment needs it) that consults per-thread one-shot
# overrides: other threads' calls of the op run the original forward, untouched.
_LOCAL = threading.local()
_PATCH_LOCK = threading.Lock()
_INSTALLED: dict[Any, list] = {}  # op class -> [its own "forward" entry (or _MISSING), pending overrides (all threads)]


def _overrides() -> dict:
    d = getattr(_LOCAL, "overrides", None)
    if d is None:
        d = _LOCAL.overrides = {}
    return d


def _dispatcher(op: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    def forward(ctx: Any, *arrays: Any) -> Any:
        pending = getattr(_LOCAL, "overrides", None)
        if pending:
            stack = pending.get(op)
            if stack:
                fn = stack.pop()
                _release(op)
                return fn(ctx, arrays, forward)  # `forward` again: the next override down, or the original
        return original(ctx, *arrays)

    forward.__wrapped__ = original  # what a graph-cache capture records instead of this dispatcher
    return forward


def _push_override(op: Any, fn: Callable[..., Any]) -> None:
    _overrides().setdefault(op, []).append(fn)
    with _PATCH_LOCK:
        entry = _INSTALLED.get(op)
        if entry is not None:
            entry[1] += 1
            return
        own = op.__dict__.get("forward", _MISSING)
        _INSTALLED[op] = [own, 1]
        op.forward = staticmethod(_dispatcher(op, op.forward))


def _release(op: Any) -> None:
    with _PATCH_LOCK:
        entry = _INSTALLED[op]
        entry[1] -= 1
        if entry[1]:
            return
        del _INSTALLED[op]
        if entry[0] is _MISSING:
            if "forward" in op.__dict__:
                delattr(op, "forward")
        else:
            op.forward = entry[0]


def _drop_override(op: Any, fn: Callable[..., Any]) -> None:
    """Withdraw an override that was never consumed (the op's forward did not run after its preprocess)."""
    stack = _overrides().get(op)
    if stack and fn in stack:
        stack.remove(fn)
        _release(op)


class _Segment(_hooks.EngineHook):
    """Watches every op of one segment: records a signature per op on the forward, checks it on the recompute,
    discovers the Variables read from outside, and (SELECTIVE) stores / replays the kept ops' outputs.

    Hooks are global, so it listens only to the thread that runs the segment (recorded by `start`, once for the
    forward and once for the recompute, which may run in another thread): other threads' ops are no part of it."""

    name = "checkpoint"

    def __init__(self, seg_id: int, check: str, keep: Callable[[str], bool] | None) -> None:
        self.id = seg_id
        self.check = check
        self.keep = keep
        self.replay = False
        self.thread = threading.get_ident()
        self.sigs: list[list] = []        # per op: [name, input shapes, output shape, dtype, checksum, attrs]
        self.kept: dict[int, list] = {}   # op index -> [output array, ctx.state]
        self.externals: dict[int, Variable] = {}
        self.index = 0
        self.pending: list[tuple[int, Any]] = []
        self.overrides: list[tuple[Any, Callable[..., Any]]] = []  # SELECTIVE overrides not yet consumed

    def start(self, replay: bool) -> None:
        self.replay = replay
        self.thread = threading.get_ident()
        self.index = 0
        self.pending = []

    # the hook interface
    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None:
        if threading.get_ident() != self.thread:
            return
        idx = self.index
        self.index += 1
        self.pending.append((idx, op))
        in_shapes = tuple(tuple(t.data.shape) for t in inputs)
        if not self.replay:
            for t in inputs:
                if t._is_var and t.requires_grad:
                    self.externals.setdefault(id(t), t)
            self.sigs.append([op.name, in_shapes, None, None, None,
                              _attr_sig(attrs) if self.check != "none" else None])
            if self.keep is not None and self.keep(op.name):
                self._patch(op, idx, capture=True)
            return
        if idx >= len(self.sigs):
            raise CheckpointError(
                f"checkpoint segment {self.id}: the recomputation ran op #{idx} ({op.name}) but the original forward "
                f"ran only {len(self.sigs)} ops; the segment's function must do the same work every time it is called"
            )
        sig = self.sigs[idx]
        name, shapes = sig[0], sig[1]
        if op.name != name:
            raise CheckpointError(
                f"checkpoint segment {self.id}: recomputed op #{idx} is {op.name}, the original forward ran {name} "
                "there (the segment's function took a different path on recomputation)"
            )
        if self.check != "none":
            if in_shapes != shapes:
                raise CheckpointError(
                    f"checkpoint segment {self.id}: recomputed op #{idx} ({name}) got inputs of shapes "
                    f"{_fmt_shapes(in_shapes)}, the original forward gave it {_fmt_shapes(shapes)}"
                )
            diff = _attrs_differ(sig[5], _attr_sig(attrs))
            if diff is not None:
                key, was, now = diff
                raise CheckpointError(
                    f"checkpoint segment {self.id}: recomputed op #{idx} ({name}) has attr {key}={_fmt_attr(now)}, "
                    f"the original forward had {key}={_fmt_attr(was)} (a Python value the segment's function reads, "
                    "such as a closure variable, changed between the forward and the backward)"
                )
        if idx in self.kept:
            self._patch(op, idx, capture=False)

    def forward_postprocess(self, node: Any, inputs: tuple, output: Any) -> None:
        if node is not None and not isinstance(node.op, type):
            return  # a record_operation node (a nested checkpoint, a BackwardFunction): not an op of apply
        if not self.pending or threading.get_ident() != self.thread:
            return
        idx, _op = self.pending.pop()
        data = output.data
        sig = self.sigs[idx]
        if not self.replay:
            sig[2], sig[3] = tuple(data.shape), data.dtype
            if self.check == "values":
                sig[4] = _checksum(data)
            if idx in self.kept:
                self.kept[idx][0] = data
            return
        if self.check == "none":
            return
        name = sig[0]
        if tuple(data.shape) != sig[2]:
            raise CheckpointError(
                f"checkpoint segment {self.id}: recomputed op #{idx} ({name}) produced shape {tuple(data.shape)}, "
                f"the original forward produced {sig[2]}"
            )
        if data.dtype != sig[3]:
            raise CheckpointError(
                f"checkpoint segment {self.id}: recomputed op #{idx} ({name}) produced dtype {data.dtype}, "
                f"the original forward produced {sig[3]}"
            )
        if self.check == "values" and sig[4] is not None:
            total, sample = _checksum(data)
            if not _close(total, sig[4][0], data.dtype) or not all(
                    _close(a, b, data.dtype) for a, b in zip(sample, sig[4][1], strict=True)):
                raise CheckpointError(
                    f"checkpoint segment {self.id}: recomputed op #{idx} ({name}) produced different values: sum "
                    f"{total!r} and sample {list(sample)}, the original forward gave sum {sig[4][0]!r} and sample "
                    f"{list(sig[4][1])} (a non-deterministic op, or state the function changes between calls?)"
                )

    def finish_replay(self) -> None:
        if self.index != len(self.sigs):
            raise CheckpointError(
                f"checkpoint segment {self.id}: the recomputation ran {self.index} ops, the original forward ran "
                f"{len(self.sigs)}; the segment's function must do the same work every time it is called"
            )

    # SELECTIVE: the op's next forward in this thread captures its output and state, or replays the kept ones.
    def _patch(self, op: Any, idx: int, capture: bool) -> None:
        kept = self.kept
        overrides = self.overrides

        def forward(ctx: Any, arrays: tuple, call_next: Callable[..., Any]) -> Any:
            overrides.remove(entry)
            if capture:
                out = call_next(ctx, *arrays)
                kept[idx] = [out, ctx.state]
                return out
            out, state = kept[idx]
            ctx.state = state
            return out

        entry = (op, forward)
        overrides.append(entry)
        _push_override(op, forward)

    def restore_all(self) -> None:
        for op, fn in reversed(list(self.overrides)):
            _drop_override(op, fn)
        self.overrides.clear()


def _fmt_shapes(shapes: tuple) -> str:
    return ", ".join(str(s) for s in shapes) or "()"


# -- the recorded op -------------------------------------------------------------------------------------------
class _CheckpointContext(BackwardContext):
    """What a checkpoint node keeps for backward: the function, its arguments, the node's inputs and the RNG
    state. `free` (after backward, unless retain_graph) drops them and gives their bytes back to the accounting."""

    def __init__(self, fn: Callable[..., Any], args: tuple, inputs: list[Variable], n_args: int, rng: dict) -> None:
        super().__init__()
        self.fn = fn
        self.args: tuple | None = args
        self.inputs = inputs      # node inputs: the args that require grad, then the external Variables
        self.n_args = n_args      # how many of `inputs` are args
        self.rng = rng
        self.mem: tuple | None = None

    def free(self) -> None:
        super().free()
        self.fn = self.args = self.inputs = self.rng = None
        if self.mem is not None:
            _memory.untrack(self.mem)
            self.mem = None

    def __del__(self) -> None:
        if self.mem is not None:
            _memory.untrack(self.mem)


class _CheckpointFunction(BackwardFunction):
    """The checkpoint node: holds the segment's function, inputs, RNG state and per-op signatures."""

    name = "checkpoint"
    rule = "recompute the segment, then backpropagate through it"
    differentiable = True  # so create_graph reaches our backward, which explains why it is not supported

    def __init__(self, ctx: _CheckpointContext, seg: _Segment) -> None:
        self.ctx = ctx
        self.seg = seg

    def backward(self, grad_output: Any) -> list[Any]:
        if STATE.enabled:
            raise CheckpointError(
                f"checkpoint segment {self.seg.id}: create_graph=True (higher-order gradients) through a "
                "checkpointed segment is not supported; run that part without checkpointing"
            )
        ctx = self.ctx
        if ctx.args is None:
            raise GraphError(
                f"checkpoint segment {self.seg.id}: backward through it a second time, but its saved inputs were "
                "freed after the first backward; pass retain_graph=True to the first backward"
            )
        seg = self.seg
        if _hooks.ACTIVE:
            _hooks.emit("checkpoint", phase="recompute_begin", segment=seg.id, ops=len(seg.sigs))
        leaves: list[Variable] = []
        args = []
        for a in ctx.args:
            if isinstance(a, Variable):
                v = Variable._wrap(a.data, None)
                if a.requires_grad:
                    v.requires_grad = True
                    leaves.append(v)
                args.append(v)
            else:
                args.append(a)
        externals = ctx.inputs[ctx.n_args:]
        # Cut the captured Variables from the outer graph for the length of the recompute: the inner backward
        # must stop at them (not run the outer graph) and must not fire their hooks (the outer pass will).
        saved = [(v, v._node, v._hooks) for v in externals]
        for v, _node, _h in saved:
            v._node = None
            v._hooks = None
        here = _random.get_state()
        try:
            _random.set_state(ctx.rng)
            seg.start(replay=True)
            _hooks.add_hook(seg)
            try:
                with enable_grad():
                    out = ctx.fn(*args)
                seg.finish_replay()
            finally:
                _hooks.remove_hook(seg)
                seg.restore_all()
                _random.set_state(here)
            if not isinstance(out, Variable) or not out.requires_grad:
                raise CheckpointError(
                    f"checkpoint segment {seg.id}: the recomputed output does not depend on anything that requires "
                    "grad, but the original one did"
                )
            wanted = leaves + externals
            grads = list(_grad([out], wanted, [grad_output], allow_unused=True)) if wanted else []
        finally:
            for v, node, hks in saved:
                v._node = node
                v._hooks = hks
        if _hooks.ACTIVE:
            _hooks.emit("checkpoint", phase="recompute_end", segment=seg.id)
        return grads


def _run_segment(fn: Callable[..., Any], args: tuple, check: str, keep: Callable[[str], bool] | None) -> Any:
    if check not in _CHECKS:
        raise ValueError(f"checkpoint: determinism_check must be one of {_CHECKS}, got {check!r}")
    if not callable(fn):
        raise TypeError(f"checkpoint: fn must be callable, got {type(fn).__name__}")
    if not STATE.enabled:
        return fn(*args)  # as PyTorch: under no_grad nothing is saved, so there is nothing to checkpoint
    seg = _Segment(next(_segment_ids), check, keep)
    if _hooks.ACTIVE:
        _hooks.emit("checkpoint", phase="begin", segment=seg.id, name=getattr(fn, "__name__", "segment"))
    detached = tuple(Variable._wrap(a.data, None) if isinstance(a, Variable) else a for a in args)
    rng = _random.get_state()
    seg.start(replay=False)
    _hooks.add_hook(seg)
    try:
        with no_grad():
            out = fn(*detached)
    finally:
        _hooks.remove_hook(seg)
        seg.restore_all()
    if isinstance(out, list | tuple):
        raise CheckpointError(
            f"checkpoint segment {seg.id}: the function returned a {type(out).__name__}; a checkpointed segment "
            "must return one Tensor/Variable (checkpoint each output's segment separately)"
        )
    if not isinstance(out, Tensor):
        raise CheckpointError(
            f"checkpoint segment {seg.id}: the function must return a Tensor/Variable, got {type(out).__name__}"
        )
    arg_vars = [a for a in args if isinstance(a, Variable) and a.requires_grad]
    externals = list(seg.externals.values())
    inputs = arg_vars + externals
    if out._node is not None or out.requires_grad:
        out = Variable._wrap(out.data, None)
    if not inputs:
        if _hooks.ACTIVE:
            _hooks.emit("checkpoint", phase="end", segment=seg.id, ops=len(seg.sigs), saved_bytes=0)
        return out if isinstance(out, Variable) else Variable._wrap(out.data, None)
    bfn = _CheckpointFunction(_CheckpointContext(fn, args, inputs, len(arg_vars), rng), seg)
    # Saved for backward: the segment's inputs (counted when they are activations, i.e. non-leaf) and, with
    # SELECTIVE, the kept ops' outputs.
    keys = list(_memory.track(tuple(inputs), None) or ())
    for kept in seg.kept.values():
        keys.extend(_memory.track(None, kept[0]) or ())
    bfn.ctx.mem = tuple(keys) if keys else None
    result = record_operation(inputs, out, bfn)
    if _hooks.ACTIVE:  # nobody listening: no event, and no byte count for it
        _hooks.emit("checkpoint", phase="end", segment=seg.id, ops=len(seg.sigs),
                    saved_bytes=sum(int(a.data.nbytes) for a in args if isinstance(a, Tensor)))
    return result


# -- public API ------------------------------------------------------------------------------------------------
def checkpoint(fn: Callable[..., Any], *args: Any, determinism_check: str = "shape",
               keep_ops: Iterable[str] | Callable[[str], bool] | None = None) -> Any:
    """Run `fn(*args)` without keeping its internal activations; recompute them during backward.

    `fn` may also be a zero-argument closure (`checkpoint(lambda: layer(h))`): every Variable it reads that
    requires grad gets its gradient. `determinism_check`: "shape" (default: each recomputed op must see and
    produce the same shapes and dtypes), "values" (also compare a checksum of every op's output), or "none".
    `keep_ops` (op names or a predicate) makes the checkpoint selective: those ops' outputs are stored, not
    recomputed. Returns one Variable; raises CheckpointError when the recomputation differs.

    >>> from rtxviz import Variable
    >>> import numpy as np
    >>> x = Variable(np.array([1.0, -1.0]), requires_grad=True)
    >>> checkpoint(lambda t: t.relu() * 3.0, x).sum().backward()
    >>> x.grad.tolist()
    [3.0, 0.0]
    """
    keep = None
    if keep_ops is not None:
        keep = CheckpointStrategy.SELECTIVE(keep_ops).keep
    return _run_segment(fn, args, determinism_check, keep)


def _sequence(layers: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def run(x: Any) -> Any:
        for layer in layers:
            x = layer(x)
        return x

    run.__name__ = f"layers[{len(layers)}]"
    return run


def checkpoint_sequential(layers: Sequence[Callable[[Any], Any]], input: Any,  # noqa: A002 - PyTorch's name
                          strategy: CheckpointStrategy | None = None, determinism_check: str = "shape") -> Any:
    """Run `layers` (callables, each taking and returning one value) in order, checkpointed per `strategy`
    (default SQRT_N: ceil(√n) segments, the last one not recomputed).

    >>> from rtxviz import Variable
    >>> import numpy as np
    >>> x = Variable(np.array([2.0]), requires_grad=True)
    >>> layers = [lambda t: t * 2.0] * 4
    >>> checkpoint_sequential(layers, x).sum().backward()
    >>> x.grad.tolist()
    [16.0]
    """
    strategy = CheckpointStrategy.SQRT_N if strategy is None else strategy
    if not isinstance(strategy, CheckpointStrategy):
        raise TypeError(f"checkpoint_sequential: strategy must be a CheckpointStrategy, got {strategy!r}")
    layers = list(layers)
    for i, layer in enumerate(layers):
        if not callable(layer):
            raise TypeError(f"checkpoint_sequential: layer {i} is a {type(layer).__name__}, not callable")
    if strategy.kind == "none" or not STATE.enabled:
        return _sequence(layers)(input)
    segments = strategy.segments(len(layers))
    x = input
    for n, (start, stop) in enumerate(segments):
        run = _sequence(layers[start:stop])
        if strategy.kind != "selective" and n == len(segments) - 1:
            x = run(x)  # the last segment's activations are needed first: recomputing them saves nothing
        else:
            x = _run_segment(run, (x,), determinism_check, strategy.keep)
    return x


class CheckpointManager:
    """The spec's `CheckpointManager::new(strategy)`: checkpoints functions and layer lists by one strategy.

    >>> from rtxviz import Variable
    >>> import numpy as np
    >>> mgr = CheckpointManager(CheckpointStrategy.SQRT_N)
    >>> x = Variable(np.array([1.0, 2.0]), requires_grad=True)
    >>> h = mgr.checkpoint(lambda: (x * x).sum())      # the spec's closure form
    >>> h.backward(); x.grad.tolist()
    [2.0, 4.0]
    """

    def __init__(self, strategy: CheckpointStrategy | None = None, determinism_check: str = "shape") -> None:
        strategy = CheckpointStrategy.SQRT_N if strategy is None else strategy
        if not isinstance(strategy, CheckpointStrategy):
            raise TypeError(f"CheckpointManager: strategy must be a CheckpointStrategy, got {strategy!r}")
        if determinism_check not in _CHECKS:
            raise ValueError(
                f"CheckpointManager: determinism_check must be one of {_CHECKS}, got {determinism_check!r}")
        self.strategy = strategy
        self.determinism_check = determinism_check

    def checkpoint(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` as one checkpointed segment (plainly with NONE; selectively with SELECTIVE)."""
        if self.strategy.kind == "none":
            return fn(*args)
        return _run_segment(fn, args, self.determinism_check, self.strategy.keep)

    def checkpoint_sequential(self, layers: Sequence[Callable[[Any], Any]], input: Any) -> Any:  # noqa: A002
        """`layers` in order, split into segments by the strategy."""
        return checkpoint_sequential(layers, input, self.strategy, self.determinism_check)

    def __repr__(self) -> str:
        return f"CheckpointManager({self.strategy!r})"
