"""CosineAnnealingWarmRestarts (SGDR): cosine annealing from base_lr to eta_min, restarting every T_i epochs,
T_i growing by T_mult at each restart, as PyTorch's.

`step()` advances one epoch; `step(epoch)` jumps to `epoch`, which may be fractional (step once per batch with
`epoch + i / iters_per_epoch`, as PyTorch documents); `last_epoch` is then ⌊epoch⌋.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
>>> sched = CosineAnnealingWarmRestarts(opt, T_0=2)
>>> lrs = []
>>> for _ in range(5):
...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
>>> lrs  # 1 → 0.5 → restart
[1.0, 0.5, 1.0, 0.5, 1.0]
>>> sched.step(0.5); round(sched.get_last_lr()[0], 6), sched.last_epoch, sched.T_cur
(0.853553, 0, 0.5)
"""

from __future__ import annotations

import math

from .optimizer import Optimizer
from .scheduler_base import LRScheduler


class CosineAnnealingWarmRestarts(LRScheduler):
    """lr = η_min + (base_lr − η_min) · (1 + cos(π · T_cur / T_i)) / 2, T_cur counting the epochs since the
    last restart. `T_cur` and `T_i` are attributes, kept in `state_dict()`."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        if isinstance(T_0, bool) or not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive integer, got {T_0!r}")
        if isinstance(T_mult, bool) or not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an integer >= 1, got {T_mult!r}")
        if isinstance(eta_min, bool) or not isinstance(eta_min, (int, float)):
            raise TypeError(f"CosineAnnealingWarmRestarts: eta_min must be a number, got {eta_min!r} "
                            f"({type(eta_min).__name__})")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to `epoch` (fractional allowed): T_cur and T_i from SGDR's closed form."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            self._jump(epoch)
        self.last_epoch = math.floor(epoch)
        groups = self.optimizer.param_groups
        for group, lr in zip(groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in groups]

    def _jump(self, epoch: float) -> None:
        """T_cur and T_i at `epoch`: the restart it falls after is n = ⌊log_T_mult(epoch/T_0 · (T_mult−1) + 1)⌋
        (the cycles' lengths T_0 · T_mult^k summing to the epoch)."""
        if epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got {epoch}")
        if epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            # PyTorch's formula, to agree with it to the last bit (log's rounding included)
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult**n
