"""Lesson 4: a (2, 3) + (3,) add; b's gradient is the column sums of what reached the add."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable


def body(run: Any) -> None:
    with run.step(0):
        x = Variable.from_tensor(Tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])), name="x")
        b = Variable.from_tensor(Tensor(np.array([0.1, 0.2, 0.3])), name="b")
        b.requires_grad = True
        ((x + b) * x).sum().backward()
