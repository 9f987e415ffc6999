"""Lesson 5: the loss -log_softmax(z)[k] for 4 logits, k = 2."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable


def body(run: Any) -> None:
    with run.step(0):
        z = Variable.from_tensor(Tensor(np.array([1.0, 2.0, 0.5, -1.0])), name="logits")
        z.requires_grad = True
        onehot = Tensor(np.array([0.0, 0.0, 1.0, 0.0]))
        (-(z.log_softmax(0) * onehot).sum()).backward()
