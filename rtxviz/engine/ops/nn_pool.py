"""max_pool2d, avg_pool2d and embedding, each with a gradient op whose own backward is the forward again.

- max_pool2d keeps the flat position of each window's maximum; its gradient `max_pool2d_scatter` adds dY at
  those positions, and the adjoint of that scatter is `max_pool2d_gather` (read at those positions).
- avg_pool2d's gradient `avg_pool2d_grad` spreads dY/(kh·kw) over each window; its adjoint is avg_pool2d.
- embedding gathers rows; its gradient `embedding_grad` scatter-adds rows (repeated ids accumulate), and the
  adjoint of that is embedding again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..device import xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, implements, tensor_method
from .nn_conv import Pair, _pair, out_size, pad2d, window
from .nn_loss import IndexArg, index_array
from .shape import scatter_add as _scatter_add


def _pool_geom(attrs: dict) -> tuple[Pair, Pair, Pair]:
    k = _pair(attrs["kernel_size"])
    s = attrs.get("stride")
    return k, (k if s is None else _pair(s)), _pair(attrs.get("padding", 0))


# -- max pooling ---------------------------------------------------------------------------------------------------
def _offsets(kh: int, kw: int) -> list[tuple[int, int, int]]:
    return [(i * kw + j, i, j) for i in range(kh) for j in range(kw)]


class MaxPool2d(Op):
    name = "max_pool2d"
    kind = "pool"
    keeps_finite = True
    rule = "dX = dY routed to each window's argmax"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        (kh, kw), stride, (ph, pw) = _pool_geom(ctx.attrs)
        h, w = x.shape[2:]
        ho, wo = out_size(h, kh, stride[0], ph, 1), out_size(w, kw, stride[1], pw, 1)
        xpad = pad2d(x, ph, pw, -np.inf)
        best = window(xpad, 0, 0, ho, wo, stride, (1, 1)).copy()
        maximum = xp_of(x).maximum
        for i in range(kh):
            for j in range(kw):
                if i or j:
                    maximum(best, window(xpad, i, j, ho, wo, stride, (1, 1)), out=best)
        return best

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # The window masks are found by the scatter op from (X, Y), inside its forward: a graph-cache replay then
        # recomputes them from the new values (and inference, which never runs backward, never pays for them).
        (kh, kw), stride, (ph, pw) = _pool_geom(ctx.attrs)
        x = ctx.saved_inputs[0].data
        attrs = {"kernel_size": (kh, kw), "stride": stride, "padding": (ph, pw), "input_size": tuple(x.shape[2:])}
        return (apply(MaxPool2dScatter, (g, Tensor._wrap(x), Tensor._wrap(ctx.out_data)), attrs),)


def _window_masks(x: Any, best: Any, attrs: dict) -> Any:
    """One boolean mask per kernel offset: where that offset holds its window's maximum (only the first maximum
    of a window wins, as PyTorch). Bool arithmetic is much faster than where/copyto."""
    (kh, kw), stride, (ph, pw) = _pool_geom(attrs)
    ho, wo = best.shape[2:]
    xp = xp_of(x)
    xpad = pad2d(x, ph, pw, -np.inf)
    masks = xp.empty((kh * kw,) + best.shape, dtype=bool)
    taken = None
    for a, i, j in _offsets(kh, kw):
        hit = window(xpad, i, j, ho, wo, stride, (1, 1)) == best
        if taken is None:
            masks[a] = hit
            taken = hit
        else:
            xp.logical_and(hit, xp.logical_not(taken), out=masks[a])
            taken |= hit
    return masks


class MaxPool2dScatter(Op):
    """dY added at each window's argmax: inputs (dY, X, Y) find the argmax masks in forward (kept in ctx.state);
    input (dY,) alone reads them from attrs["argmax"] (the adjoint of max_pool2d_gather)."""

    name = "max_pool2d_scatter"
    kind = "gradient"
    rule = "d(dY) = dX̃ read at the argmax positions (max_pool2d_gather)"
    examples = (Example(lambda g: apply(MaxPool2dScatter, (g, _X44, _X44_MAX), _POOL22), ((1, 1, 2, 2),)),)

    @staticmethod
    def forward(ctx: Any, g: Any, x: Any = None, best: Any = None) -> Any:
        (kh, kw), stride, (ph, pw) = _pool_geom(ctx.attrs)
        h, w = ctx.attrs["input_size"]
        masks = ctx.attrs["argmax"].array if x is None else _window_masks(x, best, ctx.attrs)
        ctx.state = masks
        n, c, ho, wo = g.shape
        xp = xp_of(g)
        dx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=g.dtype)
        overlap = stride[0] < kh or stride[1] < kw
        for a, i, j in _offsets(kh, kw):
            target = window(dx, i, j, ho, wo, stride, (1, 1))
            if overlap:
                target += g * masks[a]
            else:  # disjoint windows: each position is written once
                xp.multiply(g, masks[a], out=target)
        if ph or pw:
            dx = xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])
        return dx

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        attrs = {k: v for k, v in ctx.attrs.items() if k != "argmax"}
        attrs["argmax"] = IndexArg(ctx.state)
        return (apply(MaxPool2dGather, (h,), attrs),) + (None,) * (len(ctx.next) - 1)


class MaxPool2dGather(Op):
    name = "max_pool2d_gather"
    kind = "gradient"
    # read at the argmax of a fixed input: the adjoint of max_pool2d_scatter
    rule = "dX̃ = max_pool2d_scatter(dY)"
    examples = (Example(lambda x: apply(MaxPool2dGather, (x,), {**_POOL22, "argmax": _X44_ARGMAX}), ((1, 1, 4, 4),)),)

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        (kh, kw), stride, (ph, pw) = _pool_geom(ctx.attrs)
        masks = ctx.attrs["argmax"].array
        ho, wo = masks.shape[3:]
        xpad = pad2d(x, ph, pw)
        out = window(xpad, 0, 0, ho, wo, stride, (1, 1)) * masks[0]
        for a, i, j in _offsets(kh, kw)[1:]:
            out += window(xpad, i, j, ho, wo, stride, (1, 1)) * masks[a]
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(MaxPool2dScatter, (g,), ctx.attrs),)


# a fixed input without ties in its 2x2 windows, for max_pool2d_gather's example
_X44 = Tensor(np.arange(16.0).reshape(1, 1, 4, 4)[:, :, ::-1].copy())
_X44_MAX = Tensor(_X44.data.reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5)))
_POOL22 = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "input_size": (4, 4)}
# attrs arrays the examples pass must belong to Tensors that exist before a graph-cache capture (the capture
# binds them by reference; a bare array it has never seen would make it refuse)
_X44_MASKS = Tensor(_window_masks(_X44.data, _X44_MAX.data, _POOL22))
_X44_ARGMAX = IndexArg(_X44_MASKS.data)
_IDS_T = Tensor(np.array([[1, 0], [1, 3]]))
_IDS = IndexArg(_IDS_T.data)


# -- average pooling -----------------------------------------------------------------------------------------------
class AvgPool2d(Op):
    name = "avg_pool2d"
    kind = "pool"
    rule = "dX = dY / (kh·kw) spread over each window"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        (kh, kw), stride, (ph, pw) = _pool_geom(ctx.attrs)
        n, c, h, w = x.shape
        ho, wo = out_size(h, kh, stride[0], ph, 1), out_size(w, kw, stride[1], pw, 1)
        ctx.state = (h, w)
        xpad = pad2d(x, ph, pw)
        out = window(xpad, 0, 0, ho, wo, stride, (1, 1)).copy()
        for i in range(kh):
            for j in range(kw):
                if i or j:
                    out += window(xpad, i, j, ho, wo, stride, (1, 1))
        out *= x.dtype.type(1.0 / (kh * kw))  # count_include_pad=True, PyTorch's default
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(AvgPool2dGrad, (g,), {**ctx.attrs, "input_size": ctx.state}),)


class AvgPool2dGrad(Op):
    name = "avg_pool2d_grad"
    kind = "gradient"
    examples = (Example(lambda g: apply(AvgPool2dGrad, (g,), {"kernel_size": (2, 2), "stride": (1, 1),
                                                               "padding": (1, 1), "input_size": (3, 4)}),
                        ((2, 1, 4, 5),)),)
    rule = "d(dY) = avg_pool2d(dX̃)"

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        (kh, kw), stride, (ph, pw) = _pool_geom(ctx.attrs)
        h, w = ctx.attrs["input_size"]
        n, c, ho, wo = g.shape
        xp = xp_of(g)
        dx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=g.dtype)
        gs = g * g.dtype.type(1.0 / (kh * kw))
        for i in range(kh):
            for j in range(kw):
                window(dx, i, j, ho, wo, stride, (1, 1))[...] += gs
        if ph or pw:
            dx = xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])
        return dx

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        attrs = {k: v for k, v in ctx.attrs.items() if k != "input_size"}
        return (apply(AvgPool2d, (h,), attrs),)


def _pool(op_cls: type, op: str, x: Tensor, kernel_size: int | Pair, stride: int | Pair | None,
          padding: int | Pair) -> Any:
    if not is_float(x.dtype):
        raise DTypeError(f"{op}: input must be float32 or float64, got {x.dtype}")
    if x.ndim != 4:
        raise ShapeError(f"{op}: input must be [N, C, H, W] (4 dims), got shape {x.shape}")
    k = _pair(kernel_size)
    s = k if stride is None else _pair(stride)
    p = _pair(padding)
    if min(k) < 1 or min(s) < 1 or min(p) < 0:
        raise ValueError(f"{op}: kernel_size and stride must be >= 1 and padding >= 0, got kernel_size {k}, "
                         f"stride {s}, padding {p}")
    if p[0] * 2 > k[0] or p[1] * 2 > k[1]:
        raise ValueError(f"{op}: padding {p} must be at most half the kernel size {k}")
    h, w = x.shape[2:]
    if k[0] > h + 2 * p[0] or k[1] > w + 2 * p[1]:
        raise ShapeError(f"{op}: kernel {k} is larger than the padded input ({h + 2 * p[0]}, {w + 2 * p[1]}) "
                         f"(input {x.shape}, padding {p})")
    return apply(op_cls, (x,), {"kernel_size": k, "stride": s, "padding": p})


@tensor_method("max_pool2d")
@implements(MaxPool2d)
def max_pool2d(x: Tensor, kernel_size: int | Pair, stride: int | Pair | None = None,
               padding: int | Pair = 0) -> Any:
    """The maximum of each kh×kw window of x [N, C, H, W] (stride defaults to the kernel size).

    >>> from rtxviz import Tensor
    >>> max_pool2d(Tensor.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _pool(MaxPool2d, "max_pool2d", x, kernel_size, stride, padding)


@tensor_method("avg_pool2d")
@implements(AvgPool2d)
def avg_pool2d(x: Tensor, kernel_size: int | Pair, stride: int | Pair | None = None,
               padding: int | Pair = 0) -> Any:
    """The mean of each kh×kw window of x [N, C, H, W] (zero padding counts, as PyTorch's default).

    >>> from rtxviz import Tensor
    >>> avg_pool2d(Tensor.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    return _pool(AvgPool2d, "avg_pool2d", x, kernel_size, stride, padding)



# -- embedding -----------------------------------------------------------------------------------------------------
class Embedding(Op):
    name = "embedding"
    kind = "nn"
    rule = "dW[i] = Σ dY at every position whose id is i (scatter-add)"

    @staticmethod
    def forward(ctx: Any, weight: Any, ids: Any = None) -> Any:
        if ids is None:
            ids = ctx.attrs["indices"].array
        ctx.state = (ids, weight.shape[0])
        return weight[ids]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        ids, num = ctx.state
        grad = apply(EmbeddingGrad, (g,), {"indices": IndexArg(ids), "num_embeddings": num})
        return (grad,) if len(ctx.next) == 1 else (grad, None)


class EmbeddingGrad(Op):
    name = "embedding_grad"
    kind = "gradient"
    examples = (Example(lambda g: apply(EmbeddingGrad, (g,), {"indices": _IDS, "num_embeddings": 4}), ((2, 2, 3),)),)
    rule = "d(dY) = embedding(dW̃, ids)"

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        ids = ctx.attrs["indices"].array
        d = g.shape[-1]
        out = xp_of(g).zeros((ctx.attrs["num_embeddings"], d), dtype=g.dtype)
        _scatter_add(out, ids.reshape(-1), g.reshape(-1, d))
        return out

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        return (apply(Embedding, (h,), {"indices": ctx.attrs["indices"]}),)


@implements(Embedding, call=lambda weight, indices: embedding(indices, weight))  # the format lists (weight, ids)
def embedding(indices: Any, weight: Tensor) -> Any:
    """Rows of `weight` [V, D] at int64 `indices` of any shape: the result is indices.shape + (D,).

    Argument order as PyTorch's `F.embedding(input, weight)`.

    >>> from rtxviz import Tensor
    >>> embedding(Tensor([2, 0]), Tensor.arange(6.0).reshape(3, 2)).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """
    op = "embedding"
    if not isinstance(weight, Tensor) or not is_float(weight.dtype):
        raise DTypeError(f"{op}: weight must be a float32 or float64 Tensor, got "
                         f"{getattr(weight, 'dtype', type(weight).__name__)}")
    if weight.ndim != 2:
        raise ShapeError(f"{op}: weight must be [num_embeddings, dim] (2 dims), got shape {weight.shape}")
    ids = index_array(op, "indices", indices, weight)
    v = weight.shape[0]
    if ids.size:
        bad = (ids < 0) | (ids >= v)
        if bool(bad.any()):
            xp = xp_of(ids)
            pos = int(xp.argmax(bad.reshape(-1)))
            raise ShapeError(f"{op}: index {int(ids.reshape(-1)[pos])} at flat position {pos} is out of range "
                             f"for a weight with {v} rows (expected 0..{v - 1}; indices shape {tuple(ids.shape)})")
    return apply(Embedding, (weight,), {"indices": IndexArg(ids)})
