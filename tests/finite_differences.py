"""The one finite-difference helper of the test suite: central differences on plain numpy, independent of the
engine (whose own `gradcheck` is one of the things these numbers check).

>>> import numpy as np
>>> np.round(numeric_grad(lambda v: float((v ** 2).sum()), np.array([1.0, -2.0])), 6)
array([ 2., -4.])
>>> numeric_jacobian(lambda v: np.sin(v), np.zeros(2)).round(6)
array([[1., 0.],
       [0., 1.]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def numeric_jacobian(fn: Callable[[np.ndarray], Any], x: Any, eps: float = 1e-6) -> np.ndarray:
    """d fn(x) / dx by central differences, shaped ``fn(x).shape + x.shape`` (x taken as float64)."""
    x = np.array(x, dtype=np.float64)
    y0 = np.asarray(fn(x))
    jac = np.zeros((y0.size, x.size))
    for j in range(x.size):
        step = np.zeros(x.size)
        step[j] = eps
        step = step.reshape(x.shape)
        jac[:, j] = (np.asarray(fn(x + step)) - np.asarray(fn(x - step))).ravel() / (2 * eps)
    return jac.reshape(y0.shape + x.shape)


def numeric_grad(f: Callable[[np.ndarray], Any], x: Any, eps: float = 1e-6) -> np.ndarray:
    """The gradient of the scalar f at x by central differences (x's shape)."""
    return numeric_jacobian(lambda v: np.asarray(f(v), dtype=np.float64).reshape(()), x, eps)


def numeric_grad_of(f: Callable[..., Any], arrays: Sequence[np.ndarray], i: int, eps: float = 1e-6) -> np.ndarray:
    """The gradient of the scalar ``f(*arrays)`` with respect to ``arrays[i]``, the others held fixed."""
    others = list(arrays)

    def of_i(v: np.ndarray) -> Any:
        others[i] = v
        return f(*others)

    return numeric_grad(of_i, arrays[i], eps)
