"""ChainedScheduler: step several schedulers together, each applying its change to the lr the others left, as
PyTorch's.

Chain schedulers whose formulas are chainable (they scale the current lr: ConstantLR, ExponentialLR, StepLR,
MultiStepLR, LinearLR, PolynomialLR, MultiplicativeLR, CosineAnnealingLR). Constructing the inner schedulers
already took their first step, so the chain itself takes none.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD, ConstantLR, ExponentialLR
>>> opt = SGD([Parameter(Tensor.zeros([1]))], lr=1.0)
>>> sched = ChainedScheduler([ConstantLR(opt, factor=0.1, total_iters=2), ExponentialLR(opt, gamma=0.5)])
>>> lrs = []
>>> for _ in range(4):
...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
>>> lrs  # 0.1 · 0.5^epoch for 2 epochs, then 0.5^epoch
[0.1, 0.05, 0.25, 0.125]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .optimizer import Optimizer
from .plateau import ReduceLROnPlateau
from .scheduler_base import LRScheduler, check_optimizer


def check_schedulers(name: str, schedulers: Sequence[Any], optimizer: Optimizer | None) -> Optimizer:
    """The checks SequentialLR and ChainedScheduler share: at least one scheduler, each driving `optimizer` and
    stepping without a metric. Returns the optimizer."""
    if len(schedulers) < 1:
        raise ValueError(f"{name}: expects at least one scheduler, got none")
    if optimizer is None:  # the first scheduler had none to take
        raise TypeError(f"{name}: scheduler 0 ({type(schedulers[0]).__name__}) has no optimizer")
    check_optimizer(name, optimizer)
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{name}: scheduler {i} ({type(s).__name__}) has no optimizer")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{name}: scheduler {i} is a ReduceLROnPlateau, whose step needs a metric")
        if s.optimizer is not optimizer:
            raise ValueError(f"{name}: scheduler {i} ({type(s).__name__}) drives another optimizer")
    return optimizer


class SchedulerOfSchedulers(LRScheduler):
    """What ChainedScheduler and SequentialLR share: a state dict holding each inner scheduler's own (as PyTorch's
    `_schedulers` entry), loaded back into them in order."""

    _schedulers: list

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, st in zip(self._schedulers, saved, strict=True):
            s.load_state_dict(st)


class ChainedScheduler(SchedulerOfSchedulers):
    """`step()` steps every scheduler of `schedulers` in order; `optimizer` defaults to the first one's.
    `state_dict()` holds the inner schedulers' states under "_schedulers"."""

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None) -> None:
        if optimizer is None and len(schedulers) > 0:
            optimizer = getattr(schedulers[0], "optimizer", None)
        optimizer = check_schedulers("ChainedScheduler", schedulers, optimizer)
        # no LRScheduler.__init__: the inner schedulers did the initial step, as in PyTorch
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def get_lr(self) -> list[float]:
        raise NotImplementedError("ChainedScheduler: has no lr formula of its own (its schedulers step the lr)")

    def step(self) -> None:  # type: ignore[override]
        """Step each scheduler once, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]
