"""Sorting: argsort, sort and topk, as PyTorch's. The order is an op with no gradient (`ArgSort`, so a graph-cache
replay recomputes it); the values are a `gather` at that order, so their gradient goes back to the positions
they came from.

>>> from rtxviz import Tensor
>>> values, indices = Tensor.from_slice([3.0, 1.0, 2.0], [3]).sort(descending=True)
>>> values.tolist(), indices.tolist()
([3.0, 2.0, 1.0], [0, 2, 1])
>>> Tensor.from_slice([3.0, 1.0, 2.0], [3]).topk(2).values.tolist()
[3.0, 2.0]
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..device import xp_of
from ..dtypes import int64
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, implements, norm_dim, tensor_method
from .index import gather
from .shape import narrow


class Sorted(NamedTuple):
    """What sort and topk return, as PyTorch's: ``values, indices = x.sort(dim)``."""

    values: Any
    indices: Any


class ArgSort(Op):
    """The order that sorts `x` along `dim` (stable: equal values keep their order): int64, no gradient."""

    name = "argsort"
    kind = "index"
    differentiable = False
    rule = "no gradient (an order)"
    examples = (Example(lambda x: argsort(x, 1), ((3, 4),)), Example(lambda x: argsort(x, 0, True), ((5,),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        dim, descending = ctx.attrs["dim"], ctx.attrs["descending"]
        key = -x if descending and x.dtype.kind != "b" else x
        order = xp_of(x).argsort(key, axis=dim, kind="stable")
        return order.astype(int64, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:  # pragma: no cover - never recorded: its input is a plain Tensor
        return (None,)


def _check(op: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if x.dtype.kind == "b":
        raise DTypeError(f"{op}: not defined for bool tensors")


@tensor_method("argsort")
@implements(ArgSort, reference=None)
def argsort(x: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    """The indices that sort `x` along `dim` (int64, no gradient), as torch.argsort (stable)."""
    _check("argsort", x)
    if x.ndim == 0:
        return Tensor._wrap(xp_of(x.data).zeros((), dtype=int64))
    d = norm_dim("argsort", dim, x.ndim)
    return apply(ArgSort, (Tensor._wrap(x.data),), {"dim": d, "descending": bool(descending)})


@tensor_method("sort")
def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Sorted:
    """``(values, indices)``: `x` sorted along `dim`, and where each value came from (torch.sort). Ties keep their
    order (the sort is always stable). The values' gradient goes back to their positions."""
    order = argsort(x, dim, descending)
    if x.ndim == 0:
        return Sorted(x, order)
    return Sorted(gather(x, dim, order), order)


@tensor_method("topk")
def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Sorted:
    """``(values, indices)`` of the `k` largest (or, `largest=False`, smallest) values along `dim` (torch.topk),
    in sorted order."""
    _check("topk", x)
    d = norm_dim("topk", dim, max(x.ndim, 1))
    size = x.shape[d] if x.ndim else 1
    if not 0 <= k <= size:
        raise ShapeError(f"topk: k={k} is out of range for dim {dim} of size {size} (shape {tuple(x.shape)})")
    order = argsort(x, d, descending=largest)
    if x.ndim == 0:
        return Sorted(x, order)
    picked = narrow(order, d, 0, k)
    return Sorted(gather(x, d, picked), picked)
