"""interpolate, as PyTorch's F.interpolate: modes nearest, nearest-exact, linear, bilinear, trilinear and area
over x [N, C, *space], to a `size` or by a `scale_factor`.

No op of its own: each spatial dim is resized by ops that already exist, from the last dim to the first,

- nearest / nearest-exact: ``index_select`` of the source indices (its gradient adds dY back at them);
- linear modes: ``x.index_select(d, i0)·λ0 + x.index_select(d, i1)·λ1``, the two neighbours and their weights;
- area: ``adaptive_avg_pool2d`` (PyTorch's definition of it).

The indices and weights are built with numpy from the shapes alone and enter as constants (`constant`), so a
graph-cache replay bakes them in, gradients of every order come from the ops, and values match PyTorch's kernel:
its index arithmetic is copied (float32 `floorf` of the source position, the scale 1/scale_factor when a
scale_factor is given, the half-pixel centres clamped at 0 for align_corners=False), and dims are combined in
its order (the last dim first, then each earlier dim weights the rows it reads), so float64 results agree to
the last bits.

>>> from rtxviz import Tensor
>>> interpolate(Tensor.arange(3.0).reshape(1, 1, 3), scale_factor=2).tolist()
[[[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]]]
>>> interpolate(Tensor.arange(3.0).reshape(1, 1, 3), size=5, mode="linear", align_corners=True).tolist()
[[[0.0, 0.5, 1.0, 1.5, 2.0]]]
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..device import xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from ._base import constant
from .arithmetic import add, mul
from .nn_pool import adaptive_avg_pool2d
from .shape import clone, index_select, squeeze, unsqueeze

__all__ = ["interpolate"]

#: mode -> the number of spatial dims it takes (PyTorch's F.interpolate)
MODES: dict[str, tuple[int, ...]] = {"nearest": (1, 2, 3), "nearest-exact": (1, 2, 3), "linear": (1,),
                                     "bilinear": (2,), "trilinear": (3,), "area": (1, 2)}
LINEAR_MODES = ("linear", "bilinear", "trilinear")


def _scales_value(scale: float | None, n_in: int, n_out: int, dtype: Any) -> Any:
    """PyTorch's compute_scales_value: 1/scale_factor when one was given (> 0), else in/out, in `dtype`."""
    t = np.dtype(dtype).type
    if scale is not None and scale > 0:
        return t(1.0 / scale)
    return t(n_in) / t(n_out)


def nearest_indices(n_in: int, n_out: int, scale: float | None, exact: bool = False) -> np.ndarray:
    """The source index of each output position (PyTorch's nearest_idx / nearest_neighbor_exact): floor(dst·s)
    (exact: floor((dst + 0.5)·s)) in float32, s = 1/scale_factor or in/out, clamped to n_in - 1; same sizes
    copy, and plain nearest at twice the size halves the index without rounding.

    >>> nearest_indices(3, 5, None).tolist(), nearest_indices(3, 5, None, exact=True).tolist()
    ([0, 0, 1, 1, 2], [0, 0, 1, 2, 2])
    """
    dst = np.arange(n_out)
    if not exact and n_out == n_in:
        return dst
    if not exact and n_out == 2 * n_in:
        return dst >> 1
    s = _scales_value(scale, n_in, n_out, np.float32)
    pos = (dst + 0.5) * np.float64(s) if exact else dst.astype(np.float32) * s
    return np.minimum(np.floor(pos.astype(np.float32)).astype(np.int64), n_in - 1)


