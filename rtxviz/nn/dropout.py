"""Dropout and Dropout2d: active while training, the identity in eval mode.

>>> from rtxviz import Tensor
>>> Dropout(0.5).eval()(Tensor.ones([3])).tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

from ..engine.ops import nn as _F
from ._args import probability
from .module import Module


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.p = probability(p, type(self).__name__)
        self.inplace = bool(inplace)  # computed out of place: same values and gradients

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Dropout(_DropoutNd):
    """Zero each element with probability p and scale the rest by 1/(1-p) while training; identity in eval."""

    def forward(self, x: Any) -> Any:
        if not self.training or self.p == 0.0:
            return x
        return _F.dropout(x, self.p, self.training)


class Dropout2d(_DropoutNd):
    """Zero whole channels of [N, C, H, W] (each with probability p; the rest scaled by 1/(1-p)) while
    training; identity in eval.

    >>> from rtxviz import Tensor, manual_seed
    >>> manual_seed(1)
    >>> y = Dropout2d(0.5)(Tensor.ones([1, 6, 2, 2]))
    >>> sorted({v for row in y.numpy().reshape(6, 4).tolist() for v in row})
    [0.0, 2.0]
    """

    def forward(self, x: Any) -> Any:
        return _F.dropout2d(x, self.p, self.training)
