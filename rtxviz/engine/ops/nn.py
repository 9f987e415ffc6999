"""Neural-network ops: softmax, log_softmax, layer_norm, losses, embedding, conv2d, pooling, dropout."""

from __future__ import annotations
