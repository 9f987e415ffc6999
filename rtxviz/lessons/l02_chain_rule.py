"""Lesson 2: a chain of three ops, exp(tanh(x)) * 3, on a small vector."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable


def body(run: Any) -> None:
    with run.step(0):
        x = Variable.from_tensor(Tensor(np.array([0.5, -1.0])), name="x")
        x.requires_grad = True
        ((x.tanh().exp()) * 3.0).sum().backward()
