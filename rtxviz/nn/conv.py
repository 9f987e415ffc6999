"""Convolutions: Conv1d, Conv2d and ConvTranspose2d, with PyTorch's arguments (stride, padding as ints, tuples
or "same"/"valid", dilation, groups, bias, padding_mode), weight layouts ([out, in/groups, *k]; transposed:
[in, out/groups, *k]) and default initialisation (Kaiming-uniform with a = sqrt(5), bias U(±1/sqrt(fan_in))).

>>> from rtxviz import Tensor
>>> Conv2d(1, 4, 3, padding="same")(Tensor.ones([2, 1, 5, 5])).shape
(2, 4, 5, 5)
>>> Conv1d(2, 4, 3, stride=2)(Tensor.ones([1, 2, 9])).shape
(1, 4, 4)
"""

from __future__ import annotations

import math
from typing import Any

from ..engine.errors import ShapeError
from ..engine.ops import nn as _F
from ..engine.ops.shape import pad as _pad
from ..engine.ops.shape import squeeze as _squeeze
from ..engine.ops.shape import unsqueeze as _unsqueeze
from . import init
from ._args import input_dims, ntuple, positive_int
from .linear import empty_parameter
from .module import Module

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What the convolutions share: argument checks, parameters, initialisation and the padding of the input."""

    _nd = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any, groups: int, bias: bool, padding_mode: str, device: Any, dtype: Any,
                 output_padding: Any = 0) -> None:
        super().__init__()
        name, nd = type(self).__name__, self._nd
        self.in_channels = positive_int(in_channels, name, "in_channels")
        self.out_channels = positive_int(out_channels, name, "out_channels")
        self.groups = positive_int(groups, name, "groups")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"{name}: groups={self.groups} must divide in_channels={self.in_channels} and "
                             f"out_channels={self.out_channels}")
        self.kernel_size = ntuple(kernel_size, nd, name, "kernel_size", 1)
        self.stride = ntuple(stride, nd, name, "stride", 1)
        self.dilation = ntuple(dilation, nd, name, "dilation", 1)
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {PADDING_MODES}, got {padding_mode!r}")
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("same", "valid") or self._transposed:
                allowed = "an int or a tuple" if self._transposed else "an int, a tuple, 'same' or 'valid'"
                raise ValueError(f"{name}: padding must be {allowed}, got {padding!r}")
            if padding == "same" and self.stride != (1,) * nd:
                raise ValueError(f"{name}: padding='same' needs stride 1, got stride {self.stride}")
            self.padding: tuple[Any, ...] | str = padding
            # "same": d·(k - 1) in total per dim, the odd one on the right (end), as PyTorch
            totals = [0 if padding == "valid" else d * (k - 1) for d, k in zip(self.dilation, self.kernel_size,
                                                                                strict=True)]
            self._sides = [(t // 2, t - t // 2) for t in totals]
        else:
            self.padding = ntuple(padding, nd, name, "padding", 0)
            self._sides = [(p, p) for p in self.padding]
        if self._transposed:
            if padding_mode != "zeros":
                raise ValueError(f"{name}: only padding_mode='zeros' is supported, got {padding_mode!r}")
            self.output_padding = ntuple(output_padding, nd, name, "output_padding", 0)
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        self.weight = empty_parameter(shape, device, dtype)
        if bias:
            self.bias = empty_parameter((self.out_channels,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init.calculate_fan_in_and_fan_out(self.weight)
            init.default_bias_(self.bias, fan_in)

    def _batched_input(self, x: Any) -> tuple[Any, bool]:
        """(x as a batch, whether it was one): an unbatched input [C, *space] is run as a batch of one, as
        PyTorch's (an unsqueeze here, a squeeze of the output in forward: ops, so the graph and gradients are
        the batched ones); other ranks and a wrong channel count are refused naming the module and the shape."""
        name, nd = type(self).__name__, self._nd
        space = "L" if nd == 1 else "H, W"
        input_dims(name, x, (nd + 1, nd + 2), f"[C, {space}] unbatched or [N, C, {space}] batched")
        channels = x.shape[-nd - 1]
        if channels != self.in_channels:
            raise ShapeError(f"{name}({self.in_channels}, {self.out_channels}): input has {channels} channels "
                             f"(input shape {tuple(x.shape)}), expected {self.in_channels}")
        if x.ndim == nd + 2:
            return x, True
        return _unsqueeze(x, 0), False

    def _padded(self, x: Any) -> tuple[Any, tuple[Any, ...]]:
        """(input, padding for the op): asymmetric "same" padding and the non-zero padding modes pad the input
        first (F.pad, last dim first) and convolve it unpadded, as PyTorch does."""
        symmetric = all(a == b for a, b in self._sides)
        if self.padding_mode == "zeros" and symmetric:
            return x, tuple(a for a, _ in self._sides)
        pads = [p for side in reversed(self._sides) for p in side]
        if self.padding_mode == "zeros":
            return _pad(x, pads), (0,) * self._nd
        return _pad(x, pads, mode=self.padding_mode), (0,) * self._nd

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding!r}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self._transposed and self.output_padding != (0,) * self._nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over [N, C, L] or unbatched [C, L] (cross-correlation, as PyTorch), weight
    [out, in/groups, k].

    >>> Conv1d(4, 6, 3, groups=2).weight.shape
    (6, 2, 3)
    """

    _nd = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, x: Any) -> Any:
        x, batched = self._batched_input(x)
        x, padding = self._padded(x)
        out = _F.conv1d(x, self.weight, self.bias, self.stride[0], padding[0], self.dilation[0], self.groups)
        return out if batched else _squeeze(out, 0)


