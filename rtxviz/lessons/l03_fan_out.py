"""Lesson 3: b = a + a, and a used by two ops (a * a + a)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable


def body(run: Any) -> None:
    with run.step(0):
        a = Variable.from_tensor(Tensor(np.array([3.0])), name="a")
        a.requires_grad = True
        (a + a).sum().backward()
