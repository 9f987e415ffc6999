"""Tensor statistics and gradient health, on raw arrays: one place for what events send, what debugging
prints and what drawings colour (engine-free: numpy, cupy when given cupy arrays, and the optional compiled
kernel).

>>> import numpy as np
>>> from rtxviz.summary import tensor_stats, grad_class
>>> s = tensor_stats(np.array([3.0, 4.0]))
>>> s["norm"], grad_class(s["norm"], s["nan"], s["inf"])
(5.0, 'ok')
"""

from __future__ import annotations

from .classes import (
    CLASSES,
    EXPLODING,
    RAMP,
    VANISHING,
    GradClass,
    GradStat,
    as_json,
    grad_class,
    ramp_colour,
    worst,
)
from .stats import count_nonfinite, describe, host, norm, tensor_stats

__all__ = [
    "CLASSES", "EXPLODING", "RAMP", "VANISHING", "GradClass", "GradStat", "as_json", "count_nonfinite", "describe",
    "grad_class", "host", "norm", "ramp_colour", "tensor_stats", "worst",
]
