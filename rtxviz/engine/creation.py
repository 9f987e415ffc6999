"""PyTorch's constructors at the top level: ``rtxviz.tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``linspace``,
``logspace``, ``eye``, ``randn``, ``rand``, ``randint``, ``randperm``, ``empty``, ``from_numpy`` and the ``*_like``
forms, with PyTorch's arguments (sizes as separate ints or one sequence, ``dtype=``, ``device=``,
``requires_grad=``). Random ones draw from rtxviz's seeded generator (`rtxviz.manual_seed`), on the CPU.

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

from . import random as _random
from .device import Device, as_device, to_device
from .dtypes import as_dtype, int64
from .tensor import Tensor
from .variable import Variable

__all__ = ["arange", "empty", "empty_like", "eye", "from_numpy", "full", "full_like", "linspace", "logspace", "ones",
           "ones_like", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "randperm", "tensor",
           "zeros", "zeros_like"]

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


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: DeviceLike = None,
             requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end, both included (torch.linspace): the default float dtype.

    >>> linspace(0, 1, 3).tolist()
    [0.0, 0.5, 1.0]
    """
    n = _count("linspace", "steps", steps)
    dev = as_device(device)
    dt = as_dtype(dtype, "linspace")
    values = np.linspace(float(start), float(end), n)  # in float64, then cast to the dtype
    return _out(Tensor._wrap(to_device(values.astype(dt), dev)), requires_grad)


