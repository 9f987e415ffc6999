"""Checkpointing's public functions: `checkpoint`, `checkpoint_sequential` and the spec's `CheckpointManager`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import hooks as _hooks
from .. import memory as _memory
from .. import random as _random
from ..errors import CheckpointError
from ..grad_mode import STATE, no_grad
from ..graph import record_operation
from ..tensor import Tensor
from ..variable import Variable
from .recompute import CheckpointContext, CheckpointFunction
from .segment import SegmentWatch
from .strategy import CheckpointStrategy

_segment_ids = itertools.count(1)
_CHECKS = ("none", "shape", "values")


def run_segment(fn: Callable[..., Any], args: tuple, check: str, keep: Callable[[str], bool] | None) -> Any:
    if check not in _CHECKS:
        raise ValueError(f"checkpoint: determinism_check must be one of {_CHECKS}, got {check!r}")
    if not callable(fn):
        raise TypeError(f"checkpoint: fn must be callable, got {type(fn).__name__}")
    if not STATE.enabled:
        return fn(*args)  # as PyTorch: under no_grad nothing is saved, so there is nothing to checkpoint
    seg = SegmentWatch(next(_segment_ids), check, keep)
    if _hooks.ACTIVE:
        _hooks.emit("checkpoint", phase="begin", segment=seg.id, name=getattr(fn, "__name__", "segment"))
    detached = tuple(Variable._wrap(a.data, None) if isinstance(a, Variable) else a for a in args)
    rng = _random.get_state()
    seg.start(replay=False)
    with seg, no_grad():
        out = fn(*detached)
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
    bfn = CheckpointFunction(CheckpointContext(fn, args, inputs, len(arg_vars), rng), seg)
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
               keep_ops: Iterable[str] | Callable[[str], bool] | None = None,
               use_reentrant: bool | None = None) -> Any:
    """Run `fn(*args)` without keeping its internal activations; recompute them during backward.

    `fn` may also be a zero-argument closure (`checkpoint(lambda: layer(h))`): every Variable it reads that
    requires grad gets its gradient. `determinism_check`: "shape" (default: each recomputed op must see and
    produce the same shapes and dtypes), "values" (also compare a checksum of every op's output), or "none".
    `keep_ops` (op names or a predicate) makes the checkpoint selective: those ops' outputs are stored, not
    recomputed. Returns one Variable; raises CheckpointError when the recomputation differs. `use_reentrant` is
    taken for PyTorch code (which passes it to silence a warning): either way this checkpoint works as PyTorch's
    ``use_reentrant=False`` does, with gradients for every Variable `fn` reads.

    >>> from rtxviz import Variable
    >>> import numpy as np
    >>> x = Variable(np.array([1.0, -1.0]), requires_grad=True)
    >>> checkpoint(lambda t: t.relu() * 3.0, x).sum().backward()
    >>> x.grad.tolist()
    [3.0, 0.0]
    """
    if use_reentrant not in (None, True, False):
        raise TypeError(f"checkpoint: use_reentrant must be True, False or None, got {use_reentrant!r}")
    keep = None
    if keep_ops is not None:
        keep = CheckpointStrategy.SELECTIVE(keep_ops).keep
    return run_segment(fn, args, determinism_check, keep)


def _sequence(layers: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def run(x: Any) -> Any:
        for layer in layers:
            x = layer(x)
        return x

    run.__name__ = f"layers[{len(layers)}]"
    return run


def checkpoint_sequential(layers: Sequence[Callable[[Any], Any]], input: Any,
                          strategy: Any = None, determinism_check: str = "shape",
                          use_reentrant: bool | None = None) -> Any:
    """Run `layers` (callables, each taking and returning one value) in order, checkpointed per `strategy`
    (default SQRT_N: ceil(√n) segments, the last one not recomputed).

    PyTorch's order, ``checkpoint_sequential(layers, segments, input)`` with an int segment count, is taken too:
    segments of len(layers) // segments layers (as PyTorch splits them), i.e. ``CheckpointStrategy.EVERY(k)``.
    `use_reentrant` is taken for PyTorch code and changes nothing (see `checkpoint`).

    >>> from rtxviz import Variable
    >>> import numpy as np
    >>> x = Variable(np.array([2.0]), requires_grad=True)
    >>> layers = [lambda t: t * 2.0] * 4
    >>> checkpoint_sequential(layers, x).sum().backward()
    >>> x.grad.tolist()
    [16.0]
    """
    layers = list(layers)
    if type(input) is int and not isinstance(strategy, CheckpointStrategy) and strategy is not None:
        # PyTorch's argument order: (functions, segments, input)
        count, input = input, strategy
        if count < 1:
            raise ValueError(f"checkpoint_sequential: segments must be >= 1, got {count}")
        strategy = CheckpointStrategy.EVERY(max(1, len(layers) // count))
    strategy = CheckpointStrategy.SQRT_N if strategy is None else strategy
    if not isinstance(strategy, CheckpointStrategy):
        raise TypeError(f"checkpoint_sequential: strategy must be a CheckpointStrategy, got {strategy!r} "
                        "(the arguments are (layers, input, strategy), or PyTorch's (layers, segments, input))")
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
            x = run_segment(run, (x,), determinism_check, strategy.keep)
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
        return run_segment(fn, args, self.determinism_check, self.strategy.keep)

    def checkpoint_sequential(self, layers: Sequence[Callable[[Any], Any]], input: Any) -> Any:
        """`layers` in order, split into segments by the strategy."""
        return checkpoint_sequential(layers, input, self.strategy, self.determinism_check)

    def __repr__(self) -> str:
        return f"CheckpointManager({self.strategy!r})"
