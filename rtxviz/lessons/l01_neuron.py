"""Lesson 1: micrograd's neuron, o = tanh(x1*w1 + x2*w2 + b), streamed as one step."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable


def leaf(value: float, name: str) -> Variable:
    v = Variable.from_tensor(Tensor(np.array([value])), name=name)
    v.requires_grad = True
    return v


def body(run: Any) -> None:
    with run.step(0):
        x1, x2, w1, w2 = leaf(2.0, "x1"), leaf(0.0, "x2"), leaf(-3.0, "w1"), leaf(1.0, "w2")
        b = leaf(6.8813735870195432, "b")
        o = (x1 * w1 + x2 * w2 + b).tanh()
        o.sum().backward()
