"""Lesson 3: b = a + a, summed (a = 3): a feeds both inputs of one add, so backward sends it two gradients of 1,
and a.grad = 1 + 1 = 2."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable


def body(run: Any) -> None:
    with run.step(0):
        a = Variable.from_tensor(Tensor(np.array([3.0])), name="a")
        a.requires_grad = True
        (a + a).sum().backward()