class Conv2d(_ConvNd):
    """2-D convolution over [N, C, H, W] or unbatched [C, H, W] (cross-correlation, as PyTorch), weight
    [out, in/groups, kh, kw].

    >>> Conv2d(1, 4, 3, padding=1).weight.shape
    (4, 1, 3, 3)
    >>> from rtxviz import Tensor
    >>> Conv2d(2, 4, 3, padding=1, padding_mode="reflect")(Tensor.ones([2, 5, 5])).shape  # unbatched
    (4, 5, 5)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, x: Any) -> Any:
        x, batched = self._batched_input(x)
        x, padding = self._padded(x)
        out = _F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)
        return out if batched else _squeeze(out, 0)


class ConvTranspose2d(_ConvNd):
    """The transposed 2-D convolution (the gradient of Conv2d in its input), weight [in, out/groups, kh, kw],
    over [N, in, H, W] or unbatched [in, H, W]. The output is
    [N, out, (H - 1)·stride - 2·padding + dilation·(kh - 1) + output_padding + 1, ...]; forward's `output_size`
    picks output_padding to reach a given size, as PyTorch's.

    >>> from rtxviz import Tensor
    >>> ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)(Tensor.ones([1, 2, 4, 4])).shape
    (1, 3, 8, 8)
    >>> ConvTranspose2d(2, 3, 3, stride=2, padding=1)(Tensor.ones([1, 2, 4, 4]), output_size=[8, 8]).shape
    (1, 3, 8, 8)
    """

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding=output_padding)

    def _output_padding(self, x: Any, output_size: Any) -> tuple[Any, ...]:
        if output_size is None:
            return self.output_padding
        size = tuple(int(s) for s in output_size)[-2:]
        if len(size) != 2:
            raise ValueError(f"ConvTranspose2d: output_size must name 2 spatial sizes, got {output_size!r}")
        out = []
        for i in range(2):
            smallest = ((x.shape[2 + i] - 1) * self.stride[i] - 2 * self._pads()[i]
                        + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            extra = size[i] - smallest
            if not 0 <= extra < max(self.stride[i], self.dilation[i]):
                raise ValueError(f"ConvTranspose2d: requested output_size {size} is not reachable from input "
                                 f"{tuple(x.shape)}: dim {i} must be in [{smallest}, "
                                 f"{smallest + max(self.stride[i], self.dilation[i]) - 1}]")
            out.append(extra)
        return tuple(out)

    def _pads(self) -> tuple[Any, ...]:
        """The padding as numbers (a transposed convolution refuses 'same' and 'valid' at construction)."""
        assert not isinstance(self.padding, str)
        return self.padding

    def forward(self, x: Any, output_size: Any = None) -> Any:
        x, batched = self._batched_input(x)
        out = _F.conv_transpose2d(x, self.weight, self.bias, self.stride, self._pads(),
                                  self._output_padding(x, output_size), self.groups, self.dilation)
        return out if batched else _squeeze(out, 0)
