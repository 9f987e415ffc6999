"""Neural-network ops: softmax, log_softmax, layer_norm, losses, embedding, conv2d, pooling, dropout.

The ops live in small modules by concern (nn_norm, nn_loss, nn_conv, nn_pool); this module gathers their
functional forms, so `from rtxviz.engine.ops.nn import conv2d, cross_entropy` works.

>>> from rtxviz import Tensor
>>> round(cross_entropy(Tensor.zeros([2, 3]), Tensor([0, 2])).item(), 4)  # log 3
1.0986
"""

from __future__ import annotations

from .nn_conv import conv2d
from .nn_loss import binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss, nll_loss
from .nn_norm import dropout, layer_norm, log_softmax, softmax
from .nn_pool import avg_pool2d, embedding, max_pool2d

__all__ = [
    "avg_pool2d", "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout", "embedding",
    "l1_loss", "layer_norm", "log_softmax", "max_pool2d", "mse_loss", "nll_loss", "softmax",
]
