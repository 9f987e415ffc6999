"""A batched reverse walk: many cotangents through one recorded graph in a single pass (vmap-like).

`batched_vjp(output, inputs, cotangents)` backpropagates B cotangents at once: every gradient carries a
leading batch dimension of size B. It is how Jacobians and Hessians get all their rows from one walk instead
of B backward passes. It computes no graph (the result is a value, not differentiable again).

Each node's rule is chosen by its op's name:
- elementwise ops (unary math, scalar forms, same-shape binaries, casts) run their own backward rule on the
  batched gradient: their rules are products of the gradient with values of the input's shape, which
  broadcast against the extra leading dimension;
- broadcasting binaries run their rule unreduced, then sum each gradient back to its input's shape while
  keeping the batch dimension;
- shape-moving ops (reshape, transpose, unsqueeze, expand, sum_to, sum, mean, matmul) have a batched rule
  here, on raw arrays;
- any other op (and user-defined BackwardFunctions) falls back to running its rule once per batch row and
  stacking the rows: always right, only slower. `register_batch_rule` adds a fast rule for a new op.

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

from .device import xp_of
from .errors import GraphError
from .grad_mode import STATE
from .graph import TapeNode, topological_order
from .variable import Variable

#: op name -> rule(node, G) returning one batched gradient (raw array) or None per input.
BatchRule = Callable[[TapeNode, Any], tuple]
BATCH_RULES: dict[str, BatchRule] = {}

#: Ops whose backward multiplies the gradient by values of the input's own shape (or moves it as a whole).
ELEMENTWISE = frozenset({
    "neg", "add_scalar", "rsub_scalar", "mul_scalar", "pow_scalar", "rpow_scalar", "minimum_scalar",
    "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "silu", "softplus", "sin", "cos", "square",
    "reciprocal", "erf", "gelu", "leaky_relu", "elu", "clamp", "to",
})
#: Broadcasting binaries: their ctx.state holds only the two input shapes (None when they agree).
BROADCAST_BINARY = frozenset({"add", "sub", "mul", "div", "pow", "maximum", "minimum"})


def register_batch_rule(name: str) -> Callable[[BatchRule], BatchRule]:
    """Decorator: a batched backward rule for the op called `name` (G has a leading batch dim)."""

    def deco(fn: BatchRule) -> BatchRule:
        BATCH_RULES[name] = fn
        return fn

    return deco


# -- helpers on raw arrays ------------------------------------------------------------------------------------
def batched_sum_to(arr: Any, shape: tuple[int, ...]) -> Any:
    """Sum `arr` of shape (B, *s) down to (B, *shape): broadcasting's adjoint, batch dimension kept."""
    target = (arr.shape[0], *shape)
    if arr.shape == target:
        return arr
    lead = arr.ndim - len(target)
    if lead > 0:
        arr = arr.sum(axis=tuple(range(1, 1 + lead)))
    keep = tuple(i for i in range(1, arr.ndim) if target[i] == 1 and arr.shape[i] != 1)
    if keep:
        arr = arr.sum(axis=keep, keepdims=True)
    return arr.reshape(target)


def batched_expand(arr: Any, shape: tuple[int, ...]) -> Any:
    """Broadcast `arr` of shape (B, *s) to (B, *shape), aligning s to the right of shape."""
    b = arr.shape[0]
    missing = len(shape) - (arr.ndim - 1)
    if missing > 0:
        arr = arr.reshape((b,) + (1,) * missing + arr.shape[1:])
    return xp_of(arr).broadcast_to(arr, (b, *shape))


def _wants(node: TapeNode) -> tuple[bool, ...]:
    return tuple(e is not None for e in node.next)


# -- rules for the shape-moving ops ---------------------------------------------------------------------------
@register_batch_rule("reshape")
@register_batch_rule("unsqueeze")
def _reshape_rule(node: TapeNode, g: Any) -> tuple:
    return (g.reshape((g.shape[0], *node.state)),)


