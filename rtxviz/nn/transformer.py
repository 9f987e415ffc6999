"""Attention and Transformer modules: MultiheadAttention, TransformerEncoderLayer / TransformerDecoderLayer, their
stacks TransformerEncoder / TransformerDecoder, and Transformer.

Constructor arguments, defaults, parameter names (``in_proj_weight``, ``in_proj_bias``, ``out_proj.weight``, or
``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight`` when kdim or vdim differ from embed_dim), state_dict keys,
mask conventions and return values are PyTorch's, so a PyTorch state dict loads as is. Masks: a bool mask is True
where attention is *not* allowed; a float mask is added to the scores (-inf blocks). The attention itself is the
engine's fused op `scaled_dot_product_attention` (need_weights=False, as inside the Transformer layers), or matmul
and softmax when the weights are asked for.

>>> from rtxviz import Tensor, manual_seed
>>> manual_seed(0)
>>> layer = TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
>>> mask = Transformer.generate_square_subsequent_mask(5)
>>> layer(Tensor.ones([3, 5, 8]), src_mask=mask, is_causal=True).shape
(3, 5, 8)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.dtypes import get_default_dtype
from ..engine.errors import DTypeError, ShapeError
from ..engine.ops import nn as _F
from ..engine.ops._base import constant
from ..engine.ops.arithmetic import add, mul_scalar
from ..engine.ops.linalg import linear, matmul
from ..engine.ops.reduction import mean
from ..engine.ops.shape import cat, narrow, reshape, squeeze, transpose, unsqueeze
from ..engine.tensor import Tensor
from . import init
from .layers import Dropout, LayerNorm, Linear, ModuleList
from .module import Module, Parameter


def _param(shape: tuple[int, ...], device: Any, dtype: Any) -> Parameter:
    return Parameter(Tensor.zeros(list(shape), device=device, dtype=dtype))


def _is_bool(mask: Any) -> bool:
    return mask.dtype.kind == "b"


def _blocked_to_float(mask: Tensor, dtype: Any) -> Tensor:
    """A bool mask (True: blocked) as an additive float mask: -inf where blocked, 0 elsewhere."""
    xp = mask.xp
    return constant(xp.where(mask.data, -np.inf, 0.0).astype(dtype))


def _pad_column(mask: Tensor) -> Tensor:
    """The mask with one more key column that attends (False / 0): for bias_k / add_zero_attn's extra key."""
    xp = mask.xp
    if _is_bool(mask):
        return constant(xp.concatenate([mask.data, xp.zeros((*mask.shape[:-1], 1), dtype=bool)], axis=-1))
    zeros = constant(xp.zeros((*mask.shape[:-1], 1), dtype=mask.data.dtype))
    return cat([mask, zeros], -1)


