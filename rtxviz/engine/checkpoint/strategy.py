"""How `checkpoint_sequential` splits a list of layers into checkpointed segments."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable


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
    def EVERY(k: int) -> CheckpointStrategy:
        """A checkpointed segment every `k` layers."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"CheckpointStrategy.EVERY: k must be a positive int, got {k!r}")
        return CheckpointStrategy("every", k=k, label=f"EVERY({k})")

    @staticmethod
    def SELECTIVE(keep_ops: Iterable[str] | Callable[[str], bool] | None = None) -> CheckpointStrategy:
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
            k = self.k or 1
            return [(i, min(i + k, n)) for i in range(0, n, k)]
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
