"""Python operators on Tensor and Variable: + - * / // % ** @, unary - and +, abs(), //= and %=, and comparisons and
& | ^ ~ (no gradient).

Each reflected form (``2.0 - x`` calls ``x.__rsub__(2.0)``) is a named function here, so that the Tensor class can
declare it for type checkers (`Tensor`'s ``TYPE_CHECKING`` block).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..grad_mode import no_grad
from ..tensor import Tensor, as_tensor_like
from ._base import tensor_method
from .arithmetic import add, div, floor_divide, mul, neg, pow, remainder, sub
from .index import logical
from .inplace import _apply_inplace
from .linalg import matmul
from .reduction import sum as _sum
from .shape import compare
from .unary import abs, reciprocal

tensor_method("__add__")(add)
tensor_method("__sub__")(sub)
tensor_method("__mul__")(mul)
tensor_method("__floordiv__")(floor_divide)
tensor_method("__mod__")(remainder)
tensor_method("__pow__")(pow)
tensor_method("__matmul__")(matmul)
tensor_method("__neg__")(neg)
tensor_method("__abs__")(abs)


@tensor_method("__radd__")
def radd(self: Tensor, other: Any) -> Any:
    """other + self."""
    return add(other, self)


@tensor_method("__rsub__")
def rsub(self: Tensor, other: Any) -> Any:
    """other - self."""
    return sub(other, self)


@tensor_method("__rmul__")
def rmul(self: Tensor, other: Any) -> Any:
    """other * self."""
    return mul(other, self)


@tensor_method("__rtruediv__")
def rdiv(self: Tensor, other: Any) -> Any:
    """other / self (a Python number: other · reciprocal(self))."""
    if isinstance(other, int | float):
        return mul(reciprocal(self), float(other))
    return div(other, self)


@tensor_method("__rfloordiv__")
def rfloordiv(self: Tensor, other: Any) -> Any:
    """other // self."""
    return floor_divide(other, self)


@tensor_method("__rmod__")
def rmod(self: Tensor, other: Any) -> Any:
    """other % self."""
    return remainder(other, self)


@tensor_method("floor_divide_", "__ifloordiv__")
def floor_divide_(x: Tensor, other: Any) -> Tensor:
    """x //= other, in place."""
    return _apply_inplace(x, "floor_divide_", lambda s: floor_divide(s, other), other)


@tensor_method("remainder_", "__imod__")
def remainder_(x: Tensor, other: Any) -> Tensor:
    """x %= other, in place."""
    return _apply_inplace(x, "remainder_", lambda s: remainder(s, other), other)


@tensor_method("__rpow__")
def rpow(self: Tensor, other: Any) -> Any:
    """other ** self."""
    return pow(other, self)


@tensor_method("__rmatmul__")
def rmatmul(self: Tensor, other: Any) -> Any:
    """other @ self."""
    return matmul(other, self)


@tensor_method("__pos__")
def pos(self: Tensor) -> Tensor:
    """+self: the tensor itself."""
    return self


@tensor_method("__lt__")
def lt(self: Tensor, other: Any) -> Tensor:
    """self < other, elementwise: a bool Tensor that records no gradient."""
    return compare(self, other, "__lt__")


@tensor_method("__le__")
def le(self: Tensor, other: Any) -> Tensor:
    """self <= other, elementwise (bool, no gradient)."""
    return compare(self, other, "__le__")


@tensor_method("__gt__")
def gt(self: Tensor, other: Any) -> Tensor:
    """self > other, elementwise (bool, no gradient)."""
    return compare(self, other, "__gt__")


@tensor_method("__ge__")
def ge(self: Tensor, other: Any) -> Tensor:
    """self >= other, elementwise (bool, no gradient)."""
    return compare(self, other, "__ge__")


@tensor_method("__eq__")
def eq(self: Tensor, other: Any) -> Tensor:
    """self == other, elementwise (bool, no gradient): tensors hash by identity, as PyTorch's."""
    return compare(self, other, "__eq__")


@tensor_method("__ne__")
def ne(self: Tensor, other: Any) -> Tensor:
    """self != other, elementwise (bool, no gradient)."""
    return compare(self, other, "__ne__")


@tensor_method("__and__", "bitwise_and")
def and_(a: Tensor, b: Any) -> Tensor:
    """a & b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""
    return logical(a, b, "__and__")


@tensor_method("__or__", "bitwise_or")
def or_(a: Tensor, b: Any) -> Tensor:
    """a | b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""
    return logical(a, b, "__or__")


