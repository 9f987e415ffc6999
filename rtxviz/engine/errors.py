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
