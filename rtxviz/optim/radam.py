"""RAdam (Adam with a rectified, warm-up-free variance estimate): PyTorch's update, step for step.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> p = Parameter(Tensor.from_slice([1.0], [1], dtype="float64"))
>>> opt = RAdam([p], lr=0.1)
>>> (p * p).sum().backward(); opt.step(); round(p.item(), 6)  # early steps are SGD with momentum: 1 - 0.1 * 2
0.8
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.device import xp_of
from .adam import _check
from .optimizer import Optimizer, ends_with_add_update


class RAdam(Optimizer):
    """m, v as Adam; ρ∞ = 2/(1−β₂) − 1, ρₜ = ρ∞ − 2tβ₂ᵗ/(1−β₂ᵗ). While ρₜ ≤ 5: p ← p − lr·m̂ (m̂ = m/(1−β₁ᵗ));
    after: p ← p − lr·m̂·r·√(1−β₂ᵗ)/(√v + ε), r = √((ρₜ−4)(ρₜ−2)ρ∞ / ((ρ∞−4)(ρ∞−2)ρₜ)).

    weight_decay is L2 unless `decoupled_weight_decay` (then p ← p·(1 − lr·wd) first, as AdamW).
    """

    exposes_updates = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decoupled_weight_decay: bool = False,
                 maximize: bool = False) -> None:
        _check("RAdam", lr, betas, eps, weight_decay)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize})

    def _exposes_updates(self) -> bool:
        # decoupled decay also scales the parameter: the update is then more than the array `_update` returns
        return not any(g["decoupled_weight_decay"] and g["weight_decay"] != 0 for g in self.param_groups)

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
        state["step"] += 1
        step = state["step"]
        if wd != 0:
            if group["decoupled_weight_decay"]:
                param *= 1 - lr * wd
            else:
                grad = grad + wd * param
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += (1 - beta1) * (grad - m)  # torch's lerp_(grad, 1 − β₁)
        v *= beta2
        v += (1 - beta2) * (grad * grad)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        u = m / bias_correction1
        u *= lr
        if rho_t > 5.0:  # the variance estimate is tractable: rectify
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            root = xp.sqrt(v)
            root += eps
            u *= bias_correction2**0.5 / root
            u *= rect
        u *= -1.0
        self._add_update(param, u)
        return u
