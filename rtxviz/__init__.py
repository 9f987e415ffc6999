"""rtxviz: a graph-visualizing reverse-mode autograd engine on numpy and cupy.

>>> import rtxviz
>>> from rtxviz import Tensor, Variable, Device
>>> x = Variable.from_tensor(Tensor.from_slice([2.0, 3.0], [2], Device.cpu()))
>>> w = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2], Device.cpu()))
>>> z = x.multiply(w).sum()
>>> z.backward()
>>> x.grad.tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import sys
from typing import Any

from . import (  # the training kit, as torch.nn / torch.optim
    data,
    nn,
    optim,
    render,  # also gives Variables `_repr_svg_` for Jupyter; rtxviz.render(...) is callable
)
from ._version import __version__ as __version__  # written once, in _version.py
from .debug import AnomalyError, detect_anomaly, grad_report
from .engine import *  # noqa: F403
from .engine import __all__ as _engine_all
from .engine.device import Device as device
from .engine.device import cuda
from .engine.dtypes import bool_, float32, float64, int64

# PyTorch's top-level function forms (``rtxviz.exp(x)``, ``rtxviz.sum(x, dim=1)``): the op functions themselves, the
# same objects the Tensor methods are (``x.exp()`` is ``rtxviz.exp(x)``)
from .engine.ops.arithmetic import (
    add,
    atan2,
    div,
    floor_divide,
    fmod,
    hypot,
    maximum,
    minimum,
    mul,
    neg,
    pow,
    remainder,
    sub,
    true_divide,
    xlogy,
)
from .engine.ops.arithmetic import atan2 as arctan2
from .engine.ops.arithmetic import div as divide
from .engine.ops.arithmetic import mul as multiply
from .engine.ops.arithmetic import neg as negative
from .engine.ops.arithmetic import sub as subtract
from .engine.ops.broadcast import expand as broadcast_to
from .engine.ops.index import gather, index_add, logical_and, logical_not, logical_or, masked_fill, nonzero, scatter_add
from .engine.ops.linalg import addmm, baddbmm, bmm, dot, matmul, mm, mv, outer, slogdet, trace
from .engine.ops.linalg import linalg_det as det
from .engine.ops.linalg import linalg_inv as inverse
from .engine.ops.nn_norm import log_softmax, softmax
from .engine.ops.operators import all, allclose, any, eq, equal, ge, gt, isclose, isfinite, isinf, isnan, le, lt, ne
from .engine.ops.operators import and_ as bitwise_and
from .engine.ops.operators import invert as bitwise_not
from .engine.ops.operators import or_ as bitwise_or
from .engine.ops.operators import xor as bitwise_xor
from .engine.ops.reduction import (
    amax,
    amin,
    argmax,
    argmin,
    count_nonzero,
    logsumexp,
    max,
    mean,
    min,
    norm,
    prod,
    std,
    sum,
    var,
)
from .engine.ops.scan import cumprod, cumsum, logcumsumexp
from .engine.ops.shape import (
    chunk,
    concat,
    concatenate,
    diag,
    diagonal,
    flatten,
    flip,
    hstack,
    index_select,
    meshgrid,
    narrow,
    permute,
    repeat_interleave,
    reshape,
    roll,
    split,
    squeeze,
    tile,
    transpose,
    tril,
    triu,
    unbind,
    unsqueeze,
    vstack,
)
from .engine.ops.sorting import unique
from .engine.ops.unary import (
    abs,
    atan,
    ceil,
    clamp,
    clamp_max,
    clamp_min,
    cos,
    cosh,
    erf,
    exp,
    expm1,
    floor,
    frac,
    lerp,
    log,
    log1p,
    nan_to_num,
    reciprocal,
    relu,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    tan,
    tanh,
    trunc,
)
from .engine.ops.unary import atan as arctan
from .engine.ops.unary import clamp as clip
from .engine.ops.unary import round_elementwise as round
from .engine.ops.unary import trunc as fix
from .nn.serialization import load_object as load
from .nn.serialization import save_object as save

# torch.autograd's import spelling (``from rtxviz.autograd import Function``): the engine's module under this name too
sys.modules[__name__ + ".autograd"] = autograd  # noqa: F405 - from the engine's star import

# torch's dtype names (kept out of __all__: a star import must not shadow Python's float, int and bool)
float = float32
double = float64
long = int64
bool = bool_

# `watch` and `events` are attributes too (see __getattr__), left out of __all__ so that a star import does not
# load the event stream and pydantic.
__all__ = [
    *_engine_all, "AnomalyError", "data", "detect_anomaly", "float32", "float64", "grad_report", "int64", "nn",
    "optim", "render", "cuda", "device", "load", "save",
    # PyTorch's function forms (a star import shadows Python's abs, max, min, pow and sum, as torch's does)
    "abs", "add", "amax", "amin", "arctan", "arctan2", "argmax", "argmin", "atan", "atan2", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "bmm", "broadcast_to", "chunk", "clamp", "clip", "cos", "cosh",
    "cumprod", "cumsum", "det", "diagonal", "div", "divide", "erf", "exp", "expm1", "flatten", "flip", "floor_divide",
    "fmod", "gather", "hypot", "index_add", "index_select", "inverse", "log", "log1p", "log_softmax", "logcumsumexp",
    "logical_and", "logical_not", "logical_or", "logsumexp", "masked_fill", "matmul", "max", "maximum", "mean", "min",
    "minimum", "mul", "multiply", "narrow", "neg", "negative", "norm", "outer", "permute", "pow", "prod", "reciprocal",
    "relu", "remainder", "reshape", "roll", "scatter_add", "sigmoid", "sin", "sinh", "slogdet", "softmax", "split",
    "sqrt", "square", "squeeze", "std", "sub", "subtract", "sum", "tan", "tanh", "trace", "transpose", "tril", "triu",
    "true_divide", "unsqueeze", "var", "xlogy",
    # from ported PyTorch scripts
    "all", "allclose", "any", "eq", "equal", "ge", "gt", "isclose", "isfinite", "isinf", "isnan", "le", "lt", "ne",
    "unbind",
    "addmm", "baddbmm", "ceil", "clamp_max", "clamp_min", "concat", "concatenate", "count_nonzero", "diag", "dot",
    "fix", "floor", "frac", "hstack", "lerp", "meshgrid", "mm", "mv", "nan_to_num", "nonzero", "repeat_interleave",
    "round", "rsqrt", "sign", "tile", "trunc", "unique", "vstack",
]


def __getattr__(name: str) -> Any:
    # The event stream pulls in pydantic: load it only when asked for (rtxviz.watch, rtxviz.events).
    # rtxviz.watch is the notebook's (rtxviz.notebook.api): the emitter's watch, plus `notebook=True`.
    if name in ("watch", "events", "notebook"):
        import importlib

        if name == "events":
            return importlib.import_module(".events", __name__)
        notebook = importlib.import_module(".notebook", __name__)
        return notebook.watch if name == "watch" else notebook
    raise AttributeError(f"module 'rtxviz' has no attribute {name!r}")
