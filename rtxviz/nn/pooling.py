"""Pooling: MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d (padding, ceil_mode, count_include_pad,
divisor_override), AdaptiveAvgPool1d/2d and AdaptiveMaxPool1d/2d, with PyTorch's arguments and defaults (the
stride defaults to the kernel size); each takes a batch or, as PyTorch's, one unbatched input ([C, L] or [C, H, W]).

>>> from rtxviz import Tensor
>>> MaxPool2d(2, ceil_mode=True)(Tensor.ones([1, 1, 5, 5])).shape
(1, 1, 3, 3)
>>> AdaptiveAvgPool2d((1, None))(Tensor.ones([2, 3, 4, 5])).shape
(2, 3, 1, 5)
>>> AvgPool1d(2)(Tensor.ones([3, 6])).shape  # unbatched [C, L]
(3, 3)
"""

from __future__ import annotations

from typing import Any

from ..engine.ops import nn as _F
from ..engine.ops import nn_pool as _pool
from . import functional as _Fn
from ._args import input_dims, ntuple
from .module import Module

_LAYOUTS_2D = "[C, H, W] unbatched or [N, C, H, W] batched"
_LAYOUTS_1D = "[C, L] unbatched or [N, C, L] batched"


class _Pool2d(Module):
    """Shared by the pooling layers: kernel, stride (default: the kernel) and padding, as PyTorch's."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 dilation: Any = 1) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = ntuple(kernel_size, 2, name, "kernel_size", 1)
        self.stride = self.kernel_size if stride is None else ntuple(stride, 2, name, "stride", 1)
        self.padding = ntuple(padding, 2, name, "padding", 0)
        self.dilation = ntuple(dilation, 2, name, "dilation", 1)
        effective = tuple(d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel_size, strict=True))
        if any(2 * p > k for p, k in zip(self.padding, effective, strict=True)):
            raise ValueError(f"{name}: padding {self.padding} must be at most half the (dilated) kernel size "
                             f"{effective}")
        self.ceil_mode = bool(ceil_mode)

    def _check(self, x: Any) -> None:
        input_dims(type(self).__name__, x, (3, 4), _LAYOUTS_2D)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class MaxPool2d(_Pool2d):
    """The maximum of each window (padding counts as -inf), over [N, C, H, W] or unbatched [C, H, W].

    >>> from rtxviz import Tensor
    >>> MaxPool2d(2)(Tensor.arange(16.0).reshape(1, 1, 4, 4)).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, dilation)
        if return_indices:
            raise ValueError("MaxPool2d: return_indices=True is not supported (the engine has no max_unpool2d "
                             "to use the indices with)")
        self.return_indices = False

    def forward(self, x: Any) -> Any:
        self._check(x)
        return _F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class AvgPool2d(_Pool2d):
    """The mean of each window, over [N, C, H, W] or unbatched [C, H, W]; zero padding counts unless
    count_include_pad is False.

    >>> from rtxviz import Tensor
    >>> AvgPool2d(2, padding=1, count_include_pad=False)(Tensor.ones([1, 1, 2, 2])).tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = bool(count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, x: Any) -> Any:
        self._check(x)
        return _F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                             self.divisor_override)


class _Pool1d(Module):
    """Shared by the 1-D pooling layers: kernel, stride (default: the kernel) and padding as ints (a sequence of
    one int is taken too, as PyTorch's), checked as the 2-D layers check theirs."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 dilation: Any = 1) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = ntuple(kernel_size, 1, name, "kernel_size", 1)[0]
        self.stride = self.kernel_size if stride is None else ntuple(stride, 1, name, "stride", 1)[0]
        self.padding = ntuple(padding, 1, name, "padding", 0)[0]
        self.dilation = ntuple(dilation, 1, name, "dilation", 1)[0]
        effective = self.dilation * (self.kernel_size - 1) + 1
        if 2 * self.padding > effective:
            raise ValueError(f"{name}: padding {self.padding} must be at most half the (dilated) kernel size "
                             f"{effective}")
        self.ceil_mode = bool(ceil_mode)

    def _check(self, x: Any) -> None:
        input_dims(type(self).__name__, x, (2, 3), _LAYOUTS_1D)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class MaxPool1d(_Pool1d):
    """The maximum of each window of kernel_size positions (padding counts as -inf), over [N, C, L] or unbatched
    [C, L].

    >>> from rtxviz import Tensor
    >>> MaxPool1d(2)(Tensor.from_slice([1.0, 5.0, 2.0, 4.0], [1, 4])).tolist()
    [[5.0, 4.0]]
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, dilation)
        if return_indices:
            raise ValueError("MaxPool1d: return_indices=True is not supported (the engine has no max_unpool1d "
                             "to use the indices with)")
        self.return_indices = False

    def forward(self, x: Any) -> Any:
        self._check(x)
        return _pool.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(_Pool1d):
    """The mean of each window of kernel_size positions, over [N, C, L] or unbatched [C, L]; zero padding counts
    unless count_include_pad is False."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x: Any) -> Any:
        self._check(x)
        return _pool.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad)


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size (an int, or a pair whose None entries keep the input's size),
    over [N, C, H, W] or [C, H, W]."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Any) -> Any:
        input_dims("AdaptiveAvgPool2d", x, (3, 4), "[N, C, H, W] or [C, H, W]")
        return _F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size!r}"


class _AdaptivePool(Module):
    """An adaptive pooling: `output_size` is kept as given (an int, or a tuple whose None entries keep the input's
    size), checked by the functional form on the first call."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size!r}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average pooling of [N, C, L] or [C, L] to a fixed length (window i: floor(i·L/n) .. ceil((i+1)·L/n) - 1).

    >>> from rtxviz import Tensor
    >>> AdaptiveAvgPool1d(2)(Tensor.arange(6.0).reshape(1, 1, 6)).tolist()
    [[[1.0, 4.0]]]
    """

    def forward(self, x: Any) -> Any:
        return _Fn.adaptive_avg_pool1d(x, self.output_size)


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__(output_size)
        if return_indices:
            raise ValueError(f"{type(self).__name__}: return_indices=True is not supported (the engine has no "
                             "max_unpool to use the indices with)")
        self.return_indices = False


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Max pooling of [N, C, L] or [C, L] to a fixed length, over PyTorch's adaptive windows."""

    def forward(self, x: Any) -> Any:
        return _Fn.adaptive_max_pool1d(x, self.output_size)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Max pooling of [N, C, H, W] or [C, H, W] to a fixed size, over PyTorch's adaptive windows (rows
    floor(i·H/oh) .. ceil((i+1)·H/oh) - 1, likewise columns).

    >>> from rtxviz import Tensor
    >>> AdaptiveMaxPool2d((2, 1))(Tensor.arange(12.0).reshape(1, 3, 4)).tolist()
    [[[7.0], [11.0]]]
    """

    def forward(self, x: Any) -> Any:
        return _Fn.adaptive_max_pool2d(x, self.output_size)
