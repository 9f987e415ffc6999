"""Loss modules with PyTorch's constructors (argument order included, the legacy size_average/reduce too) and
`reduction` ("mean", "sum", "none"; KLDivLoss also "batchmean"). Class weights and pos_weight are buffers, as
PyTorch's, so they are in the state dict. Being Modules, the ops they run are tagged with their path (a loss
called on its own is `model`; name it with `.name_as("loss")`).

>>> from rtxviz import Tensor
>>> MSELoss()(Tensor.from_slice([1.0, 3.0], [2]), Tensor.from_slice([0.0, 0.0], [2])).item()
5.0
>>> list(CrossEntropyLoss(weight=Tensor.ones([3])).state_dict())
['weight']
"""

from __future__ import annotations

from typing import Any

from ..engine.tensor import Tensor
from . import functional as F
from .functional import legacy_reduction
from .module import Module

_REDUCTIONS = ("mean", "sum", "none")


def _as_buffer(value: Any, module: str, label: str) -> Tensor | None:
    if value is None or isinstance(value, Tensor):
        return value
    try:
        return Tensor(value)
    except Exception as exc:
        raise TypeError(f"{module}: {label} must be a Tensor (or array-like), got {type(value).__name__}") from exc


class _Loss(Module):
    _reductions: tuple[str, ...] = _REDUCTIONS

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__()
        reduction = legacy_reduction(size_average, reduce, reduction)
        if reduction not in self._reductions:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {self._reductions}, got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    """A loss with an optional per-class `weight`, kept as a buffer (no state-dict key when None)."""

    def __init__(self, weight: Any = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _as_buffer(weight, type(self).__name__, "weight"))


class MSELoss(_Loss):
    """mean((input - target)²)."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """mean(|input - target|)."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.l1_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy of logits [N, C] (or [N, C, d1, ...]) against int64 class indices or class
    probabilities, with class weights, ignore_index and label_smoothing, as PyTorch's."""

    def __init__(self, weight: Any = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = int(ignore_index), float(label_smoothing)
        if not 0.0 <= self.label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be between 0 and 1, got {label_smoothing}")

    def forward(self, input: Any, target: Any) -> Any:
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities [N, C] against int64 class indices [N]."""

    def __init__(self, weight: Any = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, input: Any, target: Any) -> Any:
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities in [0, 1]; `weight` rescales each element's loss."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits (a numerically stable sigmoid + BCE), targets in [0, 1]; `pos_weight`
    (one per class of the last dim) weighs the positive term, `weight` each element."""

    def __init__(self, weight: Any = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _as_buffer(weight, "BCEWithLogitsLoss", "weight"))
        self.register_buffer("pos_weight", _as_buffer(pos_weight, "BCEWithLogitsLoss", "pos_weight"))

    def forward(self, input: Any, target: Any) -> Any:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class HuberLoss(_Loss):
    """0.5·d² where |d| < delta, else delta·(|d| - 0.5·delta)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = float(delta)

    def forward(self, input: Any, target: Any) -> Any:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SmoothL1Loss(_Loss):
    """0.5·d²/beta where |d| < beta, else |d| - 0.5·beta."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = float(beta)

    def forward(self, input: Any, target: Any) -> Any:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class KLDivLoss(_Loss):
    """KL divergence of log-probabilities `input` from `target` (probabilities, or log-probabilities with
    log_target); reduction "batchmean" is the true KL divergence per sample."""

    _reductions = ("mean", "sum", "none", "batchmean")

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = bool(log_target)

    def forward(self, input: Any, target: Any) -> Any:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineEmbeddingLoss(_Loss):
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1."""

    def __init__(self, margin: float = 0.0, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = float(margin)

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)
