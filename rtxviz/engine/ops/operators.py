"""Python operators on Tensor and Variable: + - * / ** @, unary -, and comparisons (no gradient)."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .arithmetic import add, div, mul, neg, pow, sub
from .linalg import matmul
from .shape import compare


def _rdiv(self: Tensor, other: Any) -> Any:
    from .unary import reciprocal

    if isinstance(other, int | float):
        return mul(reciprocal(self), float(other))
    return div(other, self)


def _compare(name: str) -> Any:
    def method(self: Tensor, other: Any) -> Tensor:
        return compare(self, other, name)

    method.__name__ = name
    method.__doc__ = f"Elementwise comparison ({name}); returns a bool Tensor and records no gradient."
    return method


Tensor.__add__ = add
Tensor.__radd__ = lambda self, other: add(other, self)
Tensor.__sub__ = sub
Tensor.__rsub__ = lambda self, other: sub(other, self)
Tensor.__mul__ = mul
Tensor.__rmul__ = lambda self, other: mul(other, self)
Tensor.__truediv__ = div
Tensor.__rtruediv__ = _rdiv
Tensor.__pow__ = pow
Tensor.__rpow__ = lambda self, other: pow(other, self)
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)
Tensor.__neg__ = neg
Tensor.__pos__ = lambda self: self
for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(Tensor, _name, _compare(_name))
Tensor.__hash__ = object.__hash__
