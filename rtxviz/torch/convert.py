"""PyTorch values as the schema writes them: dtype and device names, gradient summaries through rtxviz.summary.

Summaries run on a NumPy view of the tensor (no copy on the CPU for float32/float64), so a PyTorch gradient gets
the same one-pass statistics, from the same code, as an rtxviz gradient.

>>> import torch
>>> s = stats_of(torch.tensor([3.0, 4.0]))
>>> s["norm"], s["shape"]
(5.0, [2])
>>> dtype_name(torch.float16), combine([stats_of(torch.tensor([3.0])), stats_of(torch.tensor([4.0]))])["norm"]
('float16', 5.0)
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..summary import tensor_stats

_NUMPY_FLOATS = (torch.float32, torch.float64)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``float32`` (the names rtxviz runs use)."""
    return str(dtype).removeprefix("torch.")


def as_numpy(t: torch.Tensor) -> Any:
    """A NumPy array with t's values: a view for CPU float32/float64, else a float64 copy (half, bfloat16, ints)."""
    with torch._C.DisableTorchFunction():  # our own reads must not go through a watching function mode
        d = t.detach()
        if d.dtype not in _NUMPY_FLOATS:
            d = d.to(torch.float64)
        return d.cpu().numpy()


def stats_of(t: torch.Tensor, values_max_numel: int = 16) -> dict:
    """The schema's Stats of a tensor: shape, L2 norm, min, max, mean, NaN/Inf counts, small values."""
    return tensor_stats(as_numpy(t), values_max_numel)


def combine(parts: list[dict]) -> dict:
    """One Stats for several tensors read as one (a node with several outputs): the norm of them all, the
    extremes over them all, the counts summed; the shape of the first, no values or mean."""
    if len(parts) == 1:
        return parts[0]
    nan = sum(p.get("nan", 0) for p in parts)
    inf = sum(p.get("inf", 0) for p in parts)
    norms = [p["norm"] for p in parts]
    mins = [p["min"] for p in parts if p["min"] is not None]
    maxs = [p["max"] for p in parts if p["max"] is not None]
    return {"shape": parts[0]["shape"],
            "norm": None if nan or inf or None in norms else math.sqrt(sum(n * n for n in norms)),
            "min": min(mins) if mins else None, "max": max(maxs) if maxs else None, "nan": nan, "inf": inf}
