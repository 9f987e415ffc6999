"""NAdam (Adam with Nesterov momentum and a momentum schedule): PyTorch's update, step for step.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> p = Parameter(Tensor.from_slice([1.0], [1], dtype="float64"))
>>> opt = NAdam([p], lr=0.1)
>>> (p * p).sum().backward(); opt.step()
>>> sorted(opt.state_dict()["state"][0])
['exp_avg', 'exp_avg_sq', 'mu_product', 'step']
>>> 0.85 < p.item() < 0.95  # about lr below 1 on the first step, as Adam
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.device import xp_of
from .adam import _check
from .optimizer import Optimizer, ends_with_add_update


class NAdam(Optimizer):
    """μₜ = β₁(1 − ½·0.96^(t·ψ)) (ψ: momentum_decay); m, v as Adam; with Πμ the product of μ₁..μₜ:
    p ← p − lr·(1−μₜ)/(1−Πμ) · g/d − lr·μₜ₊₁/(1−Πμ·μₜ₊₁) · m/d, d = √(v/(1−β₂ᵗ)) + ε.

    weight_decay is L2 (added to the gradient) unless `decoupled_weight_decay` (then p ← p·(1 − lr·wd) first,
    as AdamW).
    """

    exposes_updates = True

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, maximize: bool = False) -> None:
        _check("NAdam", lr, betas, eps, weight_decay)
        if not momentum_decay >= 0:
            raise ValueError(f"NAdam: invalid momentum_decay {momentum_decay} (must be >= 0)")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "momentum_decay": momentum_decay,
                                  "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize})

    def _exposes_updates(self) -> bool:
        # decoupled decay also scales the parameter: the update is then more than the array `_update` returns
        return not any(g["decoupled_weight_decay"] and g["weight_decay"] != 0 for g in self.param_groups)

    @ends_with_add_update
    def _update(self, param: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> Any:
        xp = xp_of(param)
        if group["maximize"]:
            grad = -grad
        lr, wd, eps, psi = group["lr"], group["weight_decay"], group["eps"], group["momentum_decay"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["mu_product"] = 1.0
            state["exp_avg"] = xp.zeros_like(param)
            state["exp_avg_sq"] = xp.zeros_like(param)
        state["step"] += 1
        step = state["step"]
        if wd != 0:
            if group["decoupled_weight_decay"]:
                param *= 1 - lr * wd
            else:
                grad = grad + wd * param
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * psi))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
        mu_product = state["mu_product"] = float(state["mu_product"]) * mu
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += (1 - beta1) * (grad - m)  # torch's lerp_(grad, 1 − β₁)
        v *= beta2
        v += (1 - beta2) * (grad * grad)
        denom = xp.sqrt(v / (1 - beta2**step))
        denom += eps
        u = grad / denom
        u *= -lr * (1.0 - mu) / (1.0 - mu_product)
        u += (-lr * mu_next / (1.0 - mu_product * mu_next)) * (m / denom)
        self._add_update(param, u)
        return u
