"""Lesson 10: a checkpointed tanh-mul-exp segment between two ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable, checkpoint


def segment(h: Any) -> Any:
    return (h.tanh() * h).exp()


def body(run: Any) -> None:
    with run.step(0):
        x = Variable.from_tensor(Tensor(np.array([0.5, -0.25, 1.0])), name="x")
        x.requires_grad = True
        h = x * 2.0
        (checkpoint(segment, h) * 3.0).sum().backward()
