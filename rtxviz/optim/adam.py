"""Adam and AdamW (decoupled weight decay), with amsgrad: PyTorch's update, step for step.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> p = Parameter(Tensor.from_slice([1.0], [1], dtype="float64"))
>>> opt = Adam([p], lr=0.1)
>>> (p * p).sum().backward(); opt.step(); round(p.item(), 6)  # the first step moves by lr
0.9
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.device import xp_of
from .optimizer import Optimizer, ends_with_add_update


def _check(name: str, lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """The checks PyTorch makes of the Adam family's arguments (`not x >= 0` also refuses NaN)."""
    if not lr >= 0:
        raise ValueError(f"{name}: invalid learning rate {lr} (must be >= 0)")
    if not eps >= 0:
        raise ValueError(f"{name}: invalid eps {eps} (must be >= 0)")
    if len(betas) != 2 or not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
        raise ValueError(f"{name}: betas must be two numbers in [0, 1), got {tuple(betas)}")
    if not weight_decay >= 0:
        raise ValueError(f"{name}: invalid weight_decay {weight_decay} (must be >= 0)")


class Adam(Optimizer):
    """m ← β₁m + (1−β₁)g; v ← β₂v + (1−β₂)g²; p ← p − lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε).

    weight_decay here is L2 (added to the gradient), unless `decoupled_weight_decay` (PyTorch's keyword; then
    p ← p·(1 − lr·wd) first, which is AdamW).
    """

    exposes_updates = True

    def _exposes_updates(self) -> bool:
        # decoupled decay also scales the parameter: the update is then more than the array `_update` returns
        return not any(g["decoupled_weight_decay"] and g["weight_decay"] != 0 for g in self.param_groups)

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False,
                 *, decoupled_weight_decay: bool = False) -> None:
        _check(type(self).__name__, lr, betas, eps, weight_decay)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": amsgrad, "maximize": maximize,
                                  "decoupled_weight_decay": decoupled_weight_decay})

    @ends_with_add_update
    def _update(self, param: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> Any:
        xp = xp_of(param)
        if group["maximize"]:
            grad = -grad
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = xp.zeros_like(param)
            state["exp_avg_sq"] = xp.zeros_like(param)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = xp.zeros_like(param)
        state["step"] += 1
        step = state["step"]
        if wd != 0:
            if group["decoupled_weight_decay"]:
                param *= 1 - lr * wd
            else:
                grad = grad + wd * param
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += (1 - beta1) * (grad - m)  # torch's lerp_(grad, 1 - β₁) for weights below 0.5
        v *= beta2
        v += (1 - beta2) * (grad * grad)
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        step_size = lr / bias_correction1
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            xp.maximum(vmax, v, out=vmax)
            denom = xp.sqrt(vmax)
        else:
            denom = xp.sqrt(v)
        denom /= bias_correction2_sqrt
        denom += eps
        # param − step_size·(m/denom), as p + (−step_size)·(m/denom): the same floats (negation is exact), and
        # the update array is kept for watchers
        u = m / denom
        u *= -step_size
        self._add_update(param, u)
        return u


class AdamW(Adam):
    """Adam with decoupled weight decay: p ← p·(1 − lr·wd) before the Adam step (default wd 0.01)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=True)
