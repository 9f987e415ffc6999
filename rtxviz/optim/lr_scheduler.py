"""Learning-rate schedulers with PyTorch's epoch counting: LambdaLR, MultiplicativeLR, StepLR, MultiStepLR,
ConstantLR, LinearLR, ExponentialLR, PolynomialLR, CosineAnnealingLR (here), and SequentialLR, ChainedScheduler,
OneCycleLR, CyclicLR, CosineAnnealingWarmRestarts and ReduceLROnPlateau (their own modules), all importable from
here as from `torch.optim.lr_scheduler`.

Call `scheduler.step()` once per epoch, after `optimizer.step()`. Creating a scheduler sets each group's
"initial_lr" and counts as epoch 0 (`scheduler_base.py`). The values follow PyTorch's recursive (chainable)
formulas, so they agree with it step for step; `step(epoch)` uses the closed forms.

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
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
>>> warmup = LinearLR(opt, start_factor=0.25, total_iters=3)
>>> decay = ExponentialLR(opt, gamma=0.5)
>>> sched = SequentialLR(opt, [warmup, decay], milestones=[3])
>>> lrs = []
>>> for _ in range(6):
...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
>>> lrs
[0.25, 0.5, 0.75, 1.0, 0.5, 0.25]
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .chained import ChainedScheduler
from .cyclic import CyclicLR
from .one_cycle import OneCycleLR
from .optimizer import Optimizer
from .plateau import ReduceLROnPlateau
from .scheduler_base import LRScheduler, check_optimizer, per_group
from .sequential import SequentialLR
from .warm_restarts import CosineAnnealingWarmRestarts

__all__ = ["ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "OneCycleLR",
           "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR"]


def _current(optimizer: Optimizer) -> list[float]:
    return [g["lr"] for g in optimizer.param_groups]


class LambdaLR(LRScheduler):
    """lr = base_lr · lr_lambda(epoch); one function for all groups or a list, one per group.

    `state_dict()` keeps, as PyTorch's, the attributes of callable objects (None for plain functions).
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas: list[Callable[[int], float]] = _lambdas("LambdaLR", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        return _lambda_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _load_lambda_state(self, state)


def _lambda_state(sched: Any) -> dict[str, Any]:
    """A LambdaLR/MultiplicativeLR state: callable objects' attributes kept, plain functions as None."""
    state = {k: v for k, v in sched.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
    state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                           for fn in sched.lr_lambdas]
    return state


def _load_lambda_state(sched: Any, state: dict[str, Any]) -> None:
    state = dict(state)
    lambdas = state.pop("lr_lambdas")
    sched.__dict__.update(state)
    for fn, saved in zip(sched.lr_lambdas, lambdas, strict=True):
        if saved is not None:
            fn.__dict__.update(saved)


def _lambdas(name: str, optimizer: Optimizer, lr_lambda: Any) -> list[Callable[[int], float]]:
    """One callable per parameter group (one given for all, or a list as long as param_groups)."""
    check_optimizer(name, optimizer)  # before per_group reads its param_groups
    lambdas = list(per_group(name, "lr_lambda", optimizer, lr_lambda))
    for i, fn in enumerate(lambdas):
        if not callable(fn):
            raise TypeError(f"{name}: lr_lambda {i} should be a function, got {type(fn).__name__}")
    return lambdas


class MultiplicativeLR(LRScheduler):
    """lr ← lr · lr_lambda(epoch) at every step after the first (the factor multiplies the current lr, unlike
    LambdaLR's, which multiplies base_lr). `state_dict()` keeps callable objects' attributes, as LambdaLR's.

    >>> from rtxviz import Tensor
    >>> from rtxviz.nn import Parameter
    >>> from rtxviz.optim import SGD
    >>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
    >>> sched = MultiplicativeLR(opt, lr_lambda=lambda epoch: 0.5)
    >>> sched.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas("MultiplicativeLR", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:  # construction (or resuming) keeps the lr as it is
            return _current(self.optimizer)
        return [g["lr"] * fn(self.last_epoch)
                for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        return _lambda_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _load_lambda_state(self, state)


class StepLR(LRScheduler):
    """lr = base_lr · γ^⌊epoch / step_size⌋ (PyTorch's chainable form: multiply by γ every step_size epochs)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _current(self.optimizer)
        return [lr * self.gamma for lr in _current(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr · γ^(number of milestones reached); a milestone listed twice counts twice."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(int(m) for m in milestones)
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return _current(self.optimizer)
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in _current(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr · γ^epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:  # resuming must not advance the lr one epoch
            return _current(self.optimizer)
        return [lr * self.gamma for lr in _current(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base_lr · factor for the first `total_iters` epochs, then base_lr (PyTorch's chainable form: multiply
    by factor at epoch 0, divide by it at epoch total_iters).

    >>> from rtxviz import Tensor
    >>> from rtxviz.nn import Parameter
    >>> from rtxviz.optim import SGD
    >>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
    >>> sched = ConstantLR(opt, factor=0.5, total_iters=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
    >>> lrs
    [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        # PyTorch accepts factor 0 and then divides by it at total_iters: refuse it here, with the range
        if not 0 < factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in (0, 1], got {factor}")
        if total_iters < 0:
            raise ValueError(f"ConstantLR: total_iters must be >= 0, got {total_iters}")
        self.factor, self.total_iters = factor, int(total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = _current(self.optimizer)
        if self.last_epoch == 0:
            return [lr * self.factor for lr in lrs]
        if self.last_epoch != self.total_iters:
            return lrs
        return [lr * (1.0 / self.factor) for lr in lrs]

    def _get_closed_form_lr(self) -> list[float]:
        reached = self.last_epoch >= self.total_iters
        return [base * (self.factor + reached * (1 - self.factor)) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr · (1 − min(epoch, total_iters) / total_iters)^power: a polynomial decay to 0 at
    `total_iters`, then constant (PyTorch's chainable form step by step).

    >>> from rtxviz import Tensor
    >>> from rtxviz.nn import Parameter
    >>> from rtxviz.optim import SGD
    >>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
    >>> sched = PolynomialLR(opt, total_iters=4, power=2.0)
    >>> lrs = []
    >>> for _ in range(6):
    ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
    >>> lrs
    [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
                 ) -> None:
        if total_iters <= 0:  # PyTorch would divide by zero at the first step
            raise ValueError(f"PolynomialLR: total_iters must be positive, got {total_iters}")
        self.total_iters, self.power = int(total_iters), power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current(self.optimizer)
        e, t = self.last_epoch, self.total_iters
        decay = ((1.0 - e / t) / (1.0 - (e - 1) / t)) ** self.power
        return [lr * decay for lr in _current(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * left**self.power for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = base_lr · (start_factor + (end_factor − start_factor) · min(epoch, total_iters) / total_iters): a
    linear warm-up (or decay) over `total_iters` epochs, then constant."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        if total_iters <= 0:
            raise ValueError(f"LinearLR: total_iters must be positive, got {total_iters}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, int(total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        lrs = _current(self.optimizer)
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self._is_initial or self.last_epoch > self.total_iters:
            return lrs
        span = self.end_factor - self.start_factor
        factor = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [lr * factor for lr in lrs]

    def _get_closed_form_lr(self) -> list[float]:
        span = self.end_factor - self.start_factor
        return [base * (self.start_factor + span * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = η_min + (base_lr − η_min) · (1 + cos(π · epoch / T_max)) / 2, computed with PyTorch's recursive
    (chainable) formula so the numbers agree with it step for step (past T_max it rises again)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups, e, t, eta = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return _current(self.optimizer)
        if self._step_count == 1 and e > 0:  # the first step after resuming: the closed form
            return [eta + (base - eta) * (1 + math.cos(e * math.pi / t)) / 2 for base in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [g["lr"] + (base - eta) * (1 - math.cos(math.pi / t)) / 2
                    for base, g in zip(self.base_lrs, groups, strict=True)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t)) * (g["lr"] - eta) + eta
                for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]

