"""Constant folding at capture: the values of a captured graph that no input, parameter or random draw reaches
(backward's ones seed times a loss's 1/N, say) are computed once, when the program is built, and read as
constants by every replay instead of being recomputed (three op calls of a small model's eleven-op backward).

A value is folded only when all of these hold:

- it is the ones seed (numpy) or the result of an elementwise or broadcasting op (pure, no random draws) whose
  attributes are constants, whose inputs are constants or folded values, and whose forward state nothing reads;
- recomputed now, it has the same dtype, shape and bytes as it had at the end of the capture (so nothing drew
  random numbers for it, and nothing wrote into it after it was made);
- only ops read it, and none of their results shares memory with it: a folded array never leaves the program (as
  fn's result, a gradient in ``.grad``, an attribute or an op's state), so nothing outside can write into it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..graph import as_array
from .bindings import CONST, SLOT, STATE_PART, ReplayCtx
from .capture import Capture

FOLDABLE_KINDS = frozenset({"elementwise", "broadcast_binary"})
ESCAPES = -1  # a reader that is no op: fn's result, a leaf gradient, an attribute template


def template_refs(tpl: Any) -> Iterator[tuple]:
    """Every binding an attribute or result template (Capture.bind_attr) reads."""
    if tpl is None:
        return
    kind = tpl[0]
    if kind == "bind":
        yield tpl[1]
    elif kind == "tensor":
        yield tpl[2]
    elif kind == "seq":
        for sub, _ in tpl[2]:
            yield from template_refs(sub)
    elif kind in ("dict", "obj"):
        for entry in tpl[1] if kind == "dict" else tpl[2]:
            yield from template_refs(entry[1])


def readers(cap: Capture, out_tpl: Any) -> tuple[dict[int, list[int]], set[int]]:
    """(per slot, who reads it: the index of each op instruction, or ESCAPES), and the ops whose forward state a
    later binding reads (their ctx must be kept)."""
    by_slot: dict[int, list[int]] = {}
    state_read: set[int] = set()

    def note(ref: tuple, who: int) -> None:
        if ref[0] == SLOT:
            by_slot.setdefault(ref[1], []).append(who)
        elif ref[0] == STATE_PART:
            state_read.add(ref[1])

    for i, ins in enumerate(cap.instrs):
        if ins[0] == "op":
            for r in ins[5]:
                note(r, i)
            for r in template_refs(ins[4]):
                note(r, ESCAPES)
        elif ins[0] == "leaf":
            note(ins[2], ESCAPES)
    for r in template_refs(out_tpl):
        note(r, ESCAPES)
    return by_slot, state_read


def fold_constants(cap: Capture, by_slot: dict[int, list[int]], state_read: set[int]) -> dict[int, Any]:
    """Slot -> its folded value, for the slots that fold (the module docstring's rules)."""
    values: dict[int, Any] = {}
    for ins in cap.instrs:
        if ins[0] == "seed":
            _, m, shape, dtype, xp = ins
            if xp is np:
                values[m] = np.ones(shape, dtype)
        elif ins[0] == "op":
            _, k, op, attrs, tpl, in_refs, m, _, _ = ins
            if op.kind not in FOLDABLE_KINDS or tpl is not None or k in state_read:
                continue
            args = [cap.consts[r[1]] if r[0] == CONST else values.get(r[1]) if r[0] == SLOT else None
                    for r in in_refs]
            if args and all(type(a) is np.ndarray for a in args):
                ctx = ReplayCtx()
                ctx.attrs, ctx.state = attrs, None
                values[m] = as_array(op.forward(ctx, *args), args[0])
    kept = cap.keep_by_slot
    folded = {}
    for m, value in values.items():
        then = kept[m]
        if type(then) is not np.ndarray or then.dtype != value.dtype or then.shape != value.shape \
                or then.tobytes() != value.tobytes():
            continue
        users = by_slot.get(m, ())
        if all(who != ESCAPES and not np.may_share_memory(kept[cap.instrs[who][6]], then) for who in users):
            folded[m] = value
    return folded