def linear_weights(n_in: int, n_out: int, scale: float | None, align_corners: bool,
                   dtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(i0, i1, λ0, λ1) of each output position, PyTorch's compute_source_index_and_lambda in `dtype`: the source
    position s·dst (align_corners; s = (in-1)/(out-1)) or max(s·(dst + 0.5) - 0.5, 0) (s = 1/scale_factor or
    in/out), its floor i0 (float32 floorf, at most in-1), i1 = i0 + 1 short of the edge (i0 itself at it, where
    the weights then read one value twice), λ1 = the fraction clamped to [0, 1], λ0 = 1 - λ1.

    >>> [a.tolist() for a in linear_weights(2, 4, None, False, np.float64)]
    [[0, 0, 0, 1], [1, 1, 1, 1], [1.0, 0.75, 0.25, 0.75], [0.0, 0.25, 0.75, 0.25]]
    """
    t = np.dtype(dtype).type
    dst = np.arange(n_out)
    if align_corners:
        s = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        real = dst.astype(dtype) * s
    else:
        s = _scales_value(scale, n_in, n_out, dtype)
        real = np.maximum(s * (dst.astype(dtype) + t(0.5)) - t(0.5), t(0))
    i0 = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), n_in - 1)
    i1 = i0 + (i0 < n_in - 1)
    lam1 = np.minimum(np.maximum(real - i0.astype(dtype), t(0)), t(1)).astype(dtype)
    return i0, i1, (t(1) - lam1).astype(dtype), lam1


def _const_like(x: Tensor, values: np.ndarray, dtype: Any = None) -> Tensor:
    """A constant on x's device (data-independent: made from the shapes alone, so a replay may bake it in)."""
    xp = xp_of(x.data)
    return constant(xp.asarray(values, dtype=values.dtype if dtype is None else dtype))


def _resize_dim(x: Tensor, d: int, n_out: int, mode: str, scale: float | None, align_corners: bool) -> Any:
    """x resized along dim d to n_out positions; x itself when a mode keeps the size (as PyTorch's copy)."""
    n_in = x.shape[d]
    if mode in ("nearest", "nearest-exact"):
        idx = nearest_indices(n_in, n_out, scale, exact=mode == "nearest-exact")
        if n_out == n_in and (idx == np.arange(n_in)).all():
            return x
        return index_select(x, d, _const_like(x, idx))
    if n_out == n_in:  # PyTorch copies: λ0 = 1, λ1 = 0 at every position
        return x
    i0, i1, lam0, lam1 = linear_weights(n_in, n_out, scale, align_corners, x.data.dtype)
    trailing = (1,) * (x.ndim - 1 - d)  # the weights broadcast along dim d
    w0 = _const_like(x, lam0.reshape(n_out, *trailing))
    w1 = _const_like(x, lam1.reshape(n_out, *trailing))
    return add(mul(index_select(x, d, _const_like(x, i0)), w0), mul(index_select(x, d, _const_like(x, i1)), w1))


def _check_input(op: str, x: Any, mode: str) -> int:
    """The number of spatial dims of x [N, C, *space] for `mode`, after PyTorch's checks (its words)."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise DTypeError(f"{op}: input must be a float32 or float64 Tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if mode not in MODES:
        raise ValueError(f"{op}: mode must be one of {tuple(MODES)}, got {mode!r} (bicubic and antialiasing are "
                         "not supported)")
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ShapeError(f"{op}: input must be [N, C, *space] with 1 to 3 spatial dims (3D, 4D or 5D; there is no "
                         f"unbatched form), got {x.ndim}D input of shape {x.shape}")
    if nd not in MODES[mode]:
        want = " or ".join(f"{n + 2}D" for n in MODES[mode])
        raise ShapeError(f"{op}: got {x.ndim}D input of shape {x.shape}, but mode {mode!r} needs {want} input")
    return nd


def _per_dim(op: str, label: str, value: Any, nd: int, x: Tensor) -> list[Any]:
    """A size or scale factor as one entry per spatial dim (a number is repeated), in PyTorch's words."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != nd:
            raise ValueError(f"{op}: input and output must have the same number of spatial dimensions, but got "
                             f"input with spatial dimensions of {list(x.shape[2:])} and {label} {tuple(value)}")
        return list(value)
    return [value] * nd


def _output_plan(op: str, x: Tensor, nd: int, size: Any, scale_factor: Any,
                 recompute_scale_factor: bool | None) -> tuple[list[int], list[float | None]]:
    """(output sizes, the scales the kernel uses) as F.interpolate: floor(in·scale_factor) per dim, and the scale
    factors themselves unless recompute_scale_factor (then in/out, as with `size`)."""
    if size is not None and scale_factor is not None:
        raise ValueError(f"{op}: only one of size or scale_factor should be defined, got size={size!r} and "
                         f"scale_factor={scale_factor!r}")
    if size is None and scale_factor is None:
        raise ValueError(f"{op}: either size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError(f"{op}: recompute_scale_factor is not meaningful with an explicit size")
        try:
            sizes = [operator.index(s) for s in _per_dim(op, "output size", size, nd, x)]
        except TypeError:
            raise TypeError(f"{op}: size must be an int or a sequence of {nd} ints, got {size!r}") from None
        scales: list[float | None] = [None] * nd
    else:
        factors = [float(f) for f in _per_dim(op, "scale_factor", scale_factor, nd, x)]
        sizes = [math.floor(float(n) * f) for n, f in zip(x.shape[2:], factors, strict=True)]
        scales = [None] * nd if recompute_scale_factor else list(factors)
    if min(sizes) < 1 or min(x.shape[2:]) < 1:
        raise ShapeError(f"{op}: input and output sizes should be greater than 0, got input {tuple(x.shape[2:])} "
                         f"and output {tuple(sizes)}")
    return sizes, scales


def interpolate(input: Tensor, size: int | Sequence[int] | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Any:
    """Resize input [N, C, *space] (1 to 3 spatial dims) to `size` or by `scale_factor` (one of the two; a
    number or one per spatial dim), as PyTorch's F.interpolate, with its output sizes (floor(in·scale_factor)),
    index arithmetic and defaults.

    Modes: "nearest" (source floor(dst·in/out), PyTorch's default), "nearest-exact" (floor((dst + 0.5)·in/out)),
    "linear" (3D input), "bilinear" (4D), "trilinear" (5D), each with align_corners (default False: half-pixel
    centres, clamped at 0; True: the corner pixels' centres align), and "area" (3D and 4D: adaptive average
    pooling). A given scale_factor is the scale the indices use unless recompute_scale_factor is True.

    >>> from rtxviz import Tensor
    >>> interpolate(Tensor.from_slice([1.0, 3.0], [1, 1, 1, 2]), size=(1, 4), mode="bilinear").tolist()
    [[[[1.0, 1.5, 2.5, 3.0]]]]
    >>> interpolate(Tensor.ones([1, 2, 4, 4]), scale_factor=0.5, mode="area").shape
    (1, 2, 2, 2)
    """
    op = "interpolate"
    x = input
    nd = _check_input(op, x, mode)
    if antialias:
        raise ValueError(f"{op}: antialias=True is not supported (got mode {mode!r})")
    if mode in LINEAR_MODES:
        corners = bool(align_corners)
    elif align_corners is not None:
        raise ValueError(f"{op}: align_corners option can only be set with the interpolating modes: linear | "
                         f"bilinear | trilinear, got mode {mode!r} and align_corners={align_corners!r}")
    else:
        corners = False
    sizes, scales = _output_plan(op, x, nd, size, scale_factor, recompute_scale_factor)
    if mode == "area":  # PyTorch: adaptive average pooling to the output size
        if nd == 1:
            return squeeze(adaptive_avg_pool2d(unsqueeze(x, 2), (1, sizes[0])), 2)
        return adaptive_avg_pool2d(x, (sizes[0], sizes[1]))
    out = x
    for k in reversed(range(nd)):  # the last dim first: PyTorch's order of products and sums
        out = _resize_dim(out, 2 + k, sizes[k], mode, scales[k], corners)
    return clone(x) if out is x else out  # every dim kept its size: still a new tensor, as PyTorch's