def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype: Any = None,
             device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """base ** linspace(start, end, steps) (torch.logspace).

    >>> logspace(0, 2, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    n = _count("logspace", "steps", steps)
    values = np.float64(base) ** np.linspace(float(start), float(end), n)
    dt = as_dtype(dtype, "logspace")
    return _out(Tensor._wrap(to_device(values.astype(dt), as_device(device))), requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: DeviceLike = None,
        requires_grad: bool = False) -> Tensor:
    """The n x m matrix (m = n when not given) with ones on the diagonal (torch.eye).

    >>> eye(2, 3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    rows, cols = int(n), int(n if m is None else m)
    if rows < 0 or cols < 0:
        raise ValueError(f"eye: n and m must be non-negative, got n={rows}, m={cols}")
    dev = as_device(device)
    return _out(Tensor._wrap(dev.xp.eye(rows, cols, dtype=as_dtype(dtype, "eye"))), requires_grad)


def randn(*size: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples from rtxviz's seeded generator (`rtxviz.manual_seed`)."""
    return _out(Tensor.randn(_sizes(size), device, dtype), requires_grad)


def rand(*size: Any, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) from rtxviz's seeded generator."""
    return _out(Tensor.rand(_sizes(size), device, dtype), requires_grad)


def randint(*args: Any, size: Any = None, low: int | None = None, high: int | None = None, dtype: Any = None,
            device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from [low, high) (low 0 unless given), int64 unless `dtype` says otherwise, as
    torch.randint: ``randint(high, size)``, ``randint(low, high, size)`` or by keyword.

    >>> t = randint(3, 5, (4,))
    >>> t.dtype.name, all(3 <= v < 5 for v in t.tolist())
    ('int64', True)
    """
    pos = list(args)
    if size is None and pos and not isinstance(pos[-1], int | np.integer):
        size = pos.pop()  # the size is the last positional argument, a sequence
    low, high = _low_high("randint", "(high, size) or (low, high, size)", len(args), pos, low, high)
    if size is None:
        raise TypeError("randint: give the size, a tuple of ints (torch.randint(high, size))")
    return _draw_ints("randint", low, high, _sizes((size,)), int64 if dtype is None else dtype, device,
                      requires_grad)


def _low_high(where: str, forms: str, given: int, pos: list, low: Any, high: Any) -> tuple[Any, Any]:
    """torch's (high) and (low, high) positional forms of randint and randint_like, beside their keywords: the
    bounds [low, high), low 0 unless given. `given` counts the positional arguments the caller took."""
    if len(pos) == 2:
        low, high = pos
    elif len(pos) == 1:
        if high is None:
            high = pos[0]
        else:
            low = pos[0]
    elif pos:
        raise TypeError(f"{where}: expected {forms}, got {given} positional arguments")
    if high is None:
        raise TypeError(f"{where}: give high (torch.{where}({forms.split(' or ')[0][1:-1]}))")
    return 0 if low is None else low, high


def _draw_ints(where: str, low: Any, high: Any, shape: tuple[int, ...], dtype: Any, device: DeviceLike,
               requires_grad: bool) -> Tensor:
    """Integers from [low, high) of `shape`, drawn on the CPU by the seeded generator, then cast and moved."""
    low, high = int(low), int(high)
    if low >= high:
        raise ValueError(f"{where}: low ({low}) must be less than high ({high})")
    values = _random.generator().integers(low, high, shape, dtype=np.int64)
    return _out(Tensor._wrap(to_device(values.astype(as_dtype(dtype, where)), as_device(device))), requires_grad)


def randperm(n: int, *, dtype: Any = None, device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 (torch.randperm), int64 unless `dtype` says otherwise.

    >>> sorted(randperm(4).tolist())
    [0, 1, 2, 3]
    """
    count = _count("randperm", "n", n)
    values = _random.generator().permutation(count)
    dt = as_dtype(int64 if dtype is None else dtype, "randperm")
    return _out(Tensor._wrap(to_device(values.astype(dt), as_device(device))), requires_grad)


def _count(where: str, name: str, value: Any) -> int:
    count = int(value)
    if count < 0:
        raise ValueError(f"{where}: {name} must be non-negative, got {count}")
    return count


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


def randint_like(x: Tensor, *args: Any, low: int | None = None, high: int | None = None, dtype: Any = None,
                 device: DeviceLike = None, requires_grad: bool = False) -> Tensor:
    """Integers from [low, high) in a tensor of x's shape, dtype and device (torch.randint_like(x, high) or
    (x, low, high))."""
    low, high = _low_high("randint_like", "(x, high) or (x, low, high)", len(args) + 1, list(args), low, high)
    return _draw_ints("randint_like", low, high, x.shape, dtype if dtype is not None else x.dtype,
                      device if device is not None else x.device, requires_grad)


def as_tensor(data: Any, dtype: Any = None, device: DeviceLike = None) -> Tensor:
    """`data` as a Tensor without a copy where one is not needed (torch.as_tensor): a Tensor of that dtype and
    device is returned as is, a CPU numpy array of a supported dtype shares its memory; anything else is copied.

    >>> a = np.zeros(2, dtype=np.float32)
    >>> as_tensor(a).numpy() is a or np.shares_memory(as_tensor(a).numpy(), a)
    True
    """
    if isinstance(data, Tensor):
        return data.to(device, dtype)
    if isinstance(data, np.ndarray) and (dtype is None or as_dtype(dtype, "as_tensor") == data.dtype) \
            and (device is None or as_device(device) == Device.cpu()) and data.dtype in _SHAREABLE:
        return Tensor.from_numpy(data, device="cpu")
    if dtype is not None:
        as_dtype(dtype, "as_tensor")  # an unsupported dtype is refused naming this function
    return Tensor(data, dtype=dtype, device=device)


_SHAREABLE = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_))


def is_tensor(obj: Any) -> bool:
    """Whether `obj` is a Tensor (a Variable or a Parameter counts), as torch.is_tensor."""
    return isinstance(obj, Tensor)


def numel(x: Tensor) -> int:
    """The number of elements of `x` (torch.numel)."""
    return x.numel()


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Tensor:
    """Category indices drawn with probabilities proportional to the rows of `input` ([K] or [N, K] non-negative
    weights, not necessarily normalised), as torch.multinomial: int64, [num_samples] or [N, num_samples].
    Without `replacement` each index appears at most once per row. Drawn on the CPU by the seeded generator
    (`manual_seed`, or the numpy Generator passed as `generator`) and moved to the input's device.

    >>> multinomial(tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
    [1, 1]
    """
    if input.ndim not in (1, 2):
        raise ValueError(f"multinomial: input must be 1D or 2D (weights [K] or [N, K]), got shape {input.shape}")
    n = int(num_samples)
    if n <= 0:
        raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}")
    weights = np.atleast_2d(input.numpy()).astype(np.float64)
    k = weights.shape[1]
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("multinomial: weights must be finite and non-negative (got inf, nan or a negative value)")
    totals = weights.sum(axis=1)
    if (totals <= 0).any():
        raise ValueError(f"multinomial: every row needs a positive weight, got all zeros in row "
                         f"{int(np.flatnonzero(totals <= 0)[0])}")
    if not replacement and n > int((weights > 0).sum(axis=1).min()):
        raise ValueError(f"multinomial: cannot draw {n} samples without replacement from a row with only "
                         f"{int((weights > 0).sum(axis=1).min())} positive weight(s) of {k}")
    rng = _random.generator() if generator is None else generator
    rows = [rng.choice(k, size=n, replace=replacement, p=w / w.sum()) for w in weights]
    out = np.stack(rows).astype(np.int64)
    return Tensor._wrap(to_device(out if input.ndim == 2 else out[0], input.device))
