"""Similarity, distance and normalisation along a dim: cosine_similarity, pairwise_distance and normalize, as
PyTorch's F.cosine_similarity, F.pairwise_distance and F.normalize.

Each is composed of elementwise ops and reductions (square, sum, sqrt, div, ...), so the graph shows its
primitives and every derivative, to any order, comes from those ops. Their p-norms are written with ops too:
Σ|x| for p = 1, √Σx² for p = 2, max |x| for p = inf, (Σ|x|^p)^(1/p) otherwise. Where PyTorch clamps a norm below
at eps, the clamp is applied to the sum of powers (at eps^p) before the root when p > 0: the same value, and a
zero vector gets a zero gradient instead of 0·∞.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..device import xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from ._base import constant, implements, norm_dim
from .arithmetic import add_scalar, div, mask_mul, mul, pow_scalar, sub
from .broadcast import expand
from .reduction import max as _max
from .reduction import min as _min
from .reduction import sum as _sum
from .unary import abs as _abs
from .unary import clamp, sqrt, square

__all__ = ["cosine_similarity", "normalize", "pairwise_distance"]


def _check_float(op: str, label: str, x: Any) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {label} must be a Tensor or Variable, got {type(x).__name__}")
    if not is_float(x.data.dtype):
        raise DTypeError(f"{op}: {label} must be float32 or float64, got dtype {x.data.dtype} (shape {x.shape})")


def _broadcast(op: str, x1: Tensor, x2: Tensor) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(x1.shape, x2.shape))
    except ValueError:
        raise ShapeError(f"{op}: x1 shape {x1.shape} and x2 shape {x2.shape} do not broadcast") from None


def _order(op: str, p: Any) -> float:
    if isinstance(p, str) and p.lower() in ("inf", "-inf"):
        return math.inf if p.lower() == "inf" else -math.inf
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: p must be a number (or inf), got {p!r}") from None
    if math.isnan(p):
        raise ValueError(f"{op}: p must be a number, got nan")
    return p


def _pnorm(x: Any, p: float, dim: int, keepdim: bool, floor: float | None = None) -> Any:
    """||x||_p over `dim` (max(||x||_p, floor) when floor is given), in ops."""
    if p == 2.0:
        s = _sum(square(x), dim, keepdim)
        return sqrt(s if floor is None else clamp(s, min=floor * floor))
    a = _abs(x)
    if p == 1.0:
        n = _sum(a, dim, keepdim)
    elif p == math.inf:
        n = _max(a, dim, keepdim).values
    elif p == -math.inf:
        n = _min(a, dim, keepdim).values
    elif p == 0.0:  # the number of nonzero elements: no gradient, as in PyTorch
        ones = constant(xp_of(x.data).ones(x.shape, dtype=x.data.dtype))  # data-independent
        n = _sum(mask_mul(ones, (x,), "sel_nonzero"), dim, keepdim)
    else:
        s = _sum(pow_scalar(a, p), dim, keepdim)
        fp = floor**p if floor is not None and p > 0 else 0.0
        if fp > 0.0 and math.isfinite(fp):
            return pow_scalar(clamp(s, min=fp), 1.0 / p)
        n = pow_scalar(s, 1.0 / p)
    return n if floor is None else clamp(n, min=floor)


@implements("cosine_similarity")
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Any:
    """The cosine of the angle between x1 and x2 along `dim`, after broadcasting: Σ (x1/|x1|)·(x2/|x2|), each
    norm clamped below at `eps`, as PyTorch's F.cosine_similarity. Both arguments are differentiated.

    >>> from rtxviz import Tensor
    >>> a = Tensor.from_slice([1.0, 0.0, 1.0, 1.0], [2, 2], dtype="float64")
    >>> b = Tensor.from_slice([1.0, 1.0, -1.0, -1.0], [2, 2], dtype="float64")
    >>> [round(v, 4) for v in cosine_similarity(a, b).tolist()]
    [0.7071, -1.0]
    """
    op = "cosine_similarity"
    _check_float(op, "x1", x1)
    _check_float(op, "x2", x2)
    shape = _broadcast(op, x1, x2)
    d = norm_dim(op, dim, len(shape))
    if x1.shape != shape:
        x1 = expand(x1, shape)
    if x2.shape != shape:
        x2 = expand(x2, shape)
    eps = float(eps)
    n1 = _pnorm(x1, 2.0, d, True, floor=eps)
    n2 = _pnorm(x2, 2.0, d, True, floor=eps)
    return _sum(mul(div(x1, n1), div(x2, n2)), d)



@implements("pairwise_distance")
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Any:
    """The p-norm distance ||x1 - x2 + eps||_p over the last dim (after broadcasting), as PyTorch's
    F.pairwise_distance. Both arguments are differentiated.

    >>> from rtxviz import Tensor
    >>> a = Tensor.from_slice([3.0, 0.0, 1.0, 1.0], [2, 2], dtype="float64")
    >>> [round(v, 4) for v in pairwise_distance(a, Tensor.zeros([2], dtype="float64"), eps=0.0).tolist()]
    [3.0, 1.4142]
    """
    op = "pairwise_distance"
    _check_float(op, "x1", x1)
    _check_float(op, "x2", x2)
    shape = _broadcast(op, x1, x2)
    if not shape:
        raise ShapeError(f"{op}: needs inputs of at least one dim (the distance is over the last dim), got "
                         f"{x1.shape} and {x2.shape}")
    d = sub(x1, x2)
    if eps:
        d = add_scalar(d, float(eps))
    return _pnorm(d, _order(op, p), len(shape) - 1, bool(keepdim))



@implements("normalize")
def normalize(x: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Any:
    """x divided by its p-norm along `dim`, the norm clamped below at `eps`: x / max(||x||_p, eps), as
    PyTorch's F.normalize.

    >>> from rtxviz import Tensor
    >>> normalize(Tensor.from_slice([3.0, 4.0], [1, 2], dtype="float64")).tolist()
    [[0.6, 0.8]]
    """
    op = "normalize"
    _check_float(op, "input", x)
    if x.ndim == 0:
        raise ShapeError(f"{op}: needs an input of at least one dim, got shape {x.shape}")
    d = norm_dim(op, dim, x.ndim)
    return div(x, _pnorm(x, _order(op, p), d, True, floor=float(eps)))

