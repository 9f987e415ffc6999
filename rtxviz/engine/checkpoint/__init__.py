"""Gradient checkpointing: trade activation memory for recomputation.

A checkpointed segment is ONE recorded op. Its forward runs the segment under `no_grad`, so the segment's
internal activations are freed at once; the node keeps only the segment's inputs (and the random generator's
state, so dropout replays the same numbers). Its backward re-runs the segment with grad mode on and
differentiates that fresh graph with the incoming gradient, returning gradients for the segment inputs AND for
every Variable the segment read from outside (parameters, captured activations): those are discovered while
the forward runs and become inputs of the checkpoint node, so the engine routes their gradients exactly as it
would without checkpointing (`.backward()` accumulates them into `.grad`, `rtxviz.grad` returns them).

>>> from rtxviz import Tensor, Variable
>>> from rtxviz.engine.checkpoint import checkpoint
>>> w = Variable(Tensor.from_slice([1.0, 2.0], [2], dtype="float64").data, requires_grad=True)
>>> x = Variable(Tensor.from_slice([3.0, 4.0], [2], dtype="float64").data, requires_grad=True)
>>> y = checkpoint(lambda v: (v * w - 5.0).relu(), x)  # nothing inside is kept for backward
>>> y.sum().backward()                                  # ... it is recomputed here
>>> x.grad.tolist(), w.grad.tolist()
([0.0, 2.0], [0.0, 4.0])

Strategies (`CheckpointStrategy`) decide how `checkpoint_sequential` splits a list of layers into segments:
`NONE`, `SQRT_N`, `EVERY(k)` and `SELECTIVE(keep_ops=...)`. See docs/checkpointing.md.

The package, by concern: `strategy` (how layers split into segments), `signature` (what a recomputation must
repeat), `segment` (the hook that watches a segment's ops), `recompute` (the recorded op whose backward re-runs
the segment), `api` (the public functions).
"""

from __future__ import annotations

from ..errors import CheckpointError
from .api import CheckpointManager, checkpoint, checkpoint_sequential
from .strategy import CheckpointStrategy

__all__ = ["CheckpointError", "CheckpointManager", "CheckpointStrategy", "checkpoint", "checkpoint_sequential"]
