"""Event fields from Python values: bounded, JSON-safe versions of attrs and fields, and the parameters an
optimizer or module holds (what the event hook reports on).

>>> jsonable({"dims": (0, 1), "scale": np.float32(0.5), "f": float("nan")})
{'dims': [0, 1], 'scale': 0.5, 'f': None}
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def params_of(source: Any) -> list:
    """Parameters from a list of Variables, an optimizer (`.params` or `.param_groups`) or a module."""
    if hasattr(source, "param_groups"):
        return [p for g in source.param_groups for p in (g["params"] if isinstance(g, dict) else g)]
    if hasattr(source, "params") and not callable(source.params):
        return list(source.params)
    if hasattr(source, "parameters") and callable(source.parameters):
        return list(source.parameters())
    return list(source)


def jsonable(value: Any, max_len: int = 200, depth: int = 0) -> Any:
    """A JSON-safe, bounded version of an attr or event field (tuples become lists, arrays a summary)."""
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, str) and len(value) > max_len:
            return value[:max_len] + "…"
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return jsonable(value.item(), max_len, depth)
    if depth >= 3:
        return _short_repr(value, max_len)
    if isinstance(value, list | tuple):
        items = [jsonable(v, max_len, depth + 1) for v in value[:32]]
        if len(value) > 32:
            items.append(f"… {len(value) - 32} more")
        return items
    if isinstance(value, dict):
        out = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= 32:
                out["…"] = f"{len(value) - 32} more"
                break
            out[str(k)[:64]] = jsonable(v, max_len, depth + 1)
        return out
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return {"shape": [int(d) for d in shape], "dtype": str(dtype)}
    return _short_repr(value, max_len)


def _short_repr(value: Any, max_len: int) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not break the event stream
        text = f"<{type(value).__name__}>"
    return text if len(text) <= max_len else text[:max_len] + "…"
