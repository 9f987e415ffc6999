"""Lesson 8: the gradient of sum(x**3) recorded as a graph, then differentiated again (6x)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable, grad


def body(run: Any) -> None:
    with run.step(0):
        x = Variable.from_tensor(Tensor(np.array([1.0, 2.0])), name="x")
        x.requires_grad = True
        (g,) = grad((x * x * x).sum(), x, create_graph=True)
        g.sum().backward()
