"""Every op of the engine, one class per op, grouped by family. Importing this package attaches the
functional forms as Tensor methods and the Python operators to Tensor."""

from __future__ import annotations

from . import (  # noqa: F401 - registers the ops
    arithmetic,
    broadcast,
    linalg,
    operators,  # noqa: F401 - attaches + - * / ** @ to Tensor
    reduction,
    shape,
    unary,
)
from ._base import OPS

__all__ = ["OPS"]
