"""The watch over one checkpointed segment: an EngineHook attached (for the running thread only) while the
segment's function runs, once in the forward and once when backward recomputes it.

On the forward it records each op's signature (`signature.py`), discovers the Variables the function reads from
outside (they become inputs of the checkpoint node) and, with SELECTIVE, stores the kept ops' outputs. On the
recompute it checks that every op repeats its signature and hands the kept outputs back instead of running
those ops again, through the engine's forward-override seam (`EngineHook.forward_override`): no op class is
ever patched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import CheckpointError
from ..hooks import EngineHook, Forward
from ..variable import Variable
from .signature import attr_sig, attrs_differ, checksum, close, fmt_attr, fmt_shapes


class SegmentWatch(EngineHook):
    """Watches every op of one segment on the thread that runs it (`this_thread_only`)."""

    name = "checkpoint"
    this_thread_only = True

    def __init__(self, seg_id: int, check: str, keep: Callable[[str], bool] | None) -> None:
        self.id = seg_id
        self.check = check
        self.keep = keep
        self.overrides_forward = keep is not None  # SELECTIVE stores and reuses kept outputs
        self.replay = False
        self.sigs: list[list] = []        # per op: [name, input shapes, output shape, dtype, checksum, attrs]
        self.kept: dict[int, list] = {}   # op index -> [output array, ctx.state]
        self.externals: dict[int, Variable] = {}
        self.index = 0
        self.pending: list[int] = []      # indices of the ops whose forward is running (preprocess seen)

    def start(self, replay: bool) -> None:
        self.replay = replay
        self.index = 0
        self.pending = []

    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None:
        idx = self.index
        self.index += 1
        self.pending.append(idx)
        in_shapes = tuple(tuple(t.data.shape) for t in inputs)
        if not self.replay:
            for t in inputs:
                if t._is_var and t.requires_grad:
                    self.externals.setdefault(id(t), t)
            self.sigs.append([op.name, in_shapes, None, None, None,
                              attr_sig(attrs) if self.check != "none" else None])
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
                    f"{fmt_shapes(in_shapes)}, the original forward gave it {fmt_shapes(shapes)}"
                )
            diff = attrs_differ(sig[5], attr_sig(attrs))
            if diff is not None:
                key, was, now = diff
                raise CheckpointError(
                    f"checkpoint segment {self.id}: recomputed op #{idx} ({name}) has attr {key}={fmt_attr(now)}, "
                    f"the original forward had {key}={fmt_attr(was)} (a Python value the segment's function reads, "
                    "such as a closure variable, changed between the forward and the backward)"
                )

    def forward_override(self, op: Any, inputs: tuple, attrs: dict, forward: Forward) -> Forward | None:
        """SELECTIVE: a kept op's forward stores its output and state (forward), or hands them back (recompute)."""
        idx = self.pending[-1]  # this call's preprocess ran just before
        kept = self.kept
        if not self.replay:
            if not self.keep(op.name):  # type: ignore[misc]  # set whenever overrides_forward is
                return None

            def store(ctx: Any, *arrays: Any) -> Any:
                out = forward(ctx, *arrays)
                kept[idx] = [out, ctx.state]
                return out

            return store
        entry = kept.get(idx)
        if entry is None:
            return None

        def reuse(ctx: Any, *arrays: Any) -> Any:
            ctx.state = entry[1]
            return entry[0]

        return reuse

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        if node is not None and not isinstance(node.op, type):
            return  # a record_operation node (a nested checkpoint, a BackwardFunction): not an op of apply
        if not self.pending:
            return
        idx = self.pending.pop()
        data = output.data
        sig = self.sigs[idx]
        if not self.replay:
            sig[2], sig[3] = tuple(data.shape), data.dtype
            if self.check == "values":
                sig[4] = checksum(data)
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
            total, sample = checksum(data)
            if not close(total, sig[4][0], data.dtype) or not all(
                    close(a, b, data.dtype) for a, b in zip(sample, sig[4][1], strict=True)):
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
