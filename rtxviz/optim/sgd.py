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

import numpy as np

from ..accel import sgd_plain as _sgd_plain  # None: numpy's two calls per parameter
from ..engine import versions as _versions
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

    def _step(self, updates: list | None = None) -> None:
        # Plain SGD (no momentum, weight decay or maximize) in an unwatched step: p ← p + (−lr)·g in one loop,
        # without the per-parameter `_update` call and its hyperparameter lookups (on a small model those were
        # a tenth of a replayed training step). The same two IEEE operations as `_update`, so the parameters are
        # bit for bit the same; a watched step, a subclass's own `_update` and any other group take the
        # general path.
        if updates is not None or type(self)._update is not SGD._update or not self._plain():
            super()._step(updates)
            return
        states = self.state
        written: list = []  # bumped together at the end (one stamp), also when a step fails half-way
        try:
            for group in self.param_groups:
                step = -group["lr"]
                params, datas, grads = [], [], []
                for p in group["params"]:
                    g = p._grad  # the slot: `p.grad` is a property
                    if g is None:
                        continue
                    key = id(p)
                    if key not in states:
                        states[key] = {}
                    params.append(p)
                    datas.append(p.data)
                    grads.append(g.data)
                if not datas:
                    continue
                if _sgd_plain is not None and type(step) is float:
                    # one compiled call for the whole group: the same two IEEE operations per element as the
                    # numpy loop below, for every pair of one float format and shape (tests/nn/test_optim.py
                    # compares both bit for bit); it hands back the pairs it did not take (a cast, a broadcast,
                    # a device array, overlapping buffers)
                    left = _sgd_plain(datas, grads, step)
                    if not left:
                        written += datas
                        continue
                    taken = set(range(len(datas))).difference(left)
                    written += [datas[i] for i in taken]
                else:
                    left = range(len(datas))
                steps: dict = {}
                for i in left:
                    self._plain_numpy(params[i], datas[i], grads[i], step, steps)
                    written.append(datas[i])
        finally:
            _versions.bump_all(written, self._site)  # a graph that saved these parameters must not use them now

    def _plain_numpy(self, p: Any, data: Any, grad: Any, step: float, steps: dict) -> None:
        """p ← p + step·g with numpy (or cupy): the product into a kept scratch array, then added in place."""
        if grad.dtype is not data.dtype and grad.dtype != data.dtype:
            grad = grad.astype(data.dtype)
        key = id(p)
        scratch = self._scratch.get(key)
        if scratch is None or scratch.shape != data.shape or scratch.dtype != data.dtype:
            scratch = self._scratch[key] = xp_of(data).empty_like(data)
        if type(data) is np.ndarray:
            # numpy's ufuncs take a 0-d array of the parameter's dtype for about half of what a Python float
            # costs them; the float rounds to that dtype either way, so the product is the same
            factor = steps.get(data.dtype)
            if factor is None:
                factor = steps[data.dtype] = np.array(step, dtype=data.dtype)
            np.multiply(grad, factor, out=scratch)
        else:
            xp_of(data).multiply(grad, step, out=scratch)
        data += scratch

    def _plain(self) -> bool:
        """No group uses momentum, weight decay or maximize: the one-loop update applies."""
        for g in self.param_groups:
            if g["momentum"] != 0 or g["weight_decay"] != 0 or g["maximize"]:
                return False
        return True

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
