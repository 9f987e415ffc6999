"""Lesson 7: sqrt of a negative product makes the first NaN; it spreads to the loss."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable


def body(run: Any) -> None:
    with run.step(0):
        x = Variable.from_tensor(Tensor(np.array([1.0, -2.0])), name="x")
        w = Variable.from_tensor(Tensor(np.array([0.5, 1.5])), name="w")
        w.requires_grad = True
        with np.errstate(invalid="ignore"):
            ((x * w).sqrt() * 2.0).sum().backward()
