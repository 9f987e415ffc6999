"""Layers: Linear, Conv2d, pooling, LayerNorm, Embedding, Dropout, activations, Sequential, Flatten.

Weights are laid out as PyTorch's (Linear [out, in], Conv2d [out, in, kh, kw]) and initialised as PyTorch does
by default (Kaiming-uniform with a = sqrt(5), bias U(±1/sqrt(fan_in))), from rtxviz's seeded generator, so a
PyTorch state dict loads as is. The ops come from `rtxviz.engine.ops.nn` (looked up at call time).

>>> from rtxviz import Tensor, manual_seed
>>> manual_seed(0)
>>> net = Sequential(Linear(4, 8), ReLU(), Linear(8, 3))
>>> net(Tensor.ones([5, 4])).shape
(5, 3)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..engine import dtypes as _dtypes
from ..engine.errors import ShapeError
from ..engine.ops import nn as _F
from ..engine.ops.linalg import linear as _linear
from ..engine.tensor import Tensor
from . import init
from .module import Module, Parameter


def _empty(shape: Sequence[int], device: Any, dtype: Any) -> Parameter:
    return Parameter(Tensor.zeros(list(shape), device=device, dtype=dtype))


def _pair(v: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    t = tuple(int(x) for x in v)
    if len(t) != 2:
        raise ValueError(f"{name}: expected an int or a pair of ints, got {v!r}")
    return t


class Identity(Module):
    def forward(self, x: Any) -> Any:
        return x


class Linear(Module):
    """y = x @ Wᵀ + b, W [out_features, in_features].

    >>> from rtxviz import Tensor
    >>> Linear(3, 2)(Tensor.ones([4, 3])).shape
    (4, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = _empty((out_features, in_features), device, dtype)
        if bias:
            self.bias = _empty((out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            init.default_bias_(self.bias, self.in_features)

    def forward(self, x: Any) -> Any:
        if x.shape[-1] != self.in_features:
            raise ShapeError(f"Linear({self.in_features}, {self.out_features}): input has {x.shape[-1]} features "
                             f"in its last dim (input shape {tuple(x.shape)})")
        return _linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(Module):
    """2-D convolution over [N, C, H, W] (cross-correlation, as PyTorch), weight [out, in, kh, kw].

    >>> Conv2d(1, 4, 3, padding=1).weight.shape
    (4, 1, 3, 3)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], stride: Any = 1,
                 padding: Any = 0, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "Conv2d kernel_size")
        self.stride = _pair(stride, "Conv2d stride")
        self.padding = _pair(padding, "Conv2d padding")
        self.weight = _empty((out_channels, in_channels, *self.kernel_size), device, dtype)
        if bias:
            self.bias = _empty((out_channels,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init.calculate_fan_in_and_fan_out(self.weight)
            init.default_bias_(self.bias, fan_in)

    def forward(self, x: Any) -> Any:
        return _F.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class _Pool2d(Module):
    """Shared by the pooling layers: kernel, stride (default: the kernel) and padding, as PyTorch's."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _pair(kernel_size, f"{name} kernel_size")
        self.stride = self.kernel_size if stride is None else _pair(stride, f"{name} stride")
        self.padding = _pair(padding, f"{name} padding")

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool2d):
    def forward(self, x: Any) -> Any:
        return _F.max_pool2d(x, self.kernel_size, stride=self.stride, padding=self.padding)


class AvgPool2d(_Pool2d):
    def forward(self, x: Any) -> Any:
        return _F.avg_pool2d(x, self.kernel_size, stride=self.stride, padding=self.padding)


class LayerNorm(Module):
    """Normalise over the last dims `normalized_shape`, then scale and shift (weight 1, bias 0 at start)."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, float(eps)
        if elementwise_affine:
            self.weight = Parameter(Tensor.ones(list(shape), device=device, dtype=dtype))
            self.bias = Parameter(Tensor.zeros(list(shape), device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        return _F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


class Embedding(Module):
    """A lookup table [num_embeddings, embedding_dim], N(0, 1) at start; input: int64 indices."""

    def __init__(self, num_embeddings: int, embedding_dim: int, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.weight = _empty((num_embeddings, embedding_dim), device, dtype)
        init.normal_(self.weight)

    def forward(self, indices: Any) -> Any:
        if not isinstance(indices, Tensor):
            indices = Tensor(indices, dtype=_dtypes.int64, device=self.weight.device)
        return _F.embedding(indices, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zero each element with probability p and scale the rest by 1/(1-p) while training; identity in eval."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, x: Any) -> Any:
        if not self.training or self.p == 0.0:
            return x
        return _F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class ReLU(Module):
    def forward(self, x: Any) -> Any:
        return x.relu()


class Tanh(Module):
    def forward(self, x: Any) -> Any:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Any) -> Any:
        return x.sigmoid()


class GELU(Module):
    """GELU, exact (erf) by default; approximate="tanh" for the tanh form."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Any) -> Any:
        return x.gelu(approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Flatten(Module):
    """Flatten dims start_dim..end_dim into one (by default everything but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Any) -> Any:
        nd = x.ndim
        s = self.start_dim + nd if self.start_dim < 0 else self.start_dim
        e = self.end_dim + nd if self.end_dim < 0 else self.end_dim
        if not 0 <= s <= e < nd:
            raise ShapeError(f"Flatten: dims {self.start_dim}..{self.end_dim} do not fit input shape {x.shape}")
        shape = x.shape
        return x.reshape((*shape[:s], -1, *shape[e + 1:]))


class Sequential(Module):
    """Modules applied in order; children are named "0", "1", ... (paths `model.0`, `model.1`, ...).

    >>> len(Sequential(Linear(2, 2), ReLU()))
    2
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        if len(modules) == 1 and not isinstance(modules[0], Module) and isinstance(modules[0], Iterable):
            modules = tuple(modules[0])
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self._modules)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return self.children()

    def __getitem__(self, idx: int | str | slice) -> Any:
        mods = list(self.children())
        if isinstance(idx, slice):
            return Sequential(*mods[idx])
        if isinstance(idx, str):
            return self._modules[idx]
        return mods[idx]

    def forward(self, x: Any) -> Any:
        for m in self.children():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules registered as children "0", "1", ... (no forward of its own)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return self.children()

    def __getitem__(self, idx: int) -> Module:
        return list(self.children())[idx]