@tensor_method("__xor__", "bitwise_xor")
def xor(a: Tensor, b: Any) -> Tensor:
    """a ^ b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""
    return logical(a, b, "__xor__")


@tensor_method("__rand__")
def rand_(a: Tensor, b: Any) -> Tensor:
    """b & a (a bool or int on the left)."""
    return logical(a, b, "__and__")


@tensor_method("__ror__")
def ror(a: Tensor, b: Any) -> Tensor:
    """b | a (a bool or int on the left)."""
    return logical(a, b, "__or__")


@tensor_method("__rxor__")
def rxor(a: Tensor, b: Any) -> Tensor:
    """b ^ a (a bool or int on the left)."""
    return logical(a, b, "__xor__")


@tensor_method("__invert__", "bitwise_not")
def invert(a: Tensor) -> Tensor:
    """~a elementwise: not, for a bool tensor; bitwise not for int64 (no gradient)."""
    return logical(a, None, "__invert__")


Tensor.__hash__ = object.__hash__  # type: ignore[method-assign,assignment]  # defining __eq__ would unset it


# -- PyTorch's method spellings of the comparisons, and the checks built from them ---------------------------------
# (compositions of `compare` and the logical operators: no op of their own, no gradient, and a graph-cache replay
# recomputes them from the new values)

tensor_method("lt")(lt)
tensor_method("le")(le)
tensor_method("gt")(gt)
tensor_method("ge")(ge)
tensor_method("eq")(eq)
tensor_method("ne")(ne)


@tensor_method("isnan")
def isnan(x: Tensor) -> Tensor:
    """Where x is NaN, elementwise (bool, no gradient), as torch.isnan."""
    return compare(x, x, "__ne__")


@tensor_method("isinf")
def isinf(x: Tensor) -> Tensor:
    """Where x is +inf or -inf, elementwise (bool, no gradient), as torch.isinf."""
    return or_(compare(x, float("inf"), "__eq__"), compare(x, float("-inf"), "__eq__"))


@tensor_method("isfinite")
def isfinite(x: Tensor) -> Tensor:
    """Where x is neither NaN nor infinite, elementwise (bool, no gradient), as torch.isfinite."""
    return invert(or_(isnan(x), isinf(x)))


def _nonzero(x: Tensor) -> Tensor:
    return x if x.dtype == np.bool_ else compare(x, 0, "__ne__")


@tensor_method("all")
def all(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether every element (along `dim`) is nonzero: a bool Tensor, as torch.all."""
    return compare(_sum(invert(_nonzero(x)), dim=dim, keepdim=keepdim), 0, "__eq__")


@tensor_method("any")
def any(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether some element (along `dim`) is nonzero: a bool Tensor, as torch.any."""
    return compare(_sum(_nonzero(x), dim=dim, keepdim=keepdim), 0, "__gt__")


def _broadcastable(where: str, a: Tensor, b: Tensor) -> None:
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"{where}: shapes {a.shape} and {b.shape} do not broadcast") from None


@tensor_method("isclose")
def isclose(a: Tensor, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Where |a - b| <= atol + rtol·|b|, elementwise (bool), as torch.isclose: equal values (infinities too) are
    close, an infinity is close only to itself, NaN to nothing unless `equal_nan`.

    >>> from rtxviz import tensor
    >>> isclose(tensor([1.0, 2.0]), tensor([1.0 + 1e-6, 2.1])).tolist()
    [True, False]
    """
    b = as_tensor_like(b, a)
    _broadcastable("isclose", a, b)
    with no_grad():
        a0, b0 = a.detach(), b.detach()
        near = compare(abs(sub(a0, b0)), add(mul(abs(b0), rtol), atol), "__le__")
        out = or_(compare(a0, b0, "__eq__"), and_(near, and_(isfinite(a0), isfinite(b0))))
        return or_(out, and_(isnan(a0), isnan(b0))) if equal_nan else out


@tensor_method("allclose")
def allclose(a: Tensor, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> builtins.bool:
    """Whether every element of `a` is close to `b`'s (`isclose`), as torch.allclose: a Python bool."""
    b = as_tensor_like(b, a)
    _broadcastable("allclose", a, b)
    return builtins.bool(all(isclose(a, b, rtol, atol, equal_nan)).item())


@tensor_method("equal")
def equal(a: Tensor, b: Tensor) -> builtins.bool:
    """Whether `a` and `b` have the same shape and the same values, as torch.equal: a Python bool."""
    if a.shape != b.shape:
        return False
    return builtins.bool(all(compare(a, b, "__eq__")).item())
