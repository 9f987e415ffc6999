"""The recorded op of a checkpointed segment: one node whose backward re-runs the segment with grad mode on and
differentiates that fresh graph, returning gradients for the segment's inputs and every Variable it read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import hooks as _hooks
from .. import memory as _memory
from .. import random as _random
from ..backward import grad as _grad
from ..errors import CheckpointError, GraphError
from ..grad_mode import STATE, enable_grad
from ..graph import BackwardContext, BackwardFunction
from ..variable import Variable
from .segment import SegmentWatch


class CheckpointContext(BackwardContext):
    """What a checkpoint node keeps for backward: the function, its arguments, the node's inputs and the RNG
    state. `free` (after backward, unless retain_graph) drops them and gives their bytes back to the accounting."""

    def __init__(self, fn: Callable[..., Any], args: tuple, inputs: list[Variable], n_args: int, rng: dict) -> None:
        super().__init__()
        self.fn: Callable[..., Any] | None = fn
        self.args: tuple | None = args
        self.inputs: list[Variable] | None = inputs  # node inputs: the args that require grad, then the externals
        self.n_args = n_args                          # how many of `inputs` are args
        self.rng: dict | None = rng
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


class CheckpointFunction(BackwardFunction):
    """The checkpoint node: holds the segment's function, inputs, RNG state and per-op signatures."""

    name = "checkpoint"
    rule = "recompute the segment, then backpropagate through it"
    differentiable = True  # so create_graph reaches our backward, which explains why it is not supported

    ctx: CheckpointContext

    def __init__(self, ctx: CheckpointContext, seg: SegmentWatch) -> None:
        self.ctx = ctx
        self.seg = seg

    def backward(self, grad_output: Any) -> list[Any]:
        if STATE.enabled:
            raise CheckpointError(
                f"checkpoint segment {self.seg.id}: create_graph=True (higher-order gradients) through a "
                "checkpointed segment is not supported; run that part without checkpointing"
            )
        ctx = self.ctx
        if ctx.args is None or ctx.fn is None or ctx.inputs is None or ctx.rng is None:  # all freed together
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
            try:
                with seg, enable_grad():  # the thread running backward may not be the one that ran forward
                    out = ctx.fn(*args)
                seg.finish_replay()
            finally:
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
