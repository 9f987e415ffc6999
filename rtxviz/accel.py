"""The optional compiled kernels of `rtxviz/_native.c`, or None for each when the module was not built (no C
compiler at install) or when the environment variable ``RTXVIZ_NO_NATIVE=1`` asks for the numpy paths.

    summary(x)           -> (sum of squares, sum, min, max) in one pass   (rtxviz.summary)
    stats(x, k)          -> summary's pass as tensor_stats' finite dict, or None (rtxviz.summary.tensor_stats)
    all_finite(x)        -> no NaN/Inf in x, one pass                     (rtxviz.summary.count_nonfinite)
    saved_entries(...)   -> a node event's `saved` list, in one call    (rtxviz.events.hook.EventHook._saved)
    add_measured(p, u)   -> p += u, and (‖p‖², ‖u‖²) from the same pass  (rtxviz.optim)
    sgd_plain(ps, gs, s) -> p += g·s for every pair, one call; the indices of pairs it left to numpy (SGD)
    tanh_grad(g, y, out) -> out = g·(1 − y²) in one pass, True; False when it cannot take them (TanhGrad)
    add_row(x, b)        -> x += b for b of x's last length, True; False untouched (Linear's bias)
    sum_rows(x, out)     -> out = x.sum(axis=0) in numpy's row order for x [n, m >= 2], True; else False (Sum)
    lstm_forward_step / lstm_backward_step   one time step of an LSTM layer's element-wise work, float32
                                             (rtxviz.engine.ops.nn_recurrent; the matmuls stay numpy's)
    max_pool2d_forward / max_pool2d_scatter  max pooling's window maximum and its gradient, one pass each
                                             (rtxviz.engine.ops.nn_pool)
    col2im_wide          a stride-1 convolution's input gradient from its columns, one pass (nn_conv)

>>> import numpy as np
>>> from rtxviz import accel
>>> accel.summary is None or accel.summary(np.array([3.0, -4.0])) == (25.0, -1.0, -4.0, 3.0)
True
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["add_measured", "add_row", "all_finite", "col2im_wide", "lstm_backward_step", "lstm_forward_step",
           "max_pool2d_forward", "max_pool2d_scatter", "saved_entries", "sgd_plain", "stats", "sum_rows", "summary",
           "tanh_grad"]

summary: Any = None
all_finite: Any = None
stats: Any = None
saved_entries: Any = None
add_measured: Any = None
lstm_forward_step: Any = None
lstm_backward_step: Any = None
max_pool2d_forward: Any = None
max_pool2d_scatter: Any = None
col2im_wide: Any = None
sgd_plain: Any = None
tanh_grad: Any = None
add_row: Any = None
sum_rows: Any = None

if os.environ.get("RTXVIZ_NO_NATIVE") != "1":
    try:
        _native: Any = importlib.import_module("._native", __package__)  # compiled when a C compiler was there
    except ImportError:  # built without a C compiler, or a source tree never built: numpy does the work
        pass
    else:
        summary, add_measured = _native.summary, _native.add_measured
        # a module built before the LSTM kernels were added has only the first two
        lstm_forward_step = getattr(_native, "lstm_forward_step", None)
        lstm_backward_step = getattr(_native, "lstm_backward_step", None)
        max_pool2d_forward = getattr(_native, "max_pool2d_forward", None)
        max_pool2d_scatter = getattr(_native, "max_pool2d_scatter", None)
        col2im_wide = getattr(_native, "col2im_wide", None)
        sgd_plain = getattr(_native, "sgd_plain", None)
        tanh_grad = getattr(_native, "tanh_grad", None)
        add_row = getattr(_native, "add_row", None)
        sum_rows = getattr(_native, "sum_rows", None)
        all_finite = getattr(_native, "all_finite", None)
        stats = getattr(_native, "stats", None)
        saved_entries = getattr(_native, "saved_entries", None)
