"""Shape ops: reshape, transpose (more are added here: permute, narrow, squeeze, unsqueeze, cat, stack,
index_select, getitem). Their backward rules move the gradient back into the input's layout."""

from __future__ import annotations

from typing import Any

from ..errors import ShapeError
from ..graph import Op, apply
from ._base import norm_dim, register, tensor_method


@register
class Reshape(Op):
    name = "reshape"
    rule = "dX = reshape(dY, shape(X))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.reshape(ctx.attrs["shape"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (reshape(g, ctx.state),)


@tensor_method("reshape", "view")
def reshape(x: Any, *shape: Any) -> Any:
    """A new shape with the same number of elements (one -1 is inferred)."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    size = x.data.size
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape {x.shape} ({size} elements) to {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    total = 1
    for s in shape:
        total *= s
    if total != size:
        raise ShapeError(f"reshape: cannot reshape {x.shape} ({size} elements) to {shape} ({total} elements)")
    if shape == x.data.shape:
        return x
    return apply(Reshape, (x,), {"shape": shape})


@register
class Transpose(Op):
    name = "transpose"
    rule = "dX = transpose(dY, dim0, dim1)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.swapaxes(ctx.attrs["dim0"], ctx.attrs["dim1"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(Transpose, (g,), ctx.attrs),)


@tensor_method("transpose")
def transpose(x: Any, dim0: int = 0, dim1: int = 1) -> Any:
    """Swap two dims (a view). The spec calls `transpose(0, 1)`."""
    nd = x.ndim
    d0, d1 = norm_dim("transpose", dim0, nd), norm_dim("transpose", dim1, nd)
    if nd < 2 or d0 == d1:
        return x
    return apply(Transpose, (x,), {"dim0": d0, "dim1": d1})


@register
class Unsqueeze(Op):
    name = "unsqueeze"
    rule = "dX = squeeze(dY, dim)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.reshape(x.shape[: ctx.attrs["dim"]] + (1,) + x.shape[ctx.attrs["dim"] :])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (reshape(g, ctx.state),)


@tensor_method("unsqueeze")
def unsqueeze(x: Any, dim: int) -> Any:
    """Insert a dim of size 1 at `dim` (negative counts from the end of the result)."""
    return apply(Unsqueeze, (x,), {"dim": norm_dim("unsqueeze", dim, x.ndim, extra=1)})
