"""Broadcasting's two directions: expand (broadcast_to) and its adjoint sum_to (sum over broadcast dims)."""

from __future__ import annotations

from typing import Any

from ..errors import ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import register, tensor_method


def _sum_to_axes(in_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lead = len(in_shape) - len(shape)
    lead_axes = tuple(range(lead))
    keep_axes = tuple(i + lead for i, s in enumerate(shape) if s == 1 and in_shape[i + lead] != 1)
    return lead_axes, keep_axes


@register
class SumTo(Op):
    name = "sum_to"
    rule = "dX = expand(dY, shape(X))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        shape = ctx.attrs["shape"]
        ctx.state = x.shape
        lead_axes, keep_axes = _sum_to_axes(x.shape, shape)
        if keep_axes:
            x = x.sum(axis=keep_axes, keepdims=True)
        if lead_axes:
            x = x.sum(axis=lead_axes)
        return x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (expand(g, ctx.state),)


def sum_to(x: Tensor, shape: tuple[int, ...]) -> Any:
    """Sum `x` down to `shape` (the reverse of broadcasting); `x` itself when already that shape."""
    if x.data.shape == shape:
        return x
    return apply(SumTo, (x,), {"shape": tuple(shape)})


@register
class Expand(Op):
    name = "expand"
    rule = "dX = sum_to(dY, shape(X))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        xp = _xp(x)
        return xp.broadcast_to(x, ctx.attrs["shape"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (sum_to(g, ctx.state),)


def _xp(a: Any) -> Any:
    from ..device import xp_of

    return xp_of(a)


@tensor_method("expand", "broadcast_to")
def expand(x: Tensor, *shape: Any) -> Any:
    """Broadcast `x` to `shape` without copying (PyTorch's expand; -1 keeps a dim).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([3]).expand(2, 3).shape
    (2, 3)
    """
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if len(shape) < x.ndim:
        raise ShapeError(f"expand: cannot expand shape {x.shape} to fewer dims {shape}")
    lead = len(shape) - x.ndim
    resolved = list(shape)
    for i, s in enumerate(x.shape):
        target = shape[i + lead]
        if target == -1:
            resolved[i + lead] = s
        elif s != 1 and s != target:
            raise ShapeError(f"expand: dim {i} of size {s} cannot expand to {target} (shape {x.shape} -> {shape})")
    resolved_t = tuple(resolved)
    if resolved_t == x.shape:
        return x
    return apply(Expand, (x,), {"shape": resolved_t})
