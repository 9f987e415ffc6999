"""scaled_dot_product_attention as one fused op: softmax(Q·Kᵀ·scale + mask)·V.

Forward keeps only the attention weights P [.., L, S] (no scores, no masked copy), and its backward folds the scale
into dQ and dK ([.., L, E] and [.., S, E]) instead of the [.., L, S] scores. Blocked positions have P = 0, so
the gradient of the scores is 0 there without a mask in backward:

    dV = Pᵀ·dY,  dP = dY·Vᵀ,  dS = P·(dP - Σ_j dP·P),  dQ = scale·dS·K,  dK = scale·dSᵀ·Q

First-order backward reads P from forward; when backward is itself recorded (create_graph) P is rebuilt from Q
and K with ops (matmul, softmax), so every order is exact. With dropout the function is a composite of those
ops instead (the reference vocabulary has no dropout).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..device import xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..grad_mode import STATE
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import constant, implements, tensor_method
from .arithmetic import add, mul, mul_scalar, sub
from .broadcast import batched_sum_to, sum_to
from .linalg import matmul
from .nn_norm import dropout, softmax
from .reduction import sum as _sum
from .shape import compare, transpose, where


def _mT(x: Any) -> Any:
    return transpose(x, -2, -1)


def _blocked(attrs: dict, q: Any, k: Any) -> Any:
    """Where attention is blocked (True), broadcastable to [.., L, S]; None when nothing is."""
    mask = attrs.get("mask")
    if mask is not None:
        return ~mask.data
    if attrs.get("is_causal"):
        xp = xp_of(q)
        length, s = q.shape[-2], k.shape[-2]
        return xp.arange(s)[None, :] > xp.arange(length)[:, None]  # key j > query i: the top-left triangle kept
    return None


class ScaledDotProductAttention(Op):
    """Inputs (Q, K, V) or (Q, K, V, additive float mask); attrs scale, is_causal and a bool mask (True: attend)."""

    name = "scaled_dot_product_attention"
    kind = "nn"
    rule = "P = softmax(s·Q·Kᵀ + M); dV = Pᵀ·dY, dS = P·(dY·Vᵀ - Σ_j P·dY·Vᵀ), dQ = s·dS·K, dK = s·dSᵀ·Q"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, q: Any, k: Any, v: Any, bias: Any = None) -> Any:
        xp = xp_of(q)
        scores = q @ k.swapaxes(-1, -2)
        scores *= ctx.attrs["scale"]
        if bias is not None:
            scores = scores + bias
        blocked = _blocked(ctx.attrs, q, k)
        neg = None
        if blocked is not None:
            # an additive -inf mask: what a recorded backward adds to its rebuilt scores
            neg = xp.where(blocked, q.dtype.type(-np.inf), q.dtype.type(0))
            scores = scores + neg
        scores -= scores.max(axis=-1, keepdims=True)
        p = xp.exp(scores, out=scores)
        p /= p.sum(axis=-1, keepdims=True)
        ctx.state = (p, neg)
        return p @ v

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        q, k, v = inputs[:3]
        scale = ctx.attrs["scale"]
        p_arr, neg = ctx.state
        if STATE.enabled:
            # Recording the backward (create_graph): P must be a function of Q and K (and the float mask).
            scores = mul_scalar(matmul(q, _mT(k)), scale)
            if len(inputs) > 3:
                scores = add(scores, inputs[3])
            if neg is not None:
                scores = add(scores, Tensor._wrap(neg))
            p = softmax(scores, -1)
        else:
            p = Tensor._wrap(p_arr)
        need = [e is not None for e in ctx.next]
        grads: list[Any] = [None] * len(inputs)
        if need[2]:
            grads[2] = _fit(matmul(_mT(p), g), v.shape)
        if need[0] or need[1] or (len(inputs) > 3 and need[3]):
            dp = matmul(g, _mT(v))
            ds = mul(p, sub(dp, _sum(mul(dp, p), -1, keepdim=True)))
            if need[0]:
                grads[0] = _fit(mul_scalar(matmul(ds, k), scale), q.shape)
            if need[1]:
                grads[1] = _fit(mul_scalar(matmul(_mT(ds), q), scale), k.shape)
            if len(inputs) > 3 and need[3]:
                grads[3] = _fit(ds, inputs[3].shape)
        return tuple(grads)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        inputs = [t.data for t in ctx.saved_inputs]
        q, k, v = inputs[:3]
        scale = ctx.attrs["scale"]
        p = ctx.state[0]
        need = [e is not None for e in ctx.next]
        grads: list[Any] = [None] * len(inputs)
        if need[2]:
            grads[2] = batched_sum_to(p.swapaxes(-1, -2) @ g, v.shape)
        if need[0] or need[1] or (len(inputs) > 3 and need[3]):
            dp = g @ v.swapaxes(-1, -2)
            ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
            if need[0]:
                grads[0] = batched_sum_to((ds @ k) * scale, q.shape)
            if need[1]:
                grads[1] = batched_sum_to((ds.swapaxes(-1, -2) @ q) * scale, k.shape)
            if len(inputs) > 3 and need[3]:
                grads[3] = batched_sum_to(ds, inputs[3].shape)
        return tuple(grads)


def _fit(t: Any, shape: tuple[int, ...]) -> Any:
    """A gradient summed back over the batch dims its input was broadcast along."""
    return t if tuple(t.shape) == tuple(shape) else sum_to(t, tuple(shape))


def _reference_call(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, is_causal: bool = False,
                    scale: float | None = None) -> Any:
    """A reference step: its mask is 0/1 integers (attend where 1), made a bool mask by an op."""
    if mask is not None and mask.dtype.kind != "b":
        mask = compare(mask, 0, "__ne__")
    return scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, scale=scale)


@tensor_method("scaled_dot_product_attention")
@implements(ScaledDotProductAttention, call=_reference_call)
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None) -> Any:
    """softmax(query·keyᵀ·scale + mask)·value, as PyTorch's F.scaled_dot_product_attention: query [.., L, E],
    key [.., S, E], value [.., S, Ev] (batch dims broadcast) give [.., L, Ev]; scale defaults to 1/sqrt(E).

    attn_mask broadcasts to [.., L, S]: a bool mask attends where True, a float mask is added to the scores (and
    differentiated). is_causal attends to key positions j <= i (the top-left triangle, also when L != S); it and
    attn_mask do not come together. dropout_p drops attention weights (then the op is a composite of matmul,
    softmax and dropout).

    >>> from rtxviz import Tensor
    >>> q = Tensor.ones([1, 2, 2])
    >>> v = Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [1, 2, 2])
    >>> scaled_dot_product_attention(q, q, v).tolist()  # equal scores: the mean of the values
    [[[2.0, 3.0], [2.0, 3.0]]]
    >>> scaled_dot_product_attention(q, q, v, is_causal=True).tolist()  # query 0 sees key 0 only
    [[[1.0, 2.0], [2.0, 3.0]]]
    """
    op = "scaled_dot_product_attention"
    q, k, v = query, key, value
    for label, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, Tensor) or not is_float(t.dtype):
            raise DTypeError(f"{op}: {label} must be a float32 or float64 Tensor, got "
                             f"{getattr(t, 'dtype', type(t).__name__)}")
        if t.ndim < 2:
            raise ShapeError(f"{op}: {label} must have at least 2 dims ([.., length, features]), got shape {t.shape}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise DTypeError(f"{op}: query, key and value must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape[-1] != q.shape[-1]:
        raise ShapeError(f"{op}: query and key must have the same feature size E, got query {q.shape} and key "
                         f"{k.shape}")
    if v.shape[-2] != k.shape[-2]:
        raise ShapeError(f"{op}: key and value must have the same length S, got key {k.shape} and value {v.shape}")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ShapeError(f"{op}: the batch dims of query {q.shape}, key {k.shape} and value {v.shape} do not "
                         "broadcast") from None
    length, s = q.shape[-2], k.shape[-2]
    if attn_mask is not None and is_causal:
        raise ValueError(f"{op}: attn_mask and is_causal cannot both be set (put the causal mask into attn_mask)")
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise DTypeError(f"{op}: attn_mask must be a bool or float Tensor, got {type(attn_mask).__name__}")
        if attn_mask.dtype.kind != "b" and attn_mask.dtype != q.dtype:
            raise DTypeError(f"{op}: attn_mask must be bool (True: attend) or of the query's dtype {q.dtype} "
                             f"(added to the scores), got {attn_mask.dtype}")
        try:
            full = np.broadcast_shapes(attn_mask.shape, (*batch, length, s))
        except ValueError:
            full = None
        if full != (*batch, length, s):
            raise ShapeError(f"{op}: attn_mask of shape {attn_mask.shape} does not broadcast to the scores "
                             f"{(*batch, length, s)}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    p = float(dropout_p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout_p must be between 0 and 1, got {dropout_p}")
    if p > 0.0:
        return _with_dropout(q, k, v, attn_mask, p, is_causal, scale)
    attrs: dict = {"scale": scale, "is_causal": bool(is_causal)}
    if attn_mask is not None and attn_mask.dtype.kind == "b":
        attrs["mask"] = attn_mask
        return apply(ScaledDotProductAttention, (q, k, v), attrs)
    if attn_mask is not None:
        return apply(ScaledDotProductAttention, (q, k, v, attn_mask), attrs)
    return apply(ScaledDotProductAttention, (q, k, v), attrs)


def _with_dropout(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, p: float, is_causal: bool,
                  scale: float) -> Any:
    """The composite with dropout on the attention weights."""
    scores = mul_scalar(matmul(q, _mT(k)), scale)
    if is_causal:
        xp = xp_of(q.data)
        length, s = q.shape[-2], k.shape[-2]
        attn_mask = constant(xp.arange(s)[None, :] <= xp.arange(length)[:, None])
    if attn_mask is not None:
        scores = where(attn_mask, scores, -np.inf) if attn_mask.dtype.kind == "b" else add(scores, attn_mask)
    return matmul(dropout(softmax(scores, -1), p), v)
