"""Lesson 11: a small step run through the graph cache: recorded in step 0, replayed in steps 1 and 2."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Tensor, Variable, init_graph_cache, run_cached


def body(run: Any) -> None:
    init_graph_cache(16)
    w = Variable.from_tensor(Tensor(np.array([0.5, -0.5, 1.0])), name="w")
    w.requires_grad = True

    def train_step(x: Any) -> Any:
        loss = ((x * w).tanh()).sum()
        loss.backward()
        return loss

    for step in range(3):
        with run.step(step):
            w.grad = None
            run_cached(train_step, Tensor(np.array([1.0, 2.0, 3.0]) * (step + 1)), params=[w])
