"""Lesson 6: 30 sigmoids in a row (step 0), then residual tanh blocks of the same depth (step 1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable

DEPTH = 30


def body(run: Any) -> None:
    x = Variable.from_tensor(Tensor(np.array([0.3, -0.2, 0.5, 1.0])), name="x")
    x.requires_grad = True
    with run.step(0):
        h = x
        for _ in range(DEPTH):
            h = h.sigmoid()
        h.sum().backward()
    x.grad = None
    with run.step(1):
        h = x
        for _ in range(DEPTH):
            h = h + h.tanh() * 0.1
        h.sum().backward()
