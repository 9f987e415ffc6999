"""The dtypes rtxviz supports: float32 (default), float64, and int64 for indices."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import DTypeError

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

DEFAULT_FLOAT = float32
SUPPORTED = (float32, float64, int64, bool_)
_BY_NAME: dict[str, np.dtype] = {"float32": float32, "float64": float64, "int64": int64, "bool": bool_,
                                 "float": float32, "double": float64, "long": int64}


_default = [DEFAULT_FLOAT]  # the dtype of new float tensors from Python values and of the constructors


def get_default_dtype() -> np.dtype:
    """The float dtype that Python numbers, lists and the constructors (zeros, randn...) get: float32 unless
    `set_default_dtype` changed it (as torch.get_default_dtype)."""
    return _default[0]


def set_default_dtype(dtype: Any) -> None:
    """Make `dtype` (float32 or float64) the default float dtype, as torch.set_default_dtype. numpy arrays keep
    their own dtype.

    >>> set_default_dtype("float64"); get_default_dtype().name
    'float64'
    >>> set_default_dtype("float32")
    """
    dt = as_dtype(dtype, "set_default_dtype")
    if not is_float(dt):
        raise DTypeError(f"set_default_dtype: the default must be float32 or float64, got {dt}")
    _default[0] = dt


def as_dtype(dtype: Any, where: str = "dtype") -> np.dtype:
    """Normalise a dtype spec ('float32', np.float64, ...) to a supported numpy dtype (None: the default float)."""
    if dtype is None:
        return _default[0]
    if isinstance(dtype, str):
        found = _BY_NAME.get(dtype)
        if found is None:
            raise DTypeError(f"{where}: unsupported dtype {dtype!r}; use one of float32, float64, int64, bool")
        return found
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{where}: {dtype!r} is not a dtype") from None
    if dt not in SUPPORTED:
        raise DTypeError(f"{where}: unsupported dtype {dt}; use one of float32, float64, int64, bool")
    return dt


def device_or_dtype(device: Any, dtype: Any) -> tuple[Any, Any]:
    """`to(device, dtype)`'s two arguments with a dtype given first moved into place, as PyTorch's
    ``t.to(torch.float64)``: (None, that dtype). A device, or a dtype given by name, stays where it is.

    >>> device_or_dtype(float64, None), device_or_dtype("float64", None), device_or_dtype("cpu", None)
    ((None, dtype('float64')), (None, 'float64'), ('cpu', None))
    """
    if dtype is None and device is not None and (
            isinstance(device, np.dtype) or (isinstance(device, type) and issubclass(device, np.generic))
            or (isinstance(device, str) and device in _BY_NAME)):
        return None, device
    return device, dtype


def is_float(dtype: np.dtype) -> bool:
    return dtype == float32 or dtype == float64