class MultiheadAttention(Module):
    """Attention over `num_heads` heads of embed_dim / num_heads features each: softmax(Q·Kᵀ/sqrt(d) + M)·V, then
    out_proj.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights or None). Shapes: query [L, N, E]
    (batch_first: [N, L, E]; unbatched [L, E]), key [S, N, kdim], value [S, N, vdim]; output as query; weights
    [N, L, S] averaged over heads (else [N, num_heads, L, S]). attn_mask [L, S] or [N·num_heads, L, S],
    key_padding_mask [N, S]. is_causal is a hint that attn_mask is the causal mask (PyTorch's: the mask is still
    required).

    >>> from rtxviz import Tensor
    >>> mha = MultiheadAttention(8, 2)
    >>> out, w = mha(Tensor.ones([4, 3, 8]), Tensor.ones([5, 3, 8]), Tensor.ones([5, 3, 8]))
    >>> out.shape, w.shape
    ((4, 3, 8), (3, 4, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be positive, got {embed_dim} and "
                             f"{num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.kdim = int(kdim) if kdim is not None else self.embed_dim
        self.vdim = int(vdim) if vdim is not None else self.embed_dim
        self._qkv_same_embed_dim = self.kdim == self.embed_dim and self.vdim == self.embed_dim
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        self.head_dim = self.embed_dim // self.num_heads
        self.add_zero_attn = bool(add_zero_attn)
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _param((3 * e, e), device, dtype)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = _param((e, e), device, dtype)
            self.k_proj_weight = _param((e, self.kdim), device, dtype)
            self.v_proj_weight = _param((e, self.vdim), device, dtype)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _param((3 * e,), device, dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = _param((1, 1, e), device, dtype)
            self.bias_v = _param((1, 1, e), device, dtype)
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's: Xavier-uniform projections, zero biases, Xavier-normal bias_k / bias_v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    # -- pieces -------------------------------------------------------------------------------------------
    def _project(self, query: Any, key: Any, value: Any) -> tuple[Any, Any, Any]:
        """q, k, v [N, L|S, E] from batch-first inputs: one matmul for self-attention with packed weights."""
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (narrow(b, 0, 0, e), narrow(b, 0, e, e),
                                                           narrow(b, 0, 2 * e, e))
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:
                qkv = linear(query, w, b)
                return narrow(qkv, -1, 0, e), narrow(qkv, -1, e, e), narrow(qkv, -1, 2 * e, e)
            wq, wk, wv = narrow(w, 0, 0, e), narrow(w, 0, e, e), narrow(w, 0, 2 * e, e)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)

    def _check(self, query: Any, key: Any, value: Any, key_padding_mask: Any, attn_mask: Any) -> bool:
        """Whether the call is batched; raises, naming the shapes, when they do not fit."""
        for label, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError(f"MultiheadAttention: {label} must be a Tensor, got {type(t).__name__}")
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(f"MultiheadAttention: query, key and value must all be 3-D (batched) or all 2-D "
                             f"(unbatched), got {query.shape}, {key.shape} and {value.shape}")
        batched = query.ndim == 3
        for label, t, dim in (("query", query, self.embed_dim), ("key", key, self.kdim),
                              ("value", value, self.vdim)):
            if t.shape[-1] != dim:
                raise ShapeError(f"MultiheadAttention: {label} must have {dim} features in its last dim, got shape "
                                 f"{t.shape}")
        seq = 1 if batched and self.batch_first else 0
        if key.shape[:-1] != value.shape[:-1]:
            raise ShapeError(f"MultiheadAttention: key {key.shape} and value {value.shape} must agree in their "
                             "sequence and batch dims")
        if batched:
            bdim = 0 if self.batch_first else 1
            if query.shape[bdim] != key.shape[bdim]:
                raise ShapeError(f"MultiheadAttention: query {query.shape} and key {key.shape} have different batch "
                                 f"sizes (batch_first={self.batch_first})")
        length, s = query.shape[seq], key.shape[seq]
        n = query.shape[0 if self.batch_first else 1] if batched else 1
        for label, mask in (("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)):
            if mask is not None and (not isinstance(mask, Tensor) or
                                     not (_is_bool(mask) or mask.dtype.kind == "f")):
                got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
                raise DTypeError(f"MultiheadAttention: {label} must be a bool or float Tensor, got {got}")
        if key_padding_mask is not None:
            expected = (n, s) if batched else (s,)
            if tuple(key_padding_mask.shape) != expected:
                raise ShapeError(f"MultiheadAttention: key_padding_mask must have shape {expected} (batch, source "
                                 f"length), got {key_padding_mask.shape}")
        if attn_mask is not None:
            allowed = [(length, s), (n * self.num_heads, length, s)]
            if tuple(attn_mask.shape) not in allowed:
                raise ShapeError(f"MultiheadAttention: attn_mask must have shape {allowed[0]} or {allowed[1]} "
                                 f"(batch·num_heads, target length, source length), got {attn_mask.shape}")
        return batched

    def _merged_mask(self, attn_mask: Any, key_padding_mask: Any, n: int, dtype: Any) -> Any:
        """One mask broadcastable to the scores [N, heads, L, S]: bool (True: blocked) when both are bool, else
        additive float."""
        masks = []
        if attn_mask is not None:
            masks.append(reshape(attn_mask, (n, self.num_heads, *attn_mask.shape[1:])) if attn_mask.ndim == 3
                         else attn_mask)
        if key_padding_mask is not None:
            masks.append(reshape(key_padding_mask, (n, 1, 1, key_padding_mask.shape[-1])))
        if not masks:
            return None
        if all(_is_bool(m) for m in masks):
            out = masks[0].data
            for m in masks[1:]:
                out = out | m.data
            return constant(out)
        floats = [_blocked_to_float(m, dtype) if _is_bool(m) else m for m in masks]
        return floats[0] if len(floats) == 1 else add(floats[0], floats[1])

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None, need_weights: bool = True,
                attn_mask: Any = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Any, Any]:
        batched = self._check(query, key, value, key_padding_mask, attn_mask)
        same = query is key and key is value
        if not batched:
            query, key, value = unsqueeze(query, 0), unsqueeze(key, 0), unsqueeze(value, 0)
            if key_padding_mask is not None:
                key_padding_mask = unsqueeze(key_padding_mask, 0)
        elif not self.batch_first:
            query, key, value = transpose(query, 0, 1), transpose(key, 0, 1), transpose(value, 0, 1)
        if same:
            key = value = query  # keep the self-attention identity through the transposes: one packed matmul
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal is a hint that attn_mask is the causal mask; pass the "
                             "mask too (Transformer.generate_square_subsequent_mask makes it)")
        n, length = query.shape[0], query.shape[1]
        q, k, v = self._project(query, key, value)
        if self.bias_k is not None:
            e = self.embed_dim
            k = cat([k, self.bias_k.expand(n, 1, e)], 1)
            v = cat([v, self.bias_v.expand(n, 1, e)], 1)
            attn_mask = None if attn_mask is None else _pad_column(attn_mask)
            key_padding_mask = None if key_padding_mask is None else _pad_column(key_padding_mask)
        h, d = self.num_heads, self.head_dim

        def heads(t: Any) -> Any:
            return transpose(reshape(t, (n, t.shape[1], h, d)), 1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        if self.add_zero_attn:
            zeros = constant(k.xp.zeros((n, h, 1, d), dtype=k.data.dtype))
            k, v = cat([k, zeros], 2), cat([v, zeros], 2)
            attn_mask = None if attn_mask is None else _pad_column(attn_mask)
            key_padding_mask = None if key_padding_mask is None else _pad_column(key_padding_mask)
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if is_causal and key_padding_mask is None and not need_weights:
            out = _F.scaled_dot_product_attention(q, k, v, None, dropout_p, is_causal=True)
        else:
            mask = self._merged_mask(attn_mask, key_padding_mask, n, q.data.dtype)
            if need_weights:
                scores = matmul(mul_scalar(q, 1.0 / math.sqrt(d)), transpose(k, -2, -1))
                if mask is not None:
                    scores = add(scores, _blocked_to_float(mask, q.data.dtype) if _is_bool(mask) else mask)
                p = _F.softmax(scores, -1)
                if dropout_p > 0.0:
                    p = _F.dropout(p, dropout_p, True)
                out = matmul(p, v)
                weights = mean(p, 1) if average_attn_weights else p
                if not batched:
                    weights = squeeze(weights, 0)
            else:
                if mask is not None and _is_bool(mask):
                    mask = constant(~mask.data)  # the op's bool masks attend where True
                out = _F.scaled_dot_product_attention(q, k, v, mask, dropout_p)
        out = self.out_proj(reshape(transpose(out, 1, 2), (n, length, self.embed_dim)))
        if not batched:
            out = squeeze(out, 0)
        elif not self.batch_first:
            out = transpose(out, 0, 1)
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _activation(activation: str | Callable[[Any], Any]) -> Callable[[Any], Any]:
    if activation == "relu":
        return _relu
    if activation == "gelu":
        return _gelu
    if callable(activation):
        return activation
    raise ValueError(f"Transformer layer: activation must be 'relu', 'gelu' or a callable, got {activation!r}")


def _relu(x: Any) -> Any:
    return x.relu()


def _gelu(x: Any) -> Any:
    return x.gelu()


def _layer_norm(d_model: int, eps: float, bias: bool, device: Any, dtype: Any) -> LayerNorm:
    norm = LayerNorm(d_model, eps=eps, device=device, dtype=dtype)
    if not bias:
        norm.register_parameter("bias", None)
    return norm


def _square_causal(mask: Any, size: int) -> bool:
    """Whether `mask` is the causal mask of `size` (PyTorch's _detect_is_causal_mask): float -inf above the
    diagonal and 0 elsewhere, or bool True above the diagonal."""
    if mask is None or tuple(mask.shape) != (size, size):
        return False
    data = np.asarray(mask.numpy())
    above = np.triu(np.ones((size, size), dtype=bool), 1)
    if data.dtype == bool:
        return bool((data == above).all())
    return bool(((data == -np.inf) == above).all() and (data[~above] == 0).all())


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual and a LayerNorm (after it, or before it with
    norm_first). forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False).

    >>> from rtxviz import Tensor
    >>> TransformerEncoderLayer(8, 2, dim_feedforward=16, norm_first=True)(Tensor.ones([5, 3, 8])).shape
    (5, 3, 8)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            device=device, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = bool(norm_first)
        self.norm1 = _layer_norm(d_model, layer_norm_eps, bias, device, dtype)
        self.norm2 = _layer_norm(d_model, layer_norm_eps, bias, device, dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Any) -> Any:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src: Any, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Any:
        x = src
        if self.norm_first:
            x = add(x, self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal))
            return add(x, self._ff_block(self.norm2(x)))
        x = self.norm1(add(x, self._sa_block(x, src_mask, src_key_padding_mask, is_causal)))
        return self.norm2(add(x, self._ff_block(x)))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory, and a feed-forward block, each with a residual and a
    LayerNorm. forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False).

    >>> from rtxviz import Tensor
    >>> TransformerDecoderLayer(8, 2, dim_feedforward=16)(Tensor.ones([4, 2, 8]), Tensor.ones([6, 2, 8])).shape
    (4, 2, 8)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            device=device, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, device=device, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = bool(norm_first)
        self.norm1 = _layer_norm(d_model, layer_norm_eps, bias, device, dtype)
        self.norm2 = _layer_norm(d_model, layer_norm_eps, bias, device, dtype)
        self.norm3 = _layer_norm(d_model, layer_norm_eps, bias, device, dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x: Any, mem: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x: Any) -> Any:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Any:
        x = tgt
        if self.norm_first:
            x = add(x, self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = add(x, self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                       memory_is_causal))
            return add(x, self._ff_block(self.norm3(x)))
        x = self.norm1(add(x, self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal)))
        x = self.norm2(add(x, self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)))
        return self.norm3(add(x, self._ff_block(x)))


def _clones(layer: Module, n: int) -> ModuleList:
    if not isinstance(n, int) or n <= 0:
        raise ValueError(f"Transformer stack: num_layers must be a positive int, got {n!r}")
    return ModuleList(copy.deepcopy(layer) for _ in range(n))


def _seq_len(x: Any, batch_first: bool) -> int:
    return x.shape[1] if batch_first and x.ndim == 3 else x.shape[0]


class TransformerEncoder(Module):
    """`num_layers` copies of an encoder layer (deep copies: each has its own parameters), then `norm` if given.
    forward(src, mask=None, src_key_padding_mask=None, is_causal=None); is_causal None: detected from the mask.
    enable_nested_tensor and mask_check are accepted for PyTorch's signature and do nothing here (they steer
    PyTorch's inference fast path, which has no counterpart in rtxviz).

    >>> from rtxviz import Tensor
    >>> enc = TransformerEncoder(TransformerEncoderLayer(8, 2, 16), num_layers=2)
    >>> sorted(k for k in enc.state_dict() if k.endswith("norm1.weight"))
    ['layers.0.norm1.weight', 'layers.1.norm1.weight']
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Any, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Any:
        first = self.layers[0]
        batch_first = first.self_attn.batch_first if isinstance(first, TransformerEncoderLayer) else False
        if is_causal is None:
            is_causal = _square_causal(mask, _seq_len(src, batch_first))
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """`num_layers` copies of a decoder layer, then `norm` if given. forward(tgt, memory, tgt_mask=None,
    memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=None,
    memory_is_causal=False).

    >>> from rtxviz import Tensor
    >>> dec = TransformerDecoder(TransformerDecoderLayer(8, 2, 16), num_layers=2)
    >>> dec(Tensor.ones([3, 1, 8]), Tensor.ones([4, 1, 8])).shape
    (3, 1, 8)
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        first = self.layers[0]
        batch_first = first.self_attn.batch_first if isinstance(first, TransformerDecoderLayer) else False
        if tgt_is_causal is None:
            tgt_is_causal = _square_causal(tgt_mask, _seq_len(tgt, batch_first))
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder Transformer ("Attention Is All You Need"), PyTorch's nn.Transformer: an encoder and a
    decoder stack, each ending in a LayerNorm; every parameter with more than one dim Xavier-uniform at start.

    >>> from rtxviz import Tensor
    >>> Transformer.generate_square_subsequent_mask(3).tolist()
    [[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = "relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        layer_args = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                          layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                          device=device, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(d_model, nhead, **layer_args),
                                              num_encoder_layers,
                                              _layer_norm(d_model, layer_norm_eps, bias, device, dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(d_model, nhead, **layer_args),
                                              num_decoder_layers,
                                              _layer_norm(d_model, layer_norm_eps, bias, device, dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Any, tgt: Any, src_mask: Any = None, tgt_mask: Any = None, memory_mask: Any = None,
                src_key_padding_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        for label, t in (("src", src), ("tgt", tgt)):
            if not isinstance(t, Tensor) or t.shape[-1] != self.d_model:
                got = t.shape if isinstance(t, Tensor) else type(t).__name__
                raise ShapeError(f"Transformer: {label} must have d_model = {self.d_model} features in its last dim, "
                                 f"got {got}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A float [sz, sz] causal mask: -inf above the diagonal (a later position), 0 elsewhere."""
        mask = np.triu(np.full((sz, sz), -np.inf), 1)
        out = Tensor(mask, dtype=dtype if dtype is not None else get_default_dtype())
        return out.to(device) if device is not None else out
