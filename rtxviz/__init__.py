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
from .engine.dtypes import float32, float64, int64

# `watch` and `events` are attributes too (see __getattr__), left out of __all__ so that a star import does not
# load the event stream and pydantic.
__all__ = [*_engine_all, "AnomalyError", "data", "detect_anomaly", "float32", "float64", "grad_report", "int64",
           "nn", "optim", "render"]


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
