"""RMSprop (optionally centered, with momentum): PyTorch's update, step for step.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> p = Parameter(Tensor.from_slice([1.0], [1], dtype="float64"))
>>> opt = RMSprop([p], lr=0.01)
>>> (p * p).sum().backward(); opt.step(); round(p.item(), 6)  # 1 - 0.01 * 2 / sqrt(0.01 * 4)
0.9
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.device import xp_of
from .optimizer import Optimizer, ends_with_add_update


class RMSprop(Optimizer):
    """s ← αs + (1−α)g²; d = √(s − ḡ²) (centered) or √s, plus ε; b ← μb + g/d; p ← p − lr·b (or lr·g/d)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 maximize: bool = False) -> None:
        if lr < 0:
            raise ValueError(f"RMSprop: invalid learning rate {lr}")
        if eps < 0 or alpha < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"RMSprop: eps, alpha, momentum and weight_decay must be >= 0, got {eps}, {alpha}, "
                             f"{momentum}, {weight_decay}")
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                  "momentum": momentum, "centered": centered, "maximize": maximize})

    exposes_updates = True

    @ends_with_add_update
    def _update(self, param: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> Any:
        xp = xp_of(param)
        if group["maximize"]:
            grad = -grad
        alpha, eps, wd, momentum = group["alpha"], group["eps"], group["weight_decay"], group["momentum"]
        if not state:
            state["step"] = 0
            state["square_avg"] = xp.zeros_like(param)
            if momentum > 0:
                state["momentum_buffer"] = xp.zeros_like(param)
            if group["centered"]:
                state["grad_avg"] = xp.zeros_like(param)
        state["step"] += 1
        if wd != 0:
            grad = grad + wd * param
        sq = state["square_avg"]
        sq *= alpha
        sq += (1 - alpha) * (grad * grad)
        if group["centered"]:
            ga = state["grad_avg"]
            ga += (1 - alpha) * (grad - ga)  # torch's lerp_(grad, 1 - α)
            avg = xp.sqrt(sq - ga * ga)
        else:
            avg = xp.sqrt(sq)
        avg += eps
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf *= momentum
            buf += grad / avg
            u = buf * -group["lr"]
        else:
            u = grad / avg
            u *= -group["lr"]
        # p − lr·x as p + (−lr)·x: the same floats (negation is exact), and the update is kept for watchers
        self._add_update(param, u)
        return u
