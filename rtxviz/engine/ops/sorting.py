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

import numpy as np

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


class Unique(Op):
    """One part of torch.unique(x) (dim=None): the sorted distinct values, the inverse (the position in them of
    each element of x, x's shape) or the counts. No gradient; an op, so that a graph-cache replay recomputes it."""

    name = "unique"
    kind = "index"
    differentiable = False
    rule = "no gradient (distinct values, positions, counts)"
    examples = (Example(lambda x: unique(x), ((3, 4),)),
                Example(lambda x: unique(x, return_inverse=True, return_counts=True)[2],
                        (np.array([[2.0, 1.0], [2.0, 3.0]]),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        part = ctx.attrs["part"]
        if part == "values":
            return xp.unique(x)
        values, inverse, counts = xp.unique(x, return_inverse=True, return_counts=True)
        if part == "inverse":
            return inverse.reshape(x.shape).astype(int64, copy=False)
        return counts.astype(int64, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:  # pragma: no cover - never recorded: its input is a plain Tensor
        return (None,)


@tensor_method("unique")
@implements(Unique, reference=None)
def unique(x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None) -> Any:
    """The distinct values of `x`, sorted, as a 1-D tensor (torch.unique, no gradient); with `return_inverse`
    also where each element of x is among them (x's shape), with `return_counts` how often each occurs, returned
    as a tuple in that order. `sorted=False` still sorts (as torch does on the CPU); `dim` is not supported.

    >>> from rtxviz import Tensor
    >>> values, inverse, counts = unique(Tensor([3, 1, 2, 3, 1]), return_inverse=True, return_counts=True)
    >>> values.tolist(), inverse.tolist(), counts.tolist()
    ([1, 2, 3], [2, 0, 1, 2, 0], [2, 1, 2])
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"unique: expected a Tensor, got {type(x).__name__}")
    if dim is not None:
        raise NotImplementedError(f"unique: dim={dim} is not supported; only dim=None (all elements)")
    plain = Tensor._wrap(x.data)
    out = [apply(Unique, (plain,), {"part": "values"})]
    if return_inverse:
        out.append(apply(Unique, (plain,), {"part": "inverse"}))
    if return_counts:
        out.append(apply(Unique, (plain,), {"part": "counts"}))
    return out[0] if len(out) == 1 else tuple(out)
