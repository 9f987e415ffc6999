"""PyTorch's constructors at the top level: ``rtxviz.tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``randn``,
``rand``, ``empty``, ``from_numpy`` and the ``*_like`` forms, with PyTorch's arguments (sizes as separate ints or
one sequence, ``dtype=``, ``device=``, ``requires_grad=``).

A tensor that requires grad is a leaf `Variable`; otherwise a plain `Tensor` (it records no graph of its own).

>>> import rtxviz
>>> x = rtxviz.tensor([1.0, 2.0], requires_grad=True)
>>> type(x).__name__, rtxviz.zeros(2, 3).shape, rtxviz.ones_like(x).dtype.name
('Variable', (2, 3), 'float32')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .device import Device
from .tensor import Tensor
from .variable import Variable

__all__ = ["arange", "empty", "empty_like", "from_numpy", "full", "full_like", "ones", "ones_like", "rand",
           "rand_like", "randn", "randn_like", "tensor", "zeros", "zeros_like"]

DeviceLike = Device | str | None


def _sizes(size: tuple) -> tuple[int, ...]:
    """``zeros(2, 3)`` and ``zeros((2, 3))`` / ``zeros([2, 3])`` alike."""
    if len(size) == 1 and isinstance(size[0], Sequence | np.ndarray) and not isinstance(size[0], str):
        return tuple(int(s) for s in size[0])
    return tuple(int(s) for s in size)


def _out(t: Tensor, requires_grad: bool) -> Tensor:
    return Variable.from_tensor(t, requires_grad=True) if requires_grad else t


def tensor(data: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """A tensor holding a copy of `data` (numbers, nested lists, a numpy array, a Tensor): torch.tensor."""
    src = data.data if isinstance(data, Tensor) else data
    copied = src.copy() if hasattr(src, "copy") and not isinstance(src, list | tuple) else src
    return _out(Tensor(copied, dtype=dtype, device=device), requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A Tensor sharing `array`'s memory (torch.from_numpy): on the CPU whatever the default device is."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy array, got {type(array).__name__}")
    return Tensor.from_numpy(array, device="cpu")


def zeros(*size: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    return _out(Tensor.zeros(_sizes(size), device, dtype), requires_grad)


def ones(*size: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    return _out(Tensor.ones(_sizes(size), device, dtype), requires_grad)


def empty(*size: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """Zeros, in fact (an uninitialised tensor is no help when learning)."""
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def full(size: Sequence[int], fill_value: float, dtype: Any = None, device: DeviceLike = None,
         requires_grad: bool = False) -> Tensor:
    return _out(Tensor.full(_sizes((size,)), fill_value, device, dtype), requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None, device: DeviceLike = None,
           requires_grad: bool = False) -> Tensor:
    """Values from start (0 when only one bound is given) up to end, by step: int64 for int bounds."""
    return _out(Tensor.arange(start, end, step, device, dtype), requires_grad)


def randn(*size: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples from rtxviz's seeded generator (`rtxviz.manual_seed`)."""
    return _out(Tensor.randn(_sizes(size), device, dtype), requires_grad)


def rand(*size: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) from rtxviz's seeded generator."""
    return _out(Tensor.rand(_sizes(size), device, dtype), requires_grad)


def _like(fn: Any, x: Tensor, dtype: Any, device: DeviceLike, requires_grad: bool, *args: Any) -> Tensor:
    return fn(x.shape, *args, dtype=dtype if dtype is not None else x.dtype,
              device=device if device is not None else x.device, requires_grad=requires_grad)


def zeros_like(x: Tensor, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    return _like(zeros, x, dtype, device, requires_grad)


def ones_like(x: Tensor, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    return _like(ones, x, dtype, device, requires_grad)


def empty_like(x: Tensor, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    return _like(zeros, x, dtype, device, requires_grad)


def full_like(x: Tensor, fill_value: float, dtype: Any = None, device: DeviceLike = None,
              requires_grad: bool = False) -> Tensor:
    return full(x.shape, fill_value, dtype=dtype if dtype is not None else x.dtype,
                device=device if device is not None else x.device, requires_grad=requires_grad)


def randn_like(x: Tensor, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    return _like(randn, x, dtype, device, requires_grad)


def rand_like(x: Tensor, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    return _like(rand, x, dtype, device, requires_grad)
