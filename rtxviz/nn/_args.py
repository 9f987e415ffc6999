"""Argument checks the layers share: ints and tuples of ints as PyTorch's `_pair`/`_single`, each error naming
the module and the value it got.

>>> ntuple(3, 2, "Conv2d", "kernel_size")
(3, 3)
>>> ntuple([2, 1], 2, "Conv2d", "stride", minimum=1)
(2, 1)
"""

from __future__ import annotations

import operator
from typing import Any


def ntuple(value: Any, n: int, module: str, label: str, minimum: int | None = None) -> tuple[Any, ...]:
    """`value` (an int, or a sequence of n ints) as a tuple of n ints, each >= `minimum` when given (typed
    ``tuple[Any, ...]``: its length is `n`, which a checker cannot see, and the 2-d ops take pairs)."""
    if isinstance(value, bool):
        raise TypeError(f"{module}: {label} must be an int or a sequence of {n} ints, got {value!r}")
    try:
        out = (operator.index(value),) * n if not hasattr(value, "__len__") else tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{module}: {label} must be an int or a sequence of {n} ints, got {value!r}") from None
    if len(out) != n:
        raise ValueError(f"{module}: {label} must be an int or a sequence of {n} ints, got {value!r}")
    if minimum is not None and min(out) < minimum:
        raise ValueError(f"{module}: {label} must be >= {minimum}, got {value!r}")
    return out


def positive_int(value: Any, module: str, label: str, minimum: int = 1) -> int:
    """`value` as an int >= `minimum` (bools refused: True is not a size)."""
    if isinstance(value, bool):
        raise TypeError(f"{module}: {label} must be an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{module}: {label} must be an int, got {type(value).__name__} {value!r}") from None
    if v < minimum:
        raise ValueError(f"{module}: {label} must be >= {minimum}, got {v}")
    return v


def probability(value: Any, module: str, label: str = "p") -> float:
    p = float(value)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{module}: {label} must be between 0 and 1, got {value!r}")
    return p


def input_dims(module: str, x: Any, allowed: tuple[int, ...], layout: str) -> None:
    """Refuse an input whose number of dims is not in `allowed`, as PyTorch's "expected 2D or 3D input"."""
    nd = getattr(x, "ndim", None)
    if nd not in allowed:
        dims = " or ".join(f"{d}D" for d in allowed)
        raise ValueError(f"{module}: expected {dims} input ({layout}), got "
                         f"{'a ' + type(x).__name__ if nd is None else f'{nd}D input of shape {tuple(x.shape)}'}")
