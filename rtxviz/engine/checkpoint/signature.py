"""What a segment's recomputation must reproduce of each op: its name, input and output shapes and dtypes, its
plain-valued attrs and (determinism_check="values") a checksum of its output; and how two such records compare.

>>> attrs_differ({"dim": 1}, {"dim": 2})
('dim', 1, 2)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_MISSING = object()


def checksum(array: Any) -> tuple[float, tuple]:
    """A cheap fingerprint of values: the sum and up to 8 elements at a stride."""
    flat = array.reshape(-1)
    step = max(1, flat.size // 8)
    total = float(flat.sum(dtype="float64")) if flat.size else 0.0
    return total, tuple(float(v) for v in flat[::step][:8].tolist())


_PLAIN = (int, float, bool, str, complex, type(None), type(Ellipsis), np.generic, np.dtype, type)


def _plain(v: Any, depth: int = 0) -> bool:
    """A value `==` compares cheaply and exactly: Python scalars, strings, dtypes, and tuples/lists/slices of
    them (arrays, Tensors and op-private objects are not: their values are covered by the shape/value checks)."""
    if isinstance(v, _PLAIN):
        return True
    if depth < 3:
        if type(v) in (tuple, list):
            return all(_plain(e, depth + 1) for e in v)
        if type(v) is slice:
            return _plain(v.start, depth + 1) and _plain(v.stop, depth + 1) and _plain(v.step, depth + 1)
    return False


def attr_sig(attrs: Any) -> dict | None:
    """The plain-valued attrs of an op (e.g. the 3.0 of ``h * 3.0``, a dim, a reduction), or None when none."""
    if not attrs:
        return None
    out = {k: v for k, v in attrs.items() if _plain(v)}
    return out or None


def _same(a: Any, b: Any) -> bool:
    if type(a) in (tuple, list) and type(b) is type(a):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        if a == b:
            return True
    except (TypeError, ValueError):  # pragma: no cover - plain values compare
        return False
    return a != a and b != b  # both NaN


def attrs_differ(before: dict | None, after: dict | None) -> tuple | None:
    """(key, original value, recomputed value) of the first attr that differs, or None."""
    if before is after:
        return None
    before, after = before or {}, after or {}
    for key in (*before, *(k for k in after if k not in before)):
        a, b = before.get(key, _MISSING), after.get(key, _MISSING)
        if a is _MISSING or b is _MISSING or not _same(a, b):
            return key, a, b
    return None


def fmt_attr(v: Any) -> str:
    return "<not a Python scalar>" if v is _MISSING else repr(v)


def close(a: float, b: float, dtype: Any) -> bool:
    if a == b or (a != a and b != b):  # equal, or both NaN
        return True
    kind = getattr(dtype, "kind", "f")
    if kind not in "fc":
        return False
    tol = 1e-12 if getattr(dtype, "itemsize", 4) >= 8 else 1e-5
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def fmt_shapes(shapes: tuple) -> str:
    return ", ".join(str(s) for s in shapes) or "()"
