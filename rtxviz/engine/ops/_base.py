"""Shared plumbing for op modules: attaching functions as Tensor methods, coercing operands, dims."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeVar

from .. import hooks as _hooks
from ..errors import DimError
from ..graph import apply
from ..tensor import Tensor, as_tensor_like
from ..variable import Variable

F = TypeVar("F", bound=Callable[..., Any])

#: Every op class by its name ("mul", "conv2d", ...): the conformance runner and the docs read this.
OPS: dict[str, type] = {}


def register(op: type) -> type:
    """Class decorator: make an Op known by its `name`."""
    OPS[op.name] = op
    return op


def tensor_method(*names: str) -> Callable[[F], F]:
    """Attach a functional op to Tensor (and so Variable) under `names`."""

    def deco(fn: F) -> F:
        for name in names:
            setattr(Tensor, name, fn)
        return fn

    return deco


def constant(array: Any) -> Tensor:
    """A data-independent constant made inside an op's rule or wrapper (a 0-d zero, a default weight of ones),
    as a Tensor; announced to tracing hooks so that the graph cache bakes it into a replay.

    Only for arrays whose values do not depend on any tensor's data: a mask or weight computed from data must
    come out of an op's forward (or its ctx.state), so that a replay recomputes it.

    >>> import numpy as np
    >>> constant(np.zeros((), dtype=np.float32)).shape
    ()
    """
    t = Tensor._wrap(array)
    if _hooks.TRACING:
        _hooks.trace("constant", tensor=t)
    return t


def unary(op: type, x: Tensor, attrs: dict | None = None) -> Any:
    if not isinstance(x, Tensor):
        x = as_tensor_like(x, None)
    return apply(op, (x,), attrs) if attrs is not None else apply(op, (x,))


def binary(op: type, a: Any, b: Any) -> Any:
    """Apply a two-input op, turning a scalar or array operand into a constant of the other's dtype."""
    if a.__class__ not in _TENSOR_TYPES and not isinstance(a, Tensor):
        a = as_tensor_like(a, b)
    if b.__class__ not in _TENSOR_TYPES and not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    return apply(op, (a, b))


_TENSOR_TYPES: set = {Tensor, Variable}


def as_dim(op: str, dim: Any) -> int:
    """`dim` as a Python int: any integral (int, numpy.int64, a 0-d integer array) via operator.index."""
    if dim.__class__ is int:
        return dim
    try:
        return operator.index(dim)
    except TypeError:
        raise TypeError(f"{op}: dim must be an int, got {dim!r} ({type(dim).__name__})") from None


def norm_dim(op: str, dim: int, ndim: int, extra: int = 0) -> int:
    """A possibly negative dim (any integral) as an index into `ndim` (+`extra`, for unsqueeze) dims, checked."""
    if dim.__class__ is not int:
        dim = as_dim(op, dim)
    size = ndim + extra
    if size == 0 and dim in (0, -1):
        return 0
    if not -size <= dim < size:
        raise DimError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dim(s) "
                       f"(expected {-size}..{size - 1})")
    return dim + size if dim < 0 else dim


def norm_dims(op: str, dims: Any, ndim: int) -> tuple[int, ...] | None:
    """None (all dims), an integral (int, numpy.int64...), or a sequence of them: normalised, checked for repeats."""
    if dims is None:
        return None
    if isinstance(dims, int):
        dims = (dims,)
    elif not isinstance(dims, list | tuple):
        try:
            dims = (operator.index(dims),)
        except TypeError:
            if not hasattr(dims, "__iter__"):
                raise TypeError(f"{op}: dim must be an int, a sequence of ints or None, got {dims!r}") from None
            # else a sequence of integrals (a 1-d int array, a range), checked one by one below
    out = tuple(norm_dim(op, d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise DimError(f"{op}: dim {list(dims)} repeats a dimension")
    return out
