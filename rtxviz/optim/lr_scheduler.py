"""Learning-rate schedulers: StepLR and CosineAnnealingLR, with PyTorch's epoch counting.

Call `scheduler.step()` once per epoch, after `optimizer.step()`. Creating a scheduler sets each group's
"initial_lr" and counts as epoch 0.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
>>> sched = StepLR(opt, step_size=2, gamma=0.5)
>>> lrs = []
>>> for _ in range(5):
...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
>>> lrs
[1.0, 1.0, 0.5, 0.5, 0.25]
"""

from __future__ import annotations

import math
from typing import Any

from .optimizer import Optimizer


class LRScheduler:
    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"{type(self).__name__}: resuming (last_epoch={last_epoch}) needs 'initial_lr' "
                               "in every parameter group")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = []
        self.step()

    def get_lr(self) -> list[float]:
        """The learning rates for epoch `self.last_epoch`."""
        raise NotImplementedError

    def step(self) -> None:
        self.last_epoch += 1
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class StepLR(LRScheduler):
    """lr = base_lr · γ^⌊epoch / step_size⌋ (PyTorch's chainable form: multiply by γ every step_size epochs)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]


class CosineAnnealingLR(LRScheduler):
    """lr = η_min + (base_lr − η_min) · (1 + cos(π · epoch / T_max)) / 2, computed with PyTorch's recursive
    (chainable) formula so the numbers agree with it step for step."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups, e, t, eta = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return [g["lr"] for g in groups]
        if (e - 1 - t) % (2 * t) == 0:
            return [g["lr"] + (base - eta) * (1 - math.cos(math.pi / t)) / 2
                    for base, g in zip(self.base_lrs, groups, strict=True)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t)) * (g["lr"] - eta) + eta
                for g in groups]
