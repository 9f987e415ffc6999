"""ReduceLROnPlateau: divide the lr when a metric stops improving, as PyTorch's.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
>>> sched = ReduceLROnPlateau(opt, factor=0.5, patience=1)
>>> for loss in [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0]:
...     sched.step(loss)
>>> sched.get_last_lr()  # two epochs without improvement, twice
[0.25]
"""

from __future__ import annotations

import math
from typing import Any, SupportsFloat

from .optimizer import Optimizer
from .scheduler_base import LRScheduler, check_optimizer, per_group


class ReduceLROnPlateau(LRScheduler):
    """After more than `patience` epochs without improvement (better than the best by `threshold`, relative or
    absolute), lr ← max(lr·factor, min_lr), then wait `cooldown` epochs. A reduction smaller than `eps` is
    skipped. `step(metric)` takes the epoch's metric (a number or a one-element tensor).
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float | list[float] = 0.0, eps: float = 1e-8) -> None:
        check_optimizer("ReduceLROnPlateau", optimizer)
        if not factor < 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        if patience < 0 or cooldown < 0:
            raise ValueError(f"ReduceLROnPlateau: patience and cooldown must be >= 0, got {patience} and "
                             f"{cooldown}")
        self.factor = factor
        self.optimizer = optimizer
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.min_lrs = per_group("ReduceLROnPlateau", "min_lr", optimizer, min_lr)
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether metric `a` improves on `best` by the threshold."""
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def step(self, metrics: SupportsFloat, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record one epoch's metric; reduce the lrs when it has plateaued."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups, but "
                                   f"min_lr was given for {len(self.min_lrs)}; set `min_lrs` to match")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs, strict=True):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