@register_batch_rule("transpose")
def _transpose_rule(node: TapeNode, g: Any) -> tuple:
    return (g.swapaxes(node.attrs["dim0"] + 1, node.attrs["dim1"] + 1),)


@register_batch_rule("expand")
def _expand_rule(node: TapeNode, g: Any) -> tuple:
    return (batched_sum_to(g, node.state),)


@register_batch_rule("sum_to")
def _sum_to_rule(node: TapeNode, g: Any) -> tuple:
    return (batched_expand(g, node.state),)


def _restore_reduced(node: TapeNode, g: Any) -> Any:
    in_shape, dims, keepdim = node.state, node.attrs["dims"], node.attrs["keepdim"]
    if not keepdim and in_shape:
        axes = range(len(in_shape)) if dims is None else dims
        g = g.reshape((g.shape[0], *[1 if i in axes else s for i, s in enumerate(in_shape)]))
    return batched_expand(g, in_shape)


@register_batch_rule("sum")
def _sum_rule(node: TapeNode, g: Any) -> tuple:
    return (_restore_reduced(node, g),)


@register_batch_rule("mean")
def _mean_rule(node: TapeNode, g: Any) -> tuple:
    in_shape, dims = node.state, node.attrs["dims"]
    count = 1
    for i, s in enumerate(in_shape):
        if dims is None or i in dims:
            count *= s
    return (_restore_reduced(node, g * (1.0 / count)),)


@register_batch_rule("matmul")
def _matmul_rule(node: TapeNode, g: Any) -> tuple:
    a, b = (t.data for t in node.saved_inputs)
    need_a, need_b = _wants(node)
    bsz = g.shape[0]
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a.ndim == 1 and b.ndim == 1:
        g2 = g.reshape((bsz, 1, 1))
    elif a.ndim == 1:
        g2 = g[..., None, :]
    elif b.ndim == 1:
        g2 = g[..., None]
    else:
        g2 = g
    ga = gb = None
    if need_a:
        ga = batched_sum_to(g2 @ b2.swapaxes(-1, -2), a2.shape).reshape((bsz, *a.shape))
    if need_b:
        gb = batched_sum_to(a2.swapaxes(-1, -2) @ g2, b2.shape).reshape((bsz, *b.shape))
    return ga, gb


# -- generic rules -------------------------------------------------------------------------------------------
def _call_rule(node: TapeNode, g: Any) -> tuple:
    """The op's own backward on a constant Variable gradient (grad mode is off), as raw arrays."""
    res = node.op.backward(node, Variable._wrap(g, None))
    return tuple(None if r is None else r.data for r in res)


_NODE_SLOTS = tuple(s for s in TapeNode.__slots__ if s != "__weakref__")


def _broadcast_binary_rule(node: TapeNode, g: Any) -> tuple:
    shapes = node.state
    if shapes is None:
        return _call_rule(node, g)
    # Run the rule as if no input were broadcast (unreduced gradients of the output's shape), then
    # reduce with the batch dimension kept. A copy of the node, so the recorded graph is never touched.
    twin = object.__new__(TapeNode)
    for s in _NODE_SLOTS:
        setattr(twin, s, getattr(node, s))
    twin.state = None
    res = _call_rule(twin, g)
    return tuple(None if r is None else batched_sum_to(r, shp) for r, shp in zip(res, shapes, strict=True))


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
    """The batched rule used for `node` (its op's fast rule, or the row-by-row fallback)."""
    name = getattr(node.op, "name", None)
    if not isinstance(node.op, type):  # a user-defined BackwardFunction: its rule may assume one gradient
        return _row_by_row_rule
    rule = BATCH_RULES.get(name)
    if rule is not None:
        return rule
    if name in ELEMENTWISE:
        return _call_rule
    if name in BROADCAST_BINARY:
        return _broadcast_binary_rule
    return _row_by_row_rule


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
