"""Every op of the engine, one class per op, grouped by family. Importing this package attaches the
functional forms as Tensor methods and the Python operators (+ - * / ** @) to Tensor."""

from __future__ import annotations

from . import arithmetic, broadcast, convert, linalg, nn, operators, reduction, shape, unary  # noqa: F401
from ._base import OPS

__all__ = ["OPS"]
