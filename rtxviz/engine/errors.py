"""The one error family of rtxviz: every message names the op and the offending values."""

from __future__ import annotations


class RtxvizError(Exception):
    """Base class of every error rtxviz raises on purpose."""


class ShapeError(RtxvizError, ValueError):
    """Shapes that do not fit together (broadcasting, matmul, reshape, ...)."""


class DimError(RtxvizError, IndexError):
    """A dimension index out of range."""


class DTypeError(RtxvizError, TypeError):
    """A dtype that an op does not accept, or two dtypes mixed."""


class DeviceError(RtxvizError, RuntimeError):
    """Tensors on different devices mixed, or a device that is not available."""


class GraphError(RtxvizError, RuntimeError):
    """Misuse of the autograd graph: backward twice through a freed graph, non-scalar backward, ..."""


class CheckpointError(RtxvizError, RuntimeError):
    """A checkpointed segment could not be recomputed faithfully (or was used in an unsupported way)."""


class GraphCacheError(GraphError):
    """A function cannot be captured safely, or a cached graph does not fit the call (a miss).

    `result` holds what the function returned when a capture was refused after the function had already run
    once eagerly (its effects, such as gradients accumulated into parameters, have happened)."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result
