"""Loss modules: thin Module forms of the functional losses, with PyTorch's `reduction` ("mean", "sum",
"none"). Being Modules, the ops they run are tagged with their path (a loss called on its own is `model`;
name it with `.name_as("loss")`).

>>> from rtxviz import Tensor
>>> MSELoss()(Tensor.from_slice([1.0, 3.0], [2]), Tensor.from_slice([0.0, 0.0], [2])).item()
5.0
"""

from __future__ import annotations

from typing import Any

from ..engine.ops import nn as _F
from .module import Module

_REDUCTIONS = ("mean", "sum", "none")


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """mean((input - target)²)."""

    def forward(self, input: Any, target: Any) -> Any:
        return _F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """mean(|input - target|)."""

    def forward(self, input: Any, target: Any) -> Any:
        return _F.l1_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_Loss):
    """Softmax cross-entropy of logits [N, C] against int64 class indices [N]."""

    def __init__(self, reduction: str = "mean", ignore_index: int = -100, label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        self.ignore_index, self.label_smoothing = int(ignore_index), float(label_smoothing)

    def forward(self, input: Any, target: Any) -> Any:
        if self.ignore_index == -100 and self.label_smoothing == 0.0:
            return _F.cross_entropy(input, target, reduction=self.reduction)
        return _F.cross_entropy(input, target, reduction=self.reduction, ignore_index=self.ignore_index,
                                label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities [N, C] against int64 class indices [N]."""

    def __init__(self, reduction: str = "mean", ignore_index: int = -100) -> None:
        super().__init__(reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, input: Any, target: Any) -> Any:
        return _F.nll_loss(input, target, reduction=self.reduction, ignore_index=self.ignore_index)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits (a numerically stable sigmoid + BCE), targets in [0, 1]."""

    def __init__(self, reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(reduction)
        self.pos_weight = pos_weight

    def forward(self, input: Any, target: Any) -> Any:
        return _F.binary_cross_entropy_with_logits(input, target, reduction=self.reduction,
                                                   pos_weight=self.pos_weight)
