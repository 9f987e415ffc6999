"""Every op of the engine, one class per op with its public function after it, grouped by family. Importing
this package registers the ops (`OPS`, `REFERENCE`) and attaches their functions as Tensor methods and the
Python operators (+ - * / ** @) to Tensor."""

from __future__ import annotations

from . import (  # noqa: F401 - registers the ops and attaches the methods
    arithmetic,
    broadcast,
    convert,
    distance,
    einsum,
    index,
    inplace,
    linalg,
    nn,
    nn_attention,
    nn_recurrent,
    nn_upsample,
    numpy_interop,
    operators,
    reduction,
    scan,
    shape,
    sorting,
    unary,
)
from ._base import OPS, REFERENCE, REFERENCE_OPS, Elementwise, Example, implements
from .broadcast import BroadcastBinary

__all__ = ["OPS", "REFERENCE", "REFERENCE_OPS", "BroadcastBinary", "Elementwise", "Example", "implements"]
