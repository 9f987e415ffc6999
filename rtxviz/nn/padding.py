"""Padding layers, as PyTorch's: ConstantPad1d/2d/3d, ZeroPad1d/2d/3d, ReflectionPad1d/2d/3d,
ReplicationPad1d/2d/3d and CircularPad1d/2d/3d, each one call of `F.pad` (the engine's pad op).

`padding` is an int (every side) or a tuple of 2·n ints in F.pad's order: (left, right) of the last dim, then
(top, bottom), then (front, back). Reflection, replication and circular padding take an unbatched or batched
input (n + 1 or n + 2 dims); constant padding takes any input with at least n dims, and negative pads crop.

>>> from rtxviz import Tensor
>>> x = Tensor.arange(3.0).reshape(1, 3)
>>> ZeroPad1d((1, 2))(x).tolist(), ReflectionPad1d(2)(x).tolist(), ReplicationPad1d((0, 2))(x).tolist()
([[0.0, 0.0, 1.0, 2.0, 0.0, 0.0]], [[2.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0]], [[0.0, 1.0, 2.0, 2.0, 2.0]])
>>> ConstantPad2d((1, 0, 0, 1), 9.0)(Tensor.ones([1, 1, 1])).tolist()
[[[9.0, 1.0], [9.0, 9.0]]]
"""

from __future__ import annotations

from typing import Any

from ..engine.ops.shape import pad as _pad
from ._args import input_dims, ntuple
from .module import Module

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]

_SPACE = {1: "L", 2: "H, W", 3: "D, H, W"}


class _PadNd(Module):
    """A padding of the last `dims` dims in `mode`; subclasses set `dims` and `mode`."""

    dims = 1
    mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        name = type(self).__name__
        if isinstance(padding, int) and not isinstance(padding, bool):
            self.padding = (padding,) * (2 * self.dims)
        else:
            self.padding = ntuple(padding, 2 * self.dims, name, "padding")

    def forward(self, x: Any) -> Any:
        if self.mode != "constant":  # F.pad needs a (batch,) channel dim before the padded ones
            n = self.dims
            input_dims(type(self).__name__, x, (n + 1, n + 2), f"[C, {_SPACE[n]}] unbatched or "
                                                              f"[N, C, {_SPACE[n]}] batched")
        return _pad(x, list(self.padding), mode=self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    """Constant padding with `value` (negative pads crop, as F.pad's)."""

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = float(value)

    def forward(self, x: Any) -> Any:
        return _pad(x, list(self.padding), mode="constant", value=self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    dims = 1


class ConstantPad2d(_ConstantPadNd):
    dims = 2


class ConstantPad3d(_ConstantPadNd):
    dims = 3


class _ZeroPadNd(_ConstantPadNd):
    """Constant padding with zeros (repr as PyTorch's: the padding alone)."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    dims = 1


class ZeroPad2d(_ZeroPadNd):
    dims = 2


class ZeroPad3d(_ZeroPadNd):
    dims = 3


class ReflectionPad1d(_PadNd):
    """Mirror without repeating the edge (each pad smaller than the dim it pads)."""

    dims, mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    dims, mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    dims, mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Repeat the edge value."""

    dims, mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    dims, mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    dims, mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Wrap around (each pad at most the dim it pads)."""

    dims, mode = 1, "circular"


class CircularPad2d(_PadNd):
    dims, mode = 2, "circular"


class CircularPad3d(_PadNd):
    dims, mode = 3, "circular"
