"""rtxviz.nn.functional: PyTorch's `torch.nn.functional`, on the engine's ops, with PyTorch's signatures
(argument order, defaults, the legacy size_average/reduce flags of the losses) so course code ports unchanged.

Most functions are the engine's ops themselves (`relu`, `conv2d`, `layer_norm`, `interpolate`, ...); the losses
are thin wrappers because PyTorch's argument order (`F.cross_entropy(input, target, weight, ...)`) differs from
the engine's (reduction third). Convolutions also take padding="same"/"valid" here, as PyTorch's; convolutions
and poolings take an unbatched input ([C, L], [C, H, W]) as PyTorch's.

>>> from rtxviz import Tensor
>>> relu(Tensor.from_slice([-1.0, 2.0], [2])).tolist()
[0.0, 2.0]
>>> one_hot(Tensor([0, 2]), 3).tolist()
[[1, 0, 0], [0, 0, 1]]
>>> round(cross_entropy(Tensor.zeros([2, 3]), Tensor([0, 2]), Tensor.from_slice([1.0, 1.0, 2.0], [3])).item(), 4)
1.0986
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..engine.device import xp_of
from ..engine.errors import DTypeError, ShapeError
from ..engine.ops import nn as _nn
from ..engine.ops.distance import cosine_similarity, normalize, pairwise_distance
from ..engine.ops.einsum import einsum
from ..engine.ops.index import where
from ..engine.ops.linalg import linear
from ..engine.ops.nn import (
    adaptive_avg_pool2d,
    avg_pool2d,
    batch_norm,
    dropout2d,
    group_norm,
    instance_norm,
    layer_norm,
    max_pool2d,
    scaled_dot_product_attention,
)
from ..engine.ops.nn_conv import input_rank_message
from ..engine.ops.nn_pool import avg_pool1d, max_pool1d
from ..engine.ops.nn_upsample import interpolate
from ..engine.ops.reduction import amax
from ..engine.ops.shape import cat, pad, squeeze, unsqueeze
from ..engine.ops.unary import (
    celu,
    elu,
    gelu,
    hardswish,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    relu,
    selu,
    sigmoid,
    silu,
    softplus,
    softsign,
    tanh,
)
from ..engine.tensor import Tensor

__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d",
    "avg_pool2d", "batch_norm", "bilinear", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "celu", "conv1d", "conv2d", "conv_transpose2d", "cosine_embedding_loss",
    "cosine_similarity", "cross_entropy", "dropout", "dropout2d", "elu", "embedding", "gelu", "group_norm",
    "hardswish", "hardtanh", "huber_loss", "instance_norm", "interpolate", "kl_div", "l1_loss", "layer_norm",
    "leaky_relu", "linear", "log_softmax", "logsigmoid", "max_pool1d", "max_pool2d", "mish", "mse_loss", "nll_loss",
    "normalize", "one_hot", "pad", "pairwise_distance", "prelu", "relu", "relu6", "scaled_dot_product_attention",
    "selu", "sigmoid", "silu", "smooth_l1_loss", "softmax", "softplus", "softsign", "tanh",
]


# -- activations with PyTorch's dim defaults ---------------------------------------------------------------------
def _softmax_dim(x: Any, dim: int | None) -> int:
    return (0 if x.ndim in (0, 1, 3) else 1) if dim is None else dim  # PyTorch's legacy choice for dim=None


def softmax(input: Tensor, dim: int | None = None, dtype: Any = None) -> Any:
    """softmax over `dim` (None: PyTorch's legacy choice, 0 for 0-, 1- and 3-dim inputs, else 1); `dtype`
    casts the input first.

    >>> from rtxviz import Tensor
    >>> softmax(Tensor.zeros([2, 2]), dim=1).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    x = input if dtype is None else input.to(dtype=dtype)
    return _nn.softmax(x, _softmax_dim(x, dim))


def log_softmax(input: Tensor, dim: int | None = None, dtype: Any = None) -> Any:
    """log(softmax) over `dim`, in one stable op (dim None as `softmax`)."""
    x = input if dtype is None else input.to(dtype=dtype)
    return _nn.log_softmax(x, _softmax_dim(x, dim))


def relu6(input: Tensor, inplace: bool = False) -> Any:
    """min(max(x, 0), 6) (computed out of place: same values and gradients)."""
    return hardtanh(input, 0.0, 6.0)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Zero each element with probability p, scale the rest by 1/(1-p); `input` itself when not training."""
    return _nn.dropout(input, p, training)


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Any:
    """Rows of `weight` [V, D] at int64 indices `input`; row padding_idx gets no gradient."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise ValueError("embedding: max_norm, scale_grad_by_freq and sparse are not supported (only their "
                         f"defaults), got max_norm={max_norm!r}, scale_grad_by_freq={scale_grad_by_freq!r}, "
                         f"sparse={sparse!r}")
    return _nn.embedding(input, weight, padding_idx)


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """int64 class indices of any shape as one-hot rows: shape + (num_classes,), int64 (-1: max index + 1).
    A constant, as PyTorch's (indices have no gradient).

    >>> from rtxviz import Tensor
    >>> one_hot(Tensor([[1], [0]])).shape
    (2, 1, 2)
    """
    t = tensor if isinstance(tensor, Tensor) else Tensor(np.asarray(tensor))
    ids = t.data
    if ids.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expected an integer (int64) tensor of class indices, got {ids.dtype}")
    xp = xp_of(ids)
    if ids.size and int(ids.min()) < 0:
        raise ValueError(f"one_hot: class values must be non-negative, got {int(ids.min())}")
    n = operator.index(num_classes)
    if n == -1:
        if not ids.size:
            raise ValueError("one_hot: can not infer the number of classes from an empty tensor")
        n = int(ids.max()) + 1
    if ids.size and int(ids.max()) >= n:
        raise ValueError(f"one_hot: class values must be smaller than num_classes ({n}), got {int(ids.max())}")
    out = (ids[..., None] == xp.arange(n)).astype(np.int64)
    return Tensor._wrap(out)


# -- convolutions with padding="same" / "valid" ------------------------------------------------------------------
def _string_padding(op: str, x: Tensor, weight: Tensor, padding: str, stride: Any, dilation: Any,
                    nd: int) -> tuple[Tensor, Any]:
    """(input, padding) for padding="valid" (none) or "same" (d·(k - 1) in total, the odd one at the end, by
    padding the input first, as PyTorch)."""
    if padding == "valid":
        return x, 0
    if padding != "same":
        raise ValueError(f"{op}: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
    strides = (stride,) * nd if isinstance(stride, int) else tuple(stride)
    if any(s != 1 for s in strides):
        raise ValueError(f"{op}: padding='same' needs stride 1, got stride {stride!r}")
    dil = (dilation,) * nd if isinstance(dilation, int) else tuple(dilation)
    totals = [d * (k - 1) for d, k in zip(dil, weight.shape[2:], strict=True)]
    if all(t % 2 == 0 for t in totals):
        return x, tuple(t // 2 for t in totals) if nd == 2 else totals[0] // 2
    pads = [p for t in reversed(totals) for p in (t // 2, t - t // 2)]
    return pad(x, pads), 0


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Any:
    """1-D cross-correlation of [N, C, L] (or unbatched [C, L]) with weight [O, C/groups, k] (padding may be
    "same" or "valid")."""
    if isinstance(padding, str):
        input, padding = _string_padding("conv1d", input, weight, padding, stride, dilation, 1)
    return _nn.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Any:
    """2-D cross-correlation of [N, C, H, W] (or unbatched [C, H, W]) with weight [O, C/groups, kh, kw] (padding
    may be "same" or "valid").

    >>> from rtxviz import Tensor
    >>> conv2d(Tensor.ones([1, 1, 4, 4]), Tensor.ones([1, 1, 2, 2]), padding="same").shape
    (1, 1, 4, 4)
    """
    if isinstance(padding, str):
        input, padding = _string_padding("conv2d", input, weight, padding, stride, dilation, 2)
    return _nn.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """The transposed 2-D convolution of [N, C, H, W] (or unbatched [C, H, W]) with weight [C, O/groups, kh, kw]."""
    return _nn.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


# -- losses, in PyTorch's argument order --------------------------------------------------------------------------
def legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """PyTorch's mapping of the deprecated size_average/reduce flags onto `reduction` (either given wins).

    >>> legacy_reduction(None, None, "sum"), legacy_reduction(False, None, "mean")
    ('sum', 'sum')
    >>> legacy_reduction(None, False, "mean")
    'none'
    """
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def cross_entropy(input: Tensor, target: Any, weight: Any = None, size_average: bool | None = None,
                  ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Any:
    """Softmax cross-entropy against class indices or class probabilities (PyTorch's F.cross_entropy)."""
    return _nn.cross_entropy(input, target, legacy_reduction(size_average, reduce, reduction), ignore_index,
                             label_smoothing, weight)


def nll_loss(input: Tensor, target: Any, weight: Any = None, size_average: bool | None = None,
             ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean") -> Any:
    """Negative log-likelihood of log-probabilities at class indices (PyTorch's F.nll_loss)."""
    return _nn.nll_loss(input, target, legacy_reduction(size_average, reduce, reduction), ignore_index, weight)


def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
             reduction: str = "mean") -> Any:
    return _nn.mse_loss(input, target, legacy_reduction(size_average, reduce, reduction))


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
            reduction: str = "mean") -> Any:
    return _nn.l1_loss(input, target, legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Any = None, size_average: bool | None = None,
                         reduce: bool | None = None, reduction: str = "mean") -> Any:
    return _nn.binary_cross_entropy(input, target, legacy_reduction(size_average, reduce, reduction), weight)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Any = None,
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean", pos_weight: Any = None) -> Any:
    return _nn.binary_cross_entropy_with_logits(input, target, legacy_reduction(size_average, reduce, reduction),
                                                pos_weight, weight)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Any:
    return _nn.huber_loss(input, target, reduction, delta)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
                   reduction: str = "mean", beta: float = 1.0) -> Any:
    return _nn.smooth_l1_loss(input, target, legacy_reduction(size_average, reduce, reduction), beta)


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
           reduction: str = "mean", log_target: bool = False) -> Any:
    return _nn.kl_div(input, target, legacy_reduction(size_average, reduce, reduction), log_target)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Any:
    return _nn.cosine_embedding_loss(input1, input2, target, margin, legacy_reduction(size_average, reduce, reduction))



# -- compositions of the engine's ops (the graph and the gradients are the ops') ------------------------------------
def prelu(input: Tensor, weight: Tensor) -> Any:
    """max(0, x) + weight · min(0, x), as PyTorch's F.prelu: `weight` has one element, or one per channel (dim 1
    of an input with 2 or more dims; an input with fewer dims has one channel).

    >>> from rtxviz import Tensor
    >>> prelu(Tensor.from_slice([-2.0, 3.0], [2]), Tensor.from_slice([0.25], [1])).tolist()
    [-0.5, 3.0]
    """
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != channels:
        raise ShapeError(f"prelu: the weight has {n} elements (shape {tuple(weight.shape)}) but the input has "
                         f"{channels} channel(s) (input shape {tuple(input.shape)}): give 1 or {channels}")
    if n == 1:
        w = weight.reshape(())  # one slope for every element, whatever the input's rank (0-d included)
    else:
        w = weight.reshape(n, *([1] * (input.ndim - 2)))  # broadcast over dim 1
    # where(x > 0, x, w·x): at x = 0 the slope is w, as PyTorch's gradient
    return where(input > 0, input, input * w)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Any:
    """y_o = Σ_ij x1_i · W[o, i, j] · x2_j + b_o over inputs [*, in1] and [*, in2] with the same leading dims,
    weight [out, in1, in2] (PyTorch's F.bilinear), as one einsum over the flattened leading dims.

    >>> from rtxviz import Tensor
    >>> bilinear(Tensor.ones([4, 2]), Tensor.ones([4, 3]), Tensor.ones([5, 2, 3])).shape
    (4, 5)
    """
    if weight.ndim != 3:
        raise ShapeError(f"bilinear: the weight must be [out_features, in1_features, in2_features], got shape "
                         f"{tuple(weight.shape)}")
    _, in1, in2 = weight.shape
    if input1.ndim < 1 or input1.shape[-1] != in1:
        raise ShapeError(f"bilinear: input1 has shape {tuple(input1.shape)}, its last dim must be in1_features = "
                         f"{in1} (weight {tuple(weight.shape)})")
    if input2.ndim < 1 or input2.shape[-1] != in2:
        raise ShapeError(f"bilinear: input2 has shape {tuple(input2.shape)}, its last dim must be in2_features = "
                         f"{in2} (weight {tuple(weight.shape)})")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ShapeError(f"bilinear: the inputs' leading (batch) dims must match, got {tuple(input1.shape)} and "
                         f"{tuple(input2.shape)}")
    lead = tuple(input1.shape[:-1])
    # einsum takes no '...': flatten the leading dims to one batch dim, and restore them after
    flat = einsum("bi,oij,bj->bo", input1.reshape(-1, in1), weight, input2.reshape(-1, in2))
    out = flat.reshape(*lead, weight.shape[0])
    return out if bias is None else out + bias


def _adaptive_sizes(op: str, output_size: Any, in_sizes: tuple[int, ...]) -> tuple[int, ...]:
    """output_size (an int, or one entry per dim, None keeping the input's size) as ints >= 1."""
    n = len(in_sizes)
    sizes = (output_size,) * n if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != n:
        raise ValueError(f"{op}: output_size must be an int or {n} ints (None keeps a size), got {output_size!r}")
    out = tuple(size if o is None else operator.index(o) for o, size in zip(sizes, in_sizes, strict=True))
    if min(out) < 1:
        raise ValueError(f"{op}: output_size must be >= 1, got {output_size!r}")
    return out


def _adaptive_max_last(x: Any, n_out: int) -> Any:
    """Adaptive max over the last dim: output i is the max of positions floor(i·L/n) .. ceil((i+1)·L/n) - 1
    (PyTorch's windows), one slice and amax per output position, joined by cat."""
    size = x.shape[-1]
    if size == n_out:
        return x
    parts = []
    for i in range(n_out):
        start, end = (i * size) // n_out, -((-(i + 1) * size) // n_out)
        parts.append(amax(x[..., start:end], dim=-1, keepdim=True))
    return parts[0] if n_out == 1 else cat(parts, dim=-1)


def _check_pool_input(op: str, x: Any, nd: int) -> None:
    if not isinstance(x, Tensor) or x.dtype.kind != "f":
        raise DTypeError(f"{op}: input must be a float32 or float64 Tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim not in (nd + 1, nd + 2):
        raise ShapeError(input_rank_message(op, nd, x.shape))
    if min(x.shape[-nd:]) < 1:
        raise ShapeError(f"{op}: input of shape {tuple(x.shape)} has an empty spatial dim")


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of [N, C, H, W] or [C, H, W] to [.., oh, ow] (PyTorch's F.adaptive_max_pool2d): cell (i, j)
    is the max over rows floor(i·H/oh) .. ceil((i+1)·H/oh) - 1 and the same columns; None keeps a size. When the
    sizes divide it is one max_pool2d; otherwise a max over each column window, then each row window.

    >>> from rtxviz import Tensor
    >>> adaptive_max_pool2d(Tensor.arange(16.0).reshape(1, 1, 4, 4), (1, 2)).tolist()
    [[[[13.0, 15.0]]]]
    """
    op = "adaptive_max_pool2d"
    if return_indices:
        raise ValueError(f"{op}: return_indices=True is not supported (the engine has no max_unpool2d to use the "
                         "indices with)")
    _check_pool_input(op, input, 2)
    h, w = input.shape[-2:]
    oh, ow = _adaptive_sizes(op, output_size, (h, w))
    if h % oh == 0 and w % ow == 0:
        return max_pool2d(input, (h // oh, w // ow))
    cols = _adaptive_max_last(input, ow)
    return _adaptive_max_last(cols.transpose(-1, -2), oh).transpose(-1, -2)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of [N, C, L] or [C, L] to [.., output_size] (PyTorch's F.adaptive_max_pool1d)."""
    op = "adaptive_max_pool1d"
    if return_indices:
        raise ValueError(f"{op}: return_indices=True is not supported (the engine has no max_unpool1d to use the "
                         "indices with)")
    _check_pool_input(op, input, 1)
    (n,) = _adaptive_sizes(op, output_size, (input.shape[-1],))
    if input.shape[-1] % n == 0:
        return max_pool1d(input, input.shape[-1] // n)
    return _adaptive_max_last(input, n)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Any:
    """Average pooling of [N, C, L] or [C, L] to [.., output_size] (PyTorch's F.adaptive_avg_pool1d):
    adaptive_avg_pool2d over a height of 1.

    >>> from rtxviz import Tensor
    >>> adaptive_avg_pool1d(Tensor.arange(6.0).reshape(1, 6), 2).tolist()
    [[1.0, 4.0]]
    """
    op = "adaptive_avg_pool1d"
    _check_pool_input(op, input, 1)
    (n,) = _adaptive_sizes(op, output_size, (input.shape[-1],))
    return squeeze(adaptive_avg_pool2d(unsqueeze(input, -2), (1, n)), -2)
