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

from .engine import *  # noqa: F403
from .engine import __all__ as _engine_all
from .engine.dtypes import float32, float64, int64

__version__ = "0.1.0"
__all__ = [*_engine_all, "float32", "float64", "int64"]
