"""A batched reverse walk: many cotangents through one recorded graph in a single pass (vmap-like).

`batched_vjp(output, inputs, cotangents)` backpropagates B cotangents at once: every gradient carries a
leading batch dimension of size B. It is how Jacobians and Hessians get all their rows from one walk instead
of B backward passes. It computes no graph (the result is a value, not differentiable again).

Each node's rule is the batch rule its op declares (`Op.batched`): elementwise ops and broadcasting binaries
get theirs from their base class (`ops.Elementwise`, `ops.BroadcastBinary`), shape-moving ops, reductions and
matmul write their own on raw arrays. Any other op (and user-defined BackwardFunctions) falls back to running
its rule once per batch row and stacking the rows: always right, only slower.

>>> from rtxviz import Tensor, Variable
>>> import numpy as np
>>> x = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2], dtype="float64"))
>>> (jac,) = batched_vjp(x * x, [x], np.eye(2))   # rows of the Jacobian of x²
>>> jac.tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .backward import topological_order
from .device import to_device, xp_of
from .errors import GraphError
from .grad_mode import STATE
from .graph import TapeNode
from .tensor import Tensor
from .variable import Variable

#: A batch rule: (node, G) -> one batched gradient (raw array) or None per input.
BatchRule = Callable[[TapeNode, Any], tuple]


def _call_rule(node: TapeNode, g: Any) -> tuple:
    """The op's own backward on a constant Variable gradient (grad mode is off), as raw arrays."""
    res = node.op.backward(node, Variable._wrap(g, None))
    return tuple(None if r is None else r.data for r in res)


def _row_by_row_rule(node: TapeNode, g: Any) -> tuple:
    """Any op: its rule once per batch row, rows stacked (a None gradient stays None)."""
    xp = xp_of(g)
    rows = [_call_rule(node, g[i]) for i in range(g.shape[0])]
    out = []
    for k in range(len(node.next)):
        col = [r[k] for r in rows]
        out.append(None if col[0] is None else xp.stack(col))
    return tuple(out)


def rule_for(node: TapeNode) -> BatchRule:
    """The batched rule used for `node`: its op's declared batch rule, or the row-by-row fallback (user-defined
    BackwardFunctions always take the fallback: their rule may assume one gradient)."""
    rule = getattr(node.op, "batched", None) if isinstance(node.op, type) else None
    return rule if rule is not None else _row_by_row_rule


# -- the walk ------------------------------------------------------------------------------------------------
def _order(root: TapeNode, wanted_leaves: set[int]) -> list[TapeNode] | None:
    """Consumers-first order of the nodes on a path from `root` to a wanted leaf; None when a hook sits on
    the path (hooks expect one gradient at a time, so the caller must use the unbatched walk)."""
    post = list(reversed(topological_order([root])))  # producers first
    useful: set[int] = set()
    for node in post:  # producers first
        for e in node.next:
            if e is None:
                continue
            if id(e) in (useful if e.__class__ is TapeNode else wanted_leaves):
                useful.add(id(node))
                break
    order = [n for n in reversed(post) if id(n) in useful]
    for n in order:
        if n.pre_hooks:
            return None
    return order


def batched_vjp(output: Variable, inputs: Sequence[Variable], cotangents: Any) -> list[Any] | None:
    """Backpropagate a batch of cotangents from `output` to leaf `inputs`, in one walk.

    `cotangents` has shape (B, *output.shape); the result has, per input, an array of shape (B, *input.shape)
    (zeros where the input does not affect the output). Returns None when the graph cannot be walked batched
    (a hook is registered on the path); callers then loop over rows with `rtxviz.grad`.
    """
    if isinstance(cotangents, Tensor):
        cotangents = cotangents.data
    if isinstance(output, Tensor) and type(cotangents) is not type(output.data):
        cotangents = to_device(cotangents, output.device)  # host cotangents for a device output, as grad_outputs
    bsz = cotangents.shape[0]
    xp = xp_of(cotangents)
    results: list[Any] = [None] * len(inputs)
    wanted = {id(v): i for i, v in enumerate(inputs)}
    for v in inputs:
        if v._node is not None:
            raise GraphError("batched_vjp: inputs must be leaf Variables")
        if v._hooks:
            return None
    if not isinstance(output, Variable) or not output.requires_grad:
        return [xp.zeros((bsz, *v.shape), dtype=v.dtype) for v in inputs]
    if output._node is None:  # the output is itself a leaf
        idx = wanted.get(id(output))
        if idx is not None:
            results[idx] = cotangents
    else:
        order = _order(output._node, set(wanted))
        if order is None:
            return None
        grads: dict[int, Any] = {id(output._node): cotangents}
        prev = STATE.enabled
        STATE.enabled = False  # rules run as plain computation: nothing is recorded
        try:
            for node in order:
                g = grads.pop(id(node), None)
                if g is None:
                    continue
                in_grads = rule_for(node)(node, g)
                for e, gi in zip(node.next, in_grads, strict=False):
                    if e is None or gi is None:
                        continue
                    if e.__class__ is TapeNode:
                        k = id(e)
                        old = grads.get(k)
                        grads[k] = gi if old is None else old + gi
                    else:
                        idx = wanted.get(id(e))
                        if idx is not None:
                            old = results[idx]
                            results[idx] = gi if old is None else old + gi
        finally:
            STATE.enabled = prev
    out = []
    for v, r in zip(inputs, results, strict=True):
        if r is None:
            out.append(xp.zeros((bsz, *v.shape), dtype=v.dtype))
        else:
            out.append(xp.ascontiguousarray(xp.broadcast_to(r, (bsz, *v.shape))))
    return out
