"""CyclicLR: the cyclical learning-rate policy (Smith, 2017), PyTorch's schedule exactly.

The lr goes from base_lr up to max_lr in `step_size_up` steps and back in `step_size_down`, again and again;
stepped once per batch. The amplitude is scaled per cycle ("triangular": not at all, "triangular2": halved each
cycle) or per iteration ("exp_range": gamma^iteration), or by your `scale_fn`. With `cycle_momentum` the momentum
(SGD's "momentum", or β₁ of an optimizer with "betas", such as Adam) moves the opposite way, between
max_momentum and base_momentum.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0, momentum=0.9)
>>> sched = CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2, mode="triangular2")
>>> lrs = []
>>> for _ in range(9):
...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
>>> lrs  # the second cycle reaches half the amplitude
[0.1, 0.3, 0.5, 0.3, 0.1, 0.2, 0.3, 0.2, 0.1]
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

from .optimizer import Optimizer
from .scheduler_base import LRScheduler, check_optimizer, per_group

_MODES = ("triangular", "triangular2", "exp_range")


class CyclicLR(LRScheduler):
    """lr = base_lr + (max_lr − base_lr) · h · scale, h rising 0 → 1 over the first `step_size_up` steps of
    each cycle and falling back over `step_size_down` (default: step_size_up). `scale` is scale_fn(cycle) or
    scale_fn(iteration) (`scale_mode`); `mode` picks a built-in scale_fn and its scale_mode and is ignored when
    scale_fn is given.

    Construction sets each group's lr to base_lr (and, with cycle_momentum, the momentum to max_momentum, the
    groups gaining "base_momentum" and "max_momentum"), as PyTorch's. `state_dict()` keeps the attributes of a
    callable-object scale_fn (a plain function is stored as None and must be passed again).
    """

    def __init__(self, optimizer: Optimizer, base_lr: float | list[float], max_lr: float | list[float],
                 step_size_up: int = 2000, step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float | list[float] = 0.8,
                 max_momentum: float | list[float] = 0.9, last_epoch: int = -1) -> None:
        check_optimizer("CyclicLR", optimizer)
        self.optimizer = optimizer
        base_lrs = per_group("CyclicLR", "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = per_group("CyclicLR", "max_lr", optimizer, max_lr)
        self._init_cycle(step_size_up, step_size_down)
        if scale_fn is None and mode not in _MODES:
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' (or give "
                             f"scale_fn), got {mode!r}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}")
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"CyclicLR: scale_fn should be a function, got {type(scale_fn).__name__}")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._init_momentum(base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_cycle(self, step_size_up: int, step_size_down: int | None) -> None:
        # PyTorch divides by zero later for these; say so now
        if not step_size_up > 0:
            raise ValueError(f"CyclicLR: step_size_up must be positive, got {step_size_up}")
        if step_size_down is not None and step_size_down < 0:
            raise ValueError(f"CyclicLR: step_size_down must be >= 0, got {step_size_down}")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size

    def _init_momentum(self, base_momentum: float | list[float], max_momentum: float | list[float],
                       last_epoch: int) -> None:
        optimizer = self.optimizer
        if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError(f"CyclicLR: cycle_momentum needs an optimizer with momentum or betas; "
                             f"{type(optimizer).__name__} has neither (pass cycle_momentum=False)")
        self.use_beta1 = "betas" in optimizer.defaults
        self.base_momentums = per_group("CyclicLR", "base_momentum", optimizer, base_momentum)
        self.max_momentums = per_group("CyclicLR", "max_momentum", optimizer, max_momentum)
        if last_epoch == -1:
            for m_max, m_base, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups,
                                            strict=True):
                self._set_momentum(group, m_max)
                group["max_momentum"] = m_max
                group["base_momentum"] = m_base

    def _init_scale_fn(self) -> None:
        """A built-in mode fixes its scale_mode (PyTorch's rule: exp_range scales per iteration)."""
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle (or iteration) `x`."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self) -> list[float]:
        """The lrs at batch `last_epoch`; with cycle_momentum it sets the groups' momentum too (as PyTorch)."""
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            height = x / self.step_ratio
        else:
            height = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * height * scale for base, top in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for group, m_base, m_max in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums,
                                            strict=True):
                self._set_momentum(group, m_max - (m_max - m_base) * height * scale)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None if fn is None or isinstance(fn, types.FunctionType) else fn.__dict__.copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        saved = state.pop("_scale_fn_custom")
        self.__dict__.update(state)
        if saved is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(saved)
        self._init_scale_fn()
