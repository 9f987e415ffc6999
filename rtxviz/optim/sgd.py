"""SGD with momentum, dampening, Nesterov and weight decay: PyTorch's update, step for step.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> p = Parameter(Tensor.from_slice([1.0], [1]))
>>> opt = SGD([p], lr=0.1)
>>> (p * p).sum().backward(); opt.step(); p.tolist()
[0.800000011920929]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.device import xp_of
from .optimizer import Optimizer, ends_with_add_update


class SGD(Optimizer):
    """g ← grad + wd·p; b ← μ·b + (1−τ)·g (b₁ = g); g ← g + μ·b (Nesterov) or b; p ← p − lr·g."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False) -> None:
        if lr < 0:
            raise ValueError(f"SGD: invalid learning rate {lr}")
        if momentum < 0:
            raise ValueError(f"SGD: invalid momentum {momentum}")
        if weight_decay < 0:
            raise ValueError(f"SGD: invalid weight_decay {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum > 0 and zero dampening")
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize})
        self._scratch: dict[int, Any] = {}

    exposes_updates = True

    @ends_with_add_update
    def _update(self, param: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> Any:
        d_p = -grad if group["maximize"] else grad
        wd = group["weight_decay"]
        if wd != 0:
            d_p = d_p + wd * param
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d_p.copy()
            else:
                buf *= momentum
                dampening = group["dampening"]
                if dampening != 0:
                    buf += (1 - dampening) * d_p
                else:
                    buf += d_p
            d_p = d_p + momentum * buf if group["nesterov"] else buf
        # param + (-lr)·d_p as PyTorch's add_(alpha=-lr), through a kept scratch array: a fresh temporary
        # of a large parameter costs page faults on every step.
        scratch = self._scratch.get(id(param))
        if scratch is None or scratch.shape != param.shape or scratch.dtype != param.dtype:
            scratch = self._scratch[id(param)] = xp_of(param).empty_like(param)
        xp_of(param).multiply(d_p, -group["lr"], out=scratch)
        self._add_update(param, scratch)
        return scratch  # the update (overwritten by the next step)
