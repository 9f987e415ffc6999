"""LRScheduler, the base of the learning-rate schedulers: PyTorch's epoch counting and state.

Constructing a scheduler sets each group's "initial_lr" (unless resuming) and performs the initial step: the
optimizer's lr is then the schedule's value at epoch 0. Call `step()` once per epoch (or batch), after
`optimizer.step()`. Subclasses compute `get_lr()` from the current lrs (PyTorch's chainable form), and may give
`_get_closed_form_lr()`, used by `step(epoch)` and by SequentialLR at its milestones.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> from rtxviz.optim import SGD
>>> class Halving(LRScheduler):
...     def get_lr(self):
...         return [g["lr"] if self._is_initial else g["lr"] / 2 for g in self.optimizer.param_groups]
>>> sched = Halving(SGD([Parameter(Tensor.zeros([1]))], lr=1.0))
>>> sched.step(); sched.step(); sched.get_last_lr(), sched.last_epoch
([0.25], 2)
"""

from __future__ import annotations

from typing import Any

from .optimizer import Optimizer


def check_optimizer(name: str, optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{name}: expected an Optimizer, got {type(optimizer).__name__}")


def per_group(name: str, what: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """`value` for each parameter group: a list or tuple as long as param_groups, or one value for all."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name}: {what} has {len(value)} values, the optimizer has "
                             f"{len(optimizer.param_groups)} parameter group(s)")
        return list(value)
    return [value] * len(optimizer.param_groups)


class LRScheduler:
    """Sets `optimizer.param_groups[i]["lr"]` epoch by epoch; `last_epoch` counts the steps taken (0 after
    construction), `base_lrs` are the groups' "initial_lr"."""

    _is_initial = False  # True during the step construction performs (a resumed schedule must not advance)

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        check_optimizer(type(self).__name__, optimizer)
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"{type(self).__name__}: resuming (last_epoch={last_epoch}) needs 'initial_lr' in "
                               f"param_groups[{i}] (load the optimizer's state first)")
        self.base_lrs: list[float] = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The step construction performs (SequentialLR calls it again on the scheduler it starts with)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rates for epoch `self.last_epoch`, one per parameter group."""
        raise NotImplementedError(f"{type(self).__name__}.get_lr")

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch. `epoch` (deprecated in PyTorch) jumps to that epoch, with the closed form where
        the scheduler has one."""
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            raise ValueError(f"{type(self).__name__}: computed {len(values)} learning rates for {len(groups)} "
                             "parameter group(s)")
        for group, lr in zip(groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in groups]

    def get_last_lr(self) -> list[float]:
        """The learning rates the last step set, one per parameter group."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer, as PyTorch's."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
