"""SequentialLR: run schedulers one after another, switching at milestones, as PyTorch's.

At a milestone the next scheduler restarts from its epoch 0 (its closed form there, e.g. LinearLR's
start_factor · base_lr).

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD, ExponentialLR, LinearLR
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
>>> warmup = LinearLR(opt, start_factor=0.5, total_iters=2)  # 0.5, 0.75, then 1.0
>>> sched = SequentialLR(opt, [warmup, ExponentialLR(opt, gamma=0.1)], milestones=[2])
>>> lrs = []
>>> for _ in range(4):
...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
>>> lrs  # the decay starts from base_lr at epoch 2
[0.5, 0.75, 1.0, 0.1]
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .chained import SchedulerOfSchedulers, check_schedulers
from .optimizer import Optimizer
from .scheduler_base import LRScheduler, check_optimizer


class SequentialLR(SchedulerOfSchedulers):
    """`schedulers[i]` runs from `milestones[i-1]` to `milestones[i]`; all must drive `optimizer`."""

    def __init__(self, optimizer: Optimizer, schedulers: list[LRScheduler], milestones: list[int],
                 last_epoch: int = -1) -> None:
        check_optimizer("SequentialLR", optimizer)
        check_schedulers("SequentialLR", schedulers, optimizer)
        for i, s in enumerate(schedulers[1:], start=1):
            # a later scheduler restarts at its epoch 0 through its own lr formula; PyTorch fails there with a
            # bare NotImplementedError for a scheduler that combines others
            if hasattr(s, "_schedulers"):
                raise ValueError(f"SequentialLR: scheduler {i} ({type(s).__name__}) combines schedulers and has no "
                                 "lr of its own to restart from at a milestone; only the first scheduler may")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expects one milestone fewer than schedulers, got {len(schedulers)} "
                             f"schedulers and {len(milestones)} milestones")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # construction stepped every scheduler once: go back to the start, and step only the first one
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo(self)
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def _undo(self, sched: Any) -> None:
        """Take back the initial step of every scheduler inside (recursively, for nested SequentialLRs)."""
        if sched is not self and not hasattr(sched, "_schedulers"):
            sched.last_epoch -= 1
            return
        for s in sched._schedulers:
            self._undo(s)

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)  # the next scheduler starts at its epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()
