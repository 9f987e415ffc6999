"""Functional forms of the losses and activations, re-exported from the engine's ops.

Activations (`relu`, `tanh`, `sigmoid`, `gelu`, ...) are the engine's unary ops; losses and the other nn ops
(`cross_entropy`, `mse_loss`, `conv2d`, `softmax`, ...) live in `rtxviz.engine.ops.nn` and are looked up there
on first access, so this module follows that file as it grows.

>>> from rtxviz import Tensor
>>> relu(Tensor.from_slice([-1.0, 2.0], [2])).tolist()
[0.0, 2.0]
"""

from __future__ import annotations

from typing import Any

from ..engine.ops import nn as _nn
from ..engine.ops.unary import elu, gelu, leaky_relu, relu, sigmoid, silu, softplus, tanh

_FROM_NN = (
    "conv2d", "max_pool2d", "avg_pool2d", "layer_norm", "embedding", "dropout", "softmax", "log_softmax",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy_with_logits",
)

__all__ = ["elu", "gelu", "leaky_relu", "relu", "sigmoid", "silu", "softplus", "tanh", *_FROM_NN]


def __getattr__(name: str) -> Any:
    if name in _FROM_NN:
        try:
            return getattr(_nn, name)
        except AttributeError:
            raise AttributeError(f"rtxviz.nn.functional.{name}: rtxviz.engine.ops.nn does not define {name} "
                                 "yet") from None
    raise AttributeError(f"module 'rtxviz.nn.functional' has no attribute {name!r}")
