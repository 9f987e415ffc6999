"""Reductions: sum, mean (more are added here: var, logsumexp, max, min)."""

from __future__ import annotations

from typing import Any

from ..graph import Op, apply
from ._base import norm_dims, register, tensor_method
from .broadcast import expand


def _restore_dims(g: Any, in_shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdim: bool) -> Any:
    """Reshape a reduced gradient so it broadcasts against the input (re-insert the reduced dims)."""
    if keepdim or not in_shape:
        return g
    if axes is None:
        axes = tuple(range(len(in_shape)))
    shape = [1 if i in axes else s for i, s in enumerate(in_shape)]
    return g.reshape(tuple(shape))


@register
class Sum(Op):
    name = "sum"
    rule = "dX = expand(dY, shape(X))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.sum(axis=ctx.attrs["dims"], keepdims=ctx.attrs["keepdim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        in_shape = ctx.state
        g = _restore_dims(g, in_shape, ctx.attrs["dims"], ctx.attrs["keepdim"])
        return (expand(g, in_shape),)


@register
class Mean(Op):
    name = "mean"
    rule = "dX = expand(dY, shape(X)) / N"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.mean(axis=ctx.attrs["dims"], keepdims=ctx.attrs["keepdim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        in_shape = ctx.state
        dims = ctx.attrs["dims"]
        count = 1
        for i, s in enumerate(in_shape):
            if dims is None or i in dims:
                count *= s
        g = _restore_dims(g, in_shape, dims, ctx.attrs["keepdim"])
        return (expand(g.mul_scalar(1.0 / count), in_shape),)


_ALL_DIMS = {"dims": None, "keepdim": False}


@tensor_method("sum")
def sum(x: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """Sum over `dim` (an int, a list of ints, or None for all).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([2, 3]).sum(dim=1).tolist()
    [3.0, 3.0]
    """
    if dim is None and not keepdim:
        return apply(Sum, (x,), _ALL_DIMS)
    return apply(Sum, (x,), {"dims": norm_dims("sum", dim, x.ndim), "keepdim": bool(keepdim)})


@tensor_method("mean")
def mean(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return apply(Mean, (x,), {"dims": norm_dims("mean", dim, x.ndim), "keepdim": bool(keepdim)})
