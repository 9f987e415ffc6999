"""Upsampling: Upsample (F.interpolate as a module, PyTorch's arguments, defaults and repr), and PyTorch's two
fixed-mode shorthands UpsamplingNearest2d and UpsamplingBilinear2d (align_corners=True). No parameters, no
state: the state dict is empty.

>>> from rtxviz import Tensor
>>> Upsample(scale_factor=2)(Tensor.ones([1, 3, 4, 4])).shape
(1, 3, 8, 8)
>>> Upsample(size=(3, 5), mode="bilinear", align_corners=True)
Upsample(size=(3, 5), mode='bilinear')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..engine.ops.nn_upsample import MODES, interpolate
from .module import Module


class Upsample(Module):
    """Resize [N, C, *space] to `size` or by `scale_factor` (one of the two) with F.interpolate's `mode`
    ("nearest", the default; "nearest-exact", "linear", "bilinear", "trilinear", "area") and `align_corners`.

    >>> from rtxviz import Tensor
    >>> Upsample(scale_factor=2, mode="linear")(Tensor.from_slice([0.0, 4.0], [1, 1, 2])).tolist()
    [[[0.0, 1.0, 3.0, 4.0]]]
    """

    def __init__(self, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None,
                 mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        if mode not in MODES:
            raise ValueError(f"{name}: mode must be one of {tuple(MODES)}, got {mode!r}")
        if size is None and scale_factor is None:
            raise ValueError(f"{name}: either size or scale_factor should be defined")
        if size is not None and scale_factor is not None:
            raise ValueError(f"{name}: only one of size or scale_factor should be defined, got size={size!r} and "
                             f"scale_factor={scale_factor!r}")
        self.size = tuple(size) if isinstance(size, Sequence) else size
        # as PyTorch's: scale factors kept as floats (a falsy 0 stays None, and F.interpolate then refuses it)
        if isinstance(scale_factor, Sequence):
            self.scale_factor: Any = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Any) -> Any:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest" over [N, C, H, W] (PyTorch's shorthand).

    >>> from rtxviz import Tensor
    >>> UpsamplingNearest2d(scale_factor=2)(Tensor.ones([1, 1, 2, 3])).shape
    (1, 1, 4, 6)
    """

    def __init__(self, size: int | Sequence[int] | None = None,
                 scale_factor: float | Sequence[float] | None = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True over [N, C, H, W] (PyTorch's shorthand).

    >>> from rtxviz import Tensor
    >>> UpsamplingBilinear2d(size=(1, 3))(Tensor.from_slice([0.0, 2.0], [1, 1, 1, 2])).tolist()
    [[[[0.0, 1.0, 2.0]]]]
    """

    def __init__(self, size: int | Sequence[int] | None = None,
                 scale_factor: float | Sequence[float] | None = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
