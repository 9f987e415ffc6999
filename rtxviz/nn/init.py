"""Seeded parameter initialisation (Kaiming/He, Xavier/Glorot, orthogonal, truncated normal, identities), drawn
from rtxviz's generator.

Draws happen on the CPU from `rtxviz.engine.random.generator()` (so `rtxviz.manual_seed` makes them
reproducible on every device) and are written into the parameter in place, keeping its device and dtype.
The formulas are PyTorch's (torch.nn.init).

>>> from rtxviz import manual_seed
>>> from rtxviz.nn import Parameter
>>> from rtxviz import Tensor
>>> manual_seed(0)
>>> w = kaiming_uniform_(Parameter(Tensor.zeros([4, 3])), a=5 ** 0.5)
>>> bool(abs(w.numpy()).max() <= 3 ** -0.5)
True
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np

from ..engine import random as _random
from ..engine.errors import ShapeError
from ..engine.tensor import Tensor


def calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight laid out as PyTorch's: [out, in, *kernel]."""
    shape = tensor.shape
    if len(shape) < 2:
        raise ShapeError(f"init: fan in and fan out need a tensor with at least 2 dims, got shape {shape}")
    receptive = 1
    for s in shape[2:]:
        receptive *= s
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (as torch.nn.init.calculate_gain)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    """Write CPU-drawn values into `tensor` in place, on its device and in its dtype."""
    tensor.data[...] = Tensor._wrap(values.astype(tensor.data.dtype, copy=False)).to(tensor.device).data
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    return _fill(tensor, _random.generator().uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    return _fill(tensor, _random.generator().normal(mean, std, tensor.shape))


def zeros_(tensor: Tensor) -> Tensor:
    tensor.data[...] = 0
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    tensor.data[...] = 1
    return tensor


def constant_(tensor: Tensor, value: float) -> Tensor:
    tensor.data[...] = value
    return tensor


def _fan(tensor: Tensor, mode: str) -> int:
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"init: mode must be 'fan_in' or 'fan_out', got {mode!r}")


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu") -> Tensor:
    """U(-bound, bound), bound = gain · sqrt(3 / fan). With a = sqrt(5) this is PyTorch's Linear/Conv default."""
    gain = calculate_gain(nonlinearity, a)
    bound = gain * math.sqrt(3.0 / _fan(tensor, mode))
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu") -> Tensor:
    """N(0, std²), std = gain / sqrt(fan)."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """U(-a, a), a = gain · sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """N(0, std²), std = gain · sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> Tensor:
    """N(mean, std²) restricted to [a, b] (absolute bounds, as PyTorch's): values outside are drawn again.
    Where [a, b] keeps little of the distribution, the inverse CDF of a uniform draw is used instead."""
    if not a < b:
        raise ValueError(f"trunc_normal_: a ({a}) must be smaller than b ({b})")
    if not std > 0:
        raise ValueError(f"trunc_normal_: std must be > 0, got {std}")
    dist = NormalDist(mean, std)
    lo, hi = dist.cdf(a), dist.cdf(b)
    gen = _random.generator()
    n = int(np.prod(tensor.shape))
    if hi - lo >= 0.05:  # rejection: at most 20 draws per value on average
        out = gen.normal(mean, std, n)
        bad = (out < a) | (out > b)
        while bad.any():
            out[bad] = gen.normal(mean, std, int(bad.sum()))
            bad = (out < a) | (out > b)
    else:  # far in a tail: invert the CDF (clipped, as rounding can step just past a bound)
        u = gen.uniform(lo, hi, n)
        out = np.clip(np.array([dist.inv_cdf(min(max(v, 1e-300), 1 - 1e-16)) for v in u]), a, b)
    return _fill(tensor, out.reshape(tensor.shape))


def orthogonal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix (PyTorch's: QR of a normal draw, Q's signs fixed by R's diagonal), scaled by
    `gain`; dims after the first are flattened, so rows are orthonormal when rows <= columns, columns otherwise.
    """
    if tensor.ndim < 2:
        raise ShapeError(f"orthogonal_: needs a tensor with at least 2 dims, got shape {tensor.shape}")
    rows = tensor.shape[0]
    cols = int(np.prod(tensor.shape[1:]))
    if rows == 0 or cols == 0:
        return tensor
    flat = _random.generator().normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tensor.shape))


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (ones on the diagonal of a 2-D tensor, also when it is not square)."""
    if tensor.ndim != 2:
        raise ShapeError(f"eye_: only 2-dim tensors are supported, got shape {tensor.shape}")
    rows, cols = tensor.shape
    return _fill(tensor, np.eye(rows, cols))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """A convolution weight [out, in, *kernel] (3, 4 or 5 dims) that passes its input through: in each of
    `groups` blocks of out/groups output channels, channel d takes input channel d at the kernel's centre."""
    if tensor.ndim not in (3, 4, 5):
        raise ShapeError(f"dirac_: only tensors with 3, 4 or 5 dims are supported, got shape {tensor.shape}")
    out_channels = tensor.shape[0]
    if groups < 1 or out_channels % groups:
        raise ValueError(f"dirac_: dim 0 ({out_channels}) must be divisible by groups ({groups})")
    per_group = out_channels // groups
    values = np.zeros(tensor.shape)
    centre = tuple(k // 2 for k in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, tensor.shape[1])):
            values[(g * per_group + d, d, *centre)] = 1.0
    return _fill(tensor, values)


def default_bias_(bias: Any, fan_in: int) -> Any:
    """PyTorch's Linear/Conv bias default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return uniform_(bias, -bound, bound)
