"""OneCycleLR: the 1cycle policy (warm up to max_lr, anneal far below the start), PyTorch's schedule exactly.

Stepped once per batch, `total_steps` times (or `epochs · steps_per_epoch`). With `cycle_momentum` the
momentum (SGD's "momentum", or β₁ of an optimizer with "betas", such as Adam) moves the opposite way.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=0.1, momentum=0.9)
>>> sched = OneCycleLR(opt, max_lr=1.0, total_steps=10, anneal_strategy="linear")
>>> lrs = []
>>> for _ in range(10):
...     lrs.append(round(sched.get_last_lr()[0], 4)); opt.step(); sched.step()
>>> lrs[:4], lrs[-1]  # 1/25 up to 1 at step 2 (pct_start 0.3), then down to 1/25e4
([0.04, 0.52, 1.0, 0.8571], 0.0)
"""

from __future__ import annotations

import math
from typing import Any

from .optimizer import Optimizer
from .scheduler_base import LRScheduler, check_optimizer, per_group


def _anneal_cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _anneal_linear(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start


class OneCycleLR(LRScheduler):
    """Phases (by step): initial_lr = max_lr/div_factor → max_lr over pct_start of the steps, then → min_lr =
    initial_lr/final_div_factor; with `three_phase`, max_lr → initial_lr over as many steps again, and only
    then → min_lr. Momentum goes max_momentum → base_momentum → max_momentum meanwhile.

    Each group gains "initial_lr", "max_lr", "min_lr" (and "max_momentum", "base_momentum"), as in PyTorch.
    Stepping past `total_steps` raises.
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float], total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85, max_momentum: float | list[float] = 0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        check_optimizer("OneCycleLR", optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"OneCycleLR: total_steps must be a positive integer, got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            for what, v in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if not isinstance(v, int) or v <= 0:
                    raise ValueError(f"OneCycleLR: {what} must be a positive integer, got {v}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self._anneal_func_type = anneal_strategy
        up_end = float(pct_start * self.total_steps) - 1
        # each phase: where it ends, and the group keys of its start and end lr and momentum
        self._schedule_phases: list[dict[str, Any]]
        if three_phase:
            self._schedule_phases = [
                {"end_step": up_end, "start_lr": "initial_lr", "end_lr": "max_lr",
                 "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * self.total_steps) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"},
            ]
        else:
            self._schedule_phases = [
                {"end_step": up_end, "start_lr": "initial_lr", "end_lr": "max_lr",
                 "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
            ]
        max_lrs = per_group("OneCycleLR", "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, optimizer.param_groups, strict=True):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"OneCycleLR: cycle_momentum needs an optimizer with momentum or betas; "
                                 f"{type(optimizer).__name__} has neither (pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = per_group("OneCycleLR", "max_momentum", optimizer, max_momentum)
            base_momentums = per_group("OneCycleLR", "base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(max_momentums, base_momentums, optimizer.param_groups,
                                                strict=True):
                    self._set_momentum(group, m_max)
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        return (_anneal_cos if self._anneal_func_type == "cos" else _anneal_linear)(start, end, pct)

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {step} times, but total_steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step <= end_step or i == last:
                    pct = (step - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[phase["start_momentum"]],
                                                               group[phase["end_momentum"]], pct))
                    break
                start_step = end_step
            lrs.append(lr)
        return lrs
