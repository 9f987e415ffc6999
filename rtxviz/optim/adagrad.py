"""Adagrad: PyTorch's update, step for step (lr decay, L2 weight decay, an initial accumulator).

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> p = Parameter(Tensor.from_slice([1.0], [1], dtype="float64"))
>>> opt = Adagrad([p], lr=0.1)
>>> sorted(opt.state_dict()["state"][0])  # the state exists from the start, as PyTorch's
['step', 'sum']
>>> (p * p).sum().backward(); opt.step(); round(p.item(), 6)  # 1 - 0.1 * 2 / sqrt(4)
0.9
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.device import xp_of
from .optimizer import Optimizer, ends_with_add_update


class Adagrad(Optimizer):
    """s ← s + g²; p ← p − lr/(1 + (t−1)·lr_decay) · g / (√s + ε), g including wd·p (L2 decay).

    `initial_accumulator_value` starts s; the state ("step", "sum") is made for every parameter at
    construction, as PyTorch does, so `state_dict()` has it before the first step.
    """

    exposes_updates = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, maximize: bool = False) -> None:
        for what, value in (("learning rate", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value), ("eps", eps)):
            if not value >= 0:
                raise ValueError(f"Adagrad: invalid {what} {value} (must be >= 0)")
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "maximize": maximize})
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p.data, self.state.setdefault(id(p), {}), group)

    @staticmethod
    def _init_state(param: Any, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = 0
        state["sum"] = xp_of(param).full_like(param, group["initial_accumulator_value"])

    @ends_with_add_update
    def _update(self, param: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> Any:
        if not state:  # a parameter added with add_param_group after construction
            self._init_state(param, state, group)
        xp = xp_of(param)
        if group["maximize"]:
            grad = -grad
        state["step"] += 1
        wd = group["weight_decay"]
        if wd != 0:
            grad = grad + wd * param
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        s = state["sum"]
        s += grad * grad
        std = xp.sqrt(s)
        std += group["eps"]
        u = grad / std
        u *= -clr  # p + (−clr)·g/std, as torch's addcdiv_(value=−clr)
        self._add_update(param, u)
        return u
