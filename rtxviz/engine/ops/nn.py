"""Neural-network ops: softmax, log_softmax, normalisations (layer, batch, group, instance), losses, embedding,
convolutions (conv1d, conv2d, conv_transpose2d), pooling, attention, dropout.

The ops live in small modules by concern (nn_norm, nn_loss, nn_conv, nn_pool, nn_attention); this module gathers their
functional forms, so `from rtxviz.engine.ops.nn import conv2d, cross_entropy` works.

>>> from rtxviz import Tensor
>>> round(cross_entropy(Tensor.zeros([2, 3]), Tensor([0, 2])).item(), 4)  # log 3
1.0986
"""

from __future__ import annotations

from .nn_attention import scaled_dot_product_attention
from .nn_conv import conv1d, conv2d, conv_transpose2d
from .nn_loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .nn_norm import batch_norm, dropout, dropout2d, group_norm, instance_norm, layer_norm, log_softmax, softmax
from .nn_pool import adaptive_avg_pool2d, avg_pool2d, embedding, max_pool2d

__all__ = [
    "adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "conv1d", "conv2d", "conv_transpose2d", "cosine_embedding_loss", "cross_entropy", "huber_loss", "kl_div",
    "smooth_l1_loss", "dropout", "dropout2d", "embedding", "group_norm", "instance_norm", "l1_loss",
    "layer_norm", "log_softmax", "max_pool2d", "mse_loss", "nll_loss", "scaled_dot_product_attention", "softmax",
]
