"""max_pool2d, avg_pool2d, adaptive_avg_pool2d and embedding, each with a gradient op whose own backward is the
forward again.

- max_pool2d keeps the flat position of each window's maximum; its gradient `max_pool2d_scatter` adds dY at
  those positions, and the adjoint of that scatter is `max_pool2d_gather` (read at those positions).
- avg_pool2d's gradient `avg_pool2d_grad` spreads dY / (window size) over each window; its adjoint is avg_pool2d.
- adaptive_avg_pool2d is separable and linear, Y = A_h·X·A_wᵀ; its gradient `adaptive_avg_pool2d_grad` is
  A_hᵀ·dY·A_w, and the adjoint of that is adaptive_avg_pool2d again.
- embedding gathers rows; its gradient `embedding_grad` scatter-adds rows (repeated ids accumulate; the row
  padding_idx gets none), and the adjoint of that is embedding again.

Padding, ceil mode and the divisors follow PyTorch (rtxviz/reference/FORMAT.md spells them out): max pads with
-inf, avg with zeros; ceil mode's last windows may reach past the padded input (padded alike, and not counted
in avg's divisor), and a last window that would start in the bottom or right padding is dropped.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ... import accel
from ..device import xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, constant, implements, tensor_method
from .arithmetic import mul
from .nn_conv import Pair, _pair, _single, input_rank_message, pad2d, window
from .nn_loss import IndexArg, index_array
from .shape import scatter_add as _scatter_add
from .shape import squeeze, unsqueeze


def _pool_geom(attrs: dict) -> tuple[Pair, Pair, Pair, Pair]:
    """(kernel_size, stride, padding, dilation) of a pooling op's attrs (stride None: the kernel size)."""
    k = _pair(attrs["kernel_size"])
    s = attrs.get("stride")
    return k, (k if s is None else _pair(s)), _pair(attrs.get("padding", 0)), _pair(attrs.get("dilation", 1))


def pool_out_size(size: int, k: int, s: int, p: int, d: int = 1, ceil_mode: bool = False) -> int:
    """PyTorch's pooled size: floor (or ceil) of (size + 2p - d(k-1) - 1) / s, plus 1; in ceil mode a last window
    that would start in the bottom or right padding is dropped."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_plan(attrs: dict, h: int, w: int) -> tuple[int, int, Pair]:
    """(ho, wo, extra): the output size, and the rows and columns that ceil mode's last windows reach past the
    padded input (padded like it: -inf for max, zeros for avg)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _pool_geom(attrs)
    ceil = attrs.get("ceil_mode", False)
    ho, wo = pool_out_size(h, kh, sh, ph, dh, ceil), pool_out_size(w, kw, sw, pw, dw, ceil)
    extra = (max(0, (ho - 1) * sh + dh * (kh - 1) + 1 - h - 2 * ph),
             max(0, (wo - 1) * sw + dw * (kw - 1) + 1 - w - 2 * pw))
    return ho, wo, extra


def _crop(dx: Any, ph: int, pw: int, h: int, w: int) -> Any:
    """The input's part [.., h, w] of a padded gradient buffer."""
    if dx.shape[2] == h and dx.shape[3] == w:
        return dx
    return xp_of(dx).ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])


class _Attrs:
    """A context that has only attrs: to run a linear op's forward as its own batch rule."""

    __slots__ = ("attrs", "state")

    def __init__(self, attrs: dict) -> None:
        self.attrs, self.state = attrs, None


# -- max pooling ---------------------------------------------------------------------------------------------------
def _offsets(kh: int, kw: int) -> list[tuple[int, int, int]]:
    return [(i * kw + j, i, j) for i in range(kh) for j in range(kw)]


class WindowMax:
    """The pooled input and its window maxima (X, Y), carried where the argmax masks would be: the compiled
    scatter finds each window's first maximum from them in its one pass, and the masks are made from them only if
    a second derivative asks (max_pool2d_gather). Arrays in a slotted holder, so that a graph-cache capture binds
    them (they are an op's input and output) instead of refusing a mask computed outside the ops."""

    __slots__ = ("x", "best")

    def __init__(self, x: Any, best: Any) -> None:
        self.x, self.best = x, best

    def __repr__(self) -> str:
        return f"<window maxima {tuple(self.best.shape)} of {tuple(self.x.shape)}>"


def _argmax_masks(argmax: Any, attrs: dict) -> Any:
    """The argmax masks [kh·kw, N, C, Ho, Wo] from an IndexArg of them or a WindowMax."""
    if isinstance(argmax, WindowMax):
        return _window_masks(argmax.x, argmax.best, attrs)
    return argmax.array


def _native_pool(*arrays: Any) -> bool:
    """Whether the compiled max-pooling kernels take these arrays: numpy float32 or float64 of one dtype, not
    empty, and only where the compiled module has them (read at each call, so a test can switch it off)."""
    return accel.max_pool2d_forward is not None and all(
        type(a) is np.ndarray and a.dtype == arrays[0].dtype and a.dtype in (np.float32, np.float64) and a.size > 0
        for a in arrays)


def _native_geom(attrs: dict, x_shape: tuple, ho: int, wo: int) -> tuple[int, ...]:
    """The kernels' geometry arguments (planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _pool_geom(attrs)
    n, c, h, w = x_shape
    return n * c, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw


class MaxPool2d(Op):
    name = "max_pool2d"
    kind = "pool"
    keeps_finite = True
    rule = "dX = dY routed to each window's argmax"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        (kh, kw), stride, (ph, pw), dil = _pool_geom(ctx.attrs)
        ho, wo, extra = _pool_plan(ctx.attrs, *x.shape[2:])
        if _native_pool(x):  # one pass in C (rtxviz/_native.c), the same values
            out = np.empty((*x.shape[:2], ho, wo), dtype=x.dtype)
            accel.max_pool2d_forward(np.ascontiguousarray(x), out, *_native_geom(ctx.attrs, x.shape, ho, wo))
            return out
        xpad = pad2d(x, ph, pw, -np.inf, extra)
        best = window(xpad, 0, 0, ho, wo, stride, dil).copy()
        maximum = xp_of(x).maximum
        for _, i, j in _offsets(kh, kw)[1:]:
            maximum(best, window(xpad, i, j, ho, wo, stride, dil), out=best)
        return best

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # The window masks are found by the scatter op from (X, Y), inside its forward: a graph-cache replay then
        # recomputes them from the new values (and inference, which never runs backward, never pays for them).
        x = ctx.saved_inputs[0].data
        attrs = {**ctx.attrs, "input_size": tuple(x.shape[2:])}
        return (apply(MaxPool2dScatter, (g, Tensor._wrap(x), Tensor._wrap(ctx.out_data)), attrs),)


def _window_masks(x: Any, best: Any, attrs: dict) -> Any:
    """One boolean mask per kernel offset: where that offset holds its window's maximum (only the first maximum
    of a window wins, as PyTorch). Bool arithmetic is much faster than where/copyto."""
    (kh, kw), stride, (ph, pw), dil = _pool_geom(attrs)
    ho, wo = best.shape[2:]
    xp = xp_of(x)
    xpad = pad2d(x, ph, pw, -np.inf, _pool_plan(attrs, *x.shape[2:])[2])
    masks = xp.empty((kh * kw,) + best.shape, dtype=bool)
    taken = None
    for a, i, j in _offsets(kh, kw):
        hit = window(xpad, i, j, ho, wo, stride, dil) == best
        if taken is None:
            masks[a] = hit
            taken = hit
        else:
            xp.logical_and(hit, xp.logical_not(taken), out=masks[a])
            taken |= hit
    return masks


class MaxPool2dScatter(Op):
    """dY added at each window's argmax: inputs (dY, X, Y) find the argmax in forward (the compiled kernel in one
    pass, keeping WindowMax(X, Y) in ctx.state; numpy through the masks, kept instead); input (dY,) alone reads
    attrs["argmax"] (the adjoint of max_pool2d_gather): masks, or a WindowMax."""

    name = "max_pool2d_scatter"
    kind = "gradient"
    rule = "d(dY) = dX̃ read at the argmax positions (max_pool2d_gather)"
    examples = (Example(lambda g: apply(MaxPool2dScatter, (g, _X44, _X44_MAX), _POOL22), ((1, 1, 2, 2),)),
                Example(lambda g: apply(MaxPool2dScatter, (g, _X55, _X55_MAX), _POOL_CEIL), ((1, 1, 3, 3),)))

    @staticmethod
    def forward(ctx: Any, g: Any, x: Any = None, best: Any = None) -> Any:
        (kh, kw), stride, (ph, pw), dil = _pool_geom(ctx.attrs)
        h, w = ctx.attrs["input_size"]
        n, c, ho, wo = g.shape
        given = ctx.attrs.get("argmax")
        if x is None and isinstance(given, WindowMax):
            x, best = given.x, given.best
        if x is not None and _native_pool(g, x, best):
            # one pass in C: dY added at each window's first maximum, as the masks below route it; the masks
            # themselves are made only if a second derivative asks for them (max_pool2d_gather)
            dx = np.zeros((n, c, h, w), dtype=g.dtype)
            accel.max_pool2d_scatter(np.ascontiguousarray(g), np.ascontiguousarray(x), np.ascontiguousarray(best),
                                     dx, *_native_geom(ctx.attrs, x.shape, ho, wo))
            ctx.state = given if given is not None else WindowMax(x, best)
            return dx
        masks = _argmax_masks(given, ctx.attrs) if x is None else _window_masks(x, best, ctx.attrs)
        ctx.state = masks
        extra = _pool_plan(ctx.attrs, h, w)[2]
        xp = xp_of(g)
        dx = xp.zeros((n, c, h + 2 * ph + extra[0], w + 2 * pw + extra[1]), dtype=g.dtype)
        disjoint = dil == (1, 1) and stride[0] >= kh and stride[1] >= kw
        for a, i, j in _offsets(kh, kw):
            target = window(dx, i, j, ho, wo, stride, dil)
            if disjoint:  # each position is written once
                xp.multiply(g, masks[a], out=target)
            else:
                target += g * masks[a]
        return _crop(dx, ph, pw, h, w)

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        attrs = {k: v for k, v in ctx.attrs.items() if k != "argmax"}
        attrs["argmax"] = ctx.state if isinstance(ctx.state, WindowMax) else IndexArg(ctx.state)
        return (apply(MaxPool2dGather, (h,), attrs),) + (None,) * (len(ctx.next) - 1)


class MaxPool2dGather(Op):
    name = "max_pool2d_gather"
    kind = "gradient"
    # read at the argmax of a fixed input: the adjoint of max_pool2d_scatter
    rule = "dX̃ = max_pool2d_scatter(dY)"
    examples = (Example(lambda x: apply(MaxPool2dGather, (x,), {**_POOL22, "argmax": _X44_ARGMAX}), ((1, 1, 4, 4),)),
                Example(lambda x: apply(MaxPool2dGather, (x,), {**_POOL_CEIL, "argmax": _X55_ARGMAX}),
                        ((1, 1, 5, 5),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        (kh, kw), stride, (ph, pw), dil = _pool_geom(ctx.attrs)
        masks = _argmax_masks(ctx.attrs["argmax"], ctx.attrs)
        ho, wo = masks.shape[3:]
        xpad = pad2d(x, ph, pw, 0.0, _pool_plan(ctx.attrs, *x.shape[2:])[2])
        out = window(xpad, 0, 0, ho, wo, stride, dil) * masks[0]
        for a, i, j in _offsets(kh, kw)[1:]:
            out += window(xpad, i, j, ho, wo, stride, dil) * masks[a]
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(MaxPool2dScatter, (g,), ctx.attrs),)


# fixed inputs without ties in their windows, for the gradient ops' examples
_X44 = Tensor(np.arange(16.0).reshape(1, 1, 4, 4)[:, :, ::-1].copy())
_X44_MAX = Tensor(_X44.data.reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5)))
_POOL22 = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "input_size": (4, 4)}
_X55 = Tensor(np.random.default_rng(5).permutation(25).astype(np.float64).reshape(1, 1, 5, 5))
_POOL_CEIL = {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True, "input_size": (5, 5)}
_X55_MAX = Tensor(MaxPool2d.forward(_Attrs(_POOL_CEIL), _X55.data))
# attrs arrays the examples pass must belong to Tensors that exist before a graph-cache capture (the capture
# binds them by reference; a bare array it has never seen would make it refuse)
_X44_MASKS = Tensor(_window_masks(_X44.data, _X44_MAX.data, _POOL22))
_X44_ARGMAX = IndexArg(_X44_MASKS.data)
_X55_MASKS = Tensor(_window_masks(_X55.data, _X55_MAX.data, _POOL_CEIL))
_X55_ARGMAX = IndexArg(_X55_MASKS.data)
_IDS_T = Tensor(np.array([[1, 0], [1, 3]]))
_IDS = IndexArg(_IDS_T.data)


# -- average pooling -----------------------------------------------------------------------------------------------
def _divisor(attrs: dict, h: int, w: int, ho: int, wo: int, xp: Any, dtype: Any) -> Any:
    """What each window's sum is divided by: divisor_override; or the window clipped to the padded input
    (count_include_pad) or to the input itself: a scalar when every window has the same, else [ho, wo]."""
    (kh, kw), (sh, sw), (ph, pw), _ = _pool_geom(attrs)
    override = attrs.get("divisor_override")
    if override is not None:
        return dtype.type(override)
    include = attrs.get("count_include_pad", True)

    def counts(n_out: int, size: int, k: int, s: int, p: int) -> Any:
        start = xp.arange(n_out) * s - p
        end = xp.minimum(start + k, size + p)
        if not include:
            start, end = xp.maximum(start, 0), xp.minimum(end, size)
        return end - start

    ch, cw = counts(ho, h, kh, sh, ph), counts(wo, w, kw, sw, pw)
    if bool((ch == kh).all()) and bool((cw == kw).all()):
        return dtype.type(kh * kw)
    return (ch[:, None] * cw[None, :]).astype(dtype)


class AvgPool2d(Op):
    name = "avg_pool2d"
    kind = "pool"
    rule = "dX = dY / (window size) spread over each window"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        (kh, kw), stride, (ph, pw), _ = _pool_geom(ctx.attrs)
        h, w = x.shape[2:]
        ho, wo, extra = _pool_plan(ctx.attrs, h, w)
        ctx.state = (h, w)
        xpad = pad2d(x, ph, pw, 0.0, extra)
        out = window(xpad, 0, 0, ho, wo, stride, (1, 1)).copy()
        for _, i, j in _offsets(kh, kw)[1:]:
            out += window(xpad, i, j, ho, wo, stride, (1, 1))
        out /= _divisor(ctx.attrs, h, w, ho, wo, xp_of(x), x.dtype)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(AvgPool2dGrad, (g,), {**ctx.attrs, "input_size": ctx.state}),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        # linear, and the same on every sample: the batch of gradients as more samples
        b, n = g.shape[:2]
        dx = AvgPool2dGrad.forward(_Attrs({**ctx.attrs, "input_size": ctx.state}), g.reshape(b * n, *g.shape[2:]))
        return (dx.reshape(b, n, *dx.shape[1:]),)


class AvgPool2dGrad(Op):
    name = "avg_pool2d_grad"
    kind = "gradient"
    examples = (Example(lambda g: apply(AvgPool2dGrad, (g,), {"kernel_size": (2, 2), "stride": (1, 1),
                                                               "padding": (1, 1), "input_size": (3, 4)}),
                        ((2, 1, 4, 5),)),
                Example(lambda g: apply(AvgPool2dGrad, (g,), {"kernel_size": (3, 3), "stride": (2, 2),
                                                               "padding": (1, 1), "ceil_mode": True,
                                                               "count_include_pad": False, "input_size": (6, 6)}),
                        ((1, 2, 4, 4),)))
    rule = "d(dY) = avg_pool2d(dX̃)"

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        (kh, kw), stride, (ph, pw), _ = _pool_geom(ctx.attrs)
        h, w = ctx.attrs["input_size"]
        n, c, ho, wo = g.shape
        extra = _pool_plan(ctx.attrs, h, w)[2]
        xp = xp_of(g)
        dx = xp.zeros((n, c, h + 2 * ph + extra[0], w + 2 * pw + extra[1]), dtype=g.dtype)
        gs = g / _divisor(ctx.attrs, h, w, ho, wo, xp, g.dtype)
        for _, i, j in _offsets(kh, kw):
            window(dx, i, j, ho, wo, stride, (1, 1))[...] += gs
        return _crop(dx, ph, pw, h, w)

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        attrs = {k: v for k, v in ctx.attrs.items() if k != "input_size"}
        return (apply(AvgPool2d, (h,), attrs),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        b, n = g.shape[:2]
        attrs = {k: v for k, v in ctx.attrs.items() if k != "input_size"}
        y = AvgPool2d.forward(_Attrs(attrs), g.reshape(b * n, *g.shape[2:]))
        return (y.reshape(b, n, *y.shape[1:]),)


def _pool(op_cls: type, op: str, x: Tensor, kernel_size: int | Pair, stride: int | Pair | None,
          padding: int | Pair, dilation: int | Pair = 1, **extra: Any) -> Any:
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise DTypeError(f"{op}: input must be a float32 or float64 Tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim == 3:  # unbatched [C, H, W]: a batch of one, as PyTorch's
        return squeeze(_pool(op_cls, op, unsqueeze(x, 0), kernel_size, stride, padding, dilation, **extra), 0)
    if x.ndim != 4:
        raise ShapeError(input_rank_message(op, 2, x.shape))
    k = _pair(kernel_size)
    s = k if stride is None or (isinstance(stride, list | tuple) and not stride) else _pair(stride)
    p, d = _pair(padding), _pair(dilation)
    if min(k) < 1 or min(s) < 1 or min(p) < 0 or min(d) < 1:
        raise ValueError(f"{op}: kernel_size, stride and dilation must be >= 1 and padding >= 0, got kernel_size "
                         f"{k}, stride {s}, padding {p}" + (f", dilation {d}" if d != (1, 1) else ""))
    ek = (d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1)
    if p[0] * 2 > ek[0] or p[1] * 2 > ek[1]:
        raise ValueError(f"{op}: padding {p} must be at most half the kernel size {ek}")
    attrs: dict = {"kernel_size": k, "stride": s, "padding": p}
    if d != (1, 1):
        attrs["dilation"] = d
    attrs.update({key: v for key, v in extra.items() if v is not None})
    h, w = x.shape[2:]
    ho, wo, _ = _pool_plan(attrs, h, w)
    if ho < 1 or wo < 1:
        raise ShapeError(f"{op}: kernel {ek} is larger than the padded input ({h + 2 * p[0]}, {w + 2 * p[1]}) "
                         f"(input {x.shape}, padding {p})")
    return apply(op_cls, (x,), attrs)


@tensor_method("max_pool2d")
@implements(MaxPool2d)
def max_pool2d(x: Tensor, kernel_size: int | Pair, stride: int | Pair | None = None, padding: int | Pair = 0,
               dilation: int | Pair = 1, ceil_mode: bool = False) -> Any:
    """The maximum of each kh×kw window of x [N, C, H, W] (stride defaults to the kernel size; padding counts as
    -inf; ceil_mode rounds the output size up, as PyTorch's F.max_pool2d).

    An unbatched x [C, H, W] gives an unbatched output, as PyTorch's.

    >>> from rtxviz import Tensor
    >>> max_pool2d(Tensor.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    >>> max_pool2d(Tensor.arange(9.0).reshape(1, 1, 3, 3), 2, ceil_mode=True).tolist()
    [[[[4.0, 5.0], [7.0, 8.0]]]]
    """
    return _pool(MaxPool2d, "max_pool2d", x, kernel_size, stride, padding, dilation,
                 ceil_mode=True if ceil_mode else None)


@tensor_method("avg_pool2d")
@implements(AvgPool2d)
def avg_pool2d(x: Tensor, kernel_size: int | Pair, stride: int | Pair | None = None, padding: int | Pair = 0,
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Any:
    """The mean of each kh×kw window of x [N, C, H, W], as PyTorch's F.avg_pool2d: zero padding counts unless
    count_include_pad is False; ceil_mode rounds the output size up (its last windows divide by their part
    inside the padded input); divisor_override replaces the divisor.

    An unbatched x [C, H, W] gives an unbatched output, as PyTorch's.

    >>> from rtxviz import Tensor
    >>> avg_pool2d(Tensor.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[2.5, 4.5], [10.5, 12.5]]]]
    >>> avg_pool2d(Tensor.ones([1, 1, 2, 2]), 2, padding=1, count_include_pad=False).tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """
    if divisor_override is not None and int(divisor_override) < 1:
        raise ValueError(f"avg_pool2d: divisor_override must be >= 1, got {divisor_override}")
    return _pool(AvgPool2d, "avg_pool2d", x, kernel_size, stride, padding, ceil_mode=True if ceil_mode else None,
                 count_include_pad=None if count_include_pad else False,
                 divisor_override=None if divisor_override is None else int(divisor_override))


# -- 1-D pooling: the 2-D ops on a height of 1 ---------------------------------------------------------------
def _pool1d(op_cls: type, op: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
            ceil_mode: bool, **extra: Any) -> Any:
    """A 1-D pooling of x [N, C, L] or unbatched [C, L] as its 2-D op over [N, C, 1, L] (kernel (1, k), ...),
    between an unsqueeze and a squeeze (ops, so the graph, gradients and a graph-cache replay are the 2-D
    op's), with the arguments checked as the 1-D ints they are."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise DTypeError(f"{op}: input must be a float32 or float64 Tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim not in (2, 3):
        raise ShapeError(input_rank_message(op, 1, x.shape))
    k = _single(op, "kernel_size", kernel_size, 1)
    s = k if stride is None or (isinstance(stride, list | tuple) and not stride) else _single(op, "stride", stride, 1)
    p, d = _single(op, "padding", padding, 0), _single(op, "dilation", dilation, 1)
    ek = d * (k - 1) + 1
    if 2 * p > ek:
        raise ValueError(f"{op}: padding {p} must be at most half the kernel size {ek}")
    length = x.shape[-1]
    if pool_out_size(length, k, s, p, d, ceil_mode) < 1:
        raise ShapeError(f"{op}: kernel {ek} is larger than the padded input {length + 2 * p} (input {x.shape}, "
                         f"padding {p})")
    unbatched = x.ndim == 2
    x4 = unsqueeze(unsqueeze(x, 0) if unbatched else x, 2)
    out = squeeze(_pool(op_cls, op, x4, (1, k), (1, s), (0, p), (1, d), ceil_mode=True if ceil_mode else None,
                        **extra), 2)
    return squeeze(out, 0) if unbatched else out


def max_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0, dilation: int = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """The maximum of each window of k positions of x [N, C, L] or unbatched [C, L], as PyTorch's F.max_pool1d
    (stride defaults to the kernel size; padding counts as -inf): max_pool2d over a height of 1.

    >>> from rtxviz import Tensor
    >>> max_pool1d(Tensor.from_slice([1.0, 5.0, 2.0, 4.0, 3.0], [1, 5]), 2, ceil_mode=True).tolist()
    [[5.0, 4.0, 3.0]]
    """
    if return_indices:
        raise ValueError("max_pool1d: return_indices=True is not supported (the engine has no max_unpool1d to use "
                         "the indices with)")
    return _pool1d(MaxPool2d, "max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Any:
    """The mean of each window of k positions of x [N, C, L] or unbatched [C, L], as PyTorch's F.avg_pool1d (zero
    padding counts unless count_include_pad is False): avg_pool2d over a height of 1.

    >>> from rtxviz import Tensor
    >>> avg_pool1d(Tensor.from_slice([1.0, 5.0, 2.0, 4.0], [1, 1, 4]), 2).tolist()
    [[[3.0, 3.0]]]
    """
    return _pool1d(AvgPool2d, "avg_pool1d", x, kernel_size, stride, padding, 1, ceil_mode,
                   count_include_pad=None if count_include_pad else False)


# -- adaptive average pooling ---------------------------------------------------------------------------------
def _adaptive_matrix(n_out: int, size: int, xp: Any, dtype: Any) -> Any:
    """[n_out, size]: row i averages positions floor(i·size/n_out) .. ceil((i+1)·size/n_out) - 1."""
    i = xp.arange(n_out)
    start = (i * size) // n_out
    end = -((-(i + 1) * size) // n_out)
    j = xp.arange(size)[None, :]
    m = ((j >= start[:, None]) & (j < end[:, None])).astype(dtype)
    m /= (end - start)[:, None].astype(dtype)
    return m


def _adaptive(x: Any, out_hw: Pair) -> Any:
    """Y = A_h · X · A_wᵀ over the last two dims (a reshape and a mean when the sizes divide)."""
    (oh, ow), (h, w) = out_hw, x.shape[-2:]
    lead = x.shape[:-2]
    if h % oh == 0 and w % ow == 0:
        return x.reshape(*lead, oh, h // oh, ow, w // ow).mean(axis=(-3, -1))
    xp = xp_of(x)
    return _adaptive_matrix(oh, h, xp, x.dtype) @ (x @ _adaptive_matrix(ow, w, xp, x.dtype).T)


def _adaptive_t(g: Any, in_hw: Pair) -> Any:
    """The adjoint, dX = A_hᵀ · dY · A_w: each output cell's gradient spread evenly over its window."""
    (oh, ow), (h, w) = g.shape[-2:], in_hw
    lead = g.shape[:-2]
    xp = xp_of(g)
    if h % oh == 0 and w % ow == 0:
        kh, kw = h // oh, w // ow
        spread = xp.broadcast_to((g / g.dtype.type(kh * kw))[..., :, None, :, None], (*lead, oh, kh, ow, kw))
        return spread.reshape(*lead, h, w)
    return _adaptive_matrix(oh, h, xp, g.dtype).T @ (g @ _adaptive_matrix(ow, w, xp, g.dtype))


class AdaptiveAvgPool2d(Op):
    """Average pooling to a given output size: linear and separable, Y = A_h · X · A_wᵀ per channel."""

    name = "adaptive_avg_pool2d"
    kind = "pool"
    rule = "dX = A_hᵀ · dY · A_w (dY spread evenly over each cell's window)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = tuple(x.shape[-2:])
        return _adaptive(x, ctx.attrs["output_size"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(AdaptiveAvgPool2dGrad, (g,), {**ctx.attrs, "input_size": ctx.state}),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (_adaptive_t(g, ctx.state),)  # any leading dims: the batch dim is one more


class AdaptiveAvgPool2dGrad(Op):
    name = "adaptive_avg_pool2d_grad"
    kind = "gradient"
    rule = "d(dY) = adaptive_avg_pool2d(dX̃)"
    examples = (Example(lambda g: apply(AdaptiveAvgPool2dGrad, (g,), {"output_size": (3, 4), "input_size": (5, 7)}),
                        ((2, 1, 3, 4),)),
                Example(lambda g: apply(AdaptiveAvgPool2dGrad, (g,), {"output_size": (2, 2), "input_size": (4, 6)}),
                        ((1, 2, 2, 2),)))

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        return _adaptive_t(g, ctx.attrs["input_size"])

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        return (apply(AdaptiveAvgPool2d, (h,), {"output_size": ctx.attrs["output_size"]}),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (_adaptive(g, ctx.attrs["output_size"]),)


@tensor_method("adaptive_avg_pool2d")
@implements(AdaptiveAvgPool2d)
def adaptive_avg_pool2d(x: Tensor, output_size: int | tuple[int | None, int | None]) -> Any:
    """Average pooling of x [N, C, H, W] or [C, H, W] to [.., oh, ow] (PyTorch's F.adaptive_avg_pool2d): output
    cell i averages rows floor(i·H/oh) .. ceil((i+1)·H/oh) - 1, likewise columns; None keeps the input's size,
    and the output may be larger than the input.

    >>> from rtxviz import Tensor
    >>> adaptive_avg_pool2d(Tensor.arange(16.0).reshape(1, 1, 4, 4), 1).tolist()
    [[[[7.5]]]]
    >>> adaptive_avg_pool2d(Tensor.arange(3.0).reshape(1, 1, 3), (1, 2)).tolist()
    [[[0.5, 1.5]]]
    """
    op = "adaptive_avg_pool2d"
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise DTypeError(f"{op}: input must be a float32 or float64 Tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim not in (3, 4):
        raise ShapeError(f"{op}: input must be [N, C, H, W] or [C, H, W] (3 or 4 dims), got shape {x.shape}")
    sizes = (output_size, output_size) if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != 2:
        raise ValueError(f"{op}: output_size must be an int or a pair, got {output_size!r}")
    h, w = x.shape[-2:]
    out = (h if sizes[0] is None else int(sizes[0]), w if sizes[1] is None else int(sizes[1]))
    if out[0] < 1 or out[1] < 1:
        raise ValueError(f"{op}: output_size must be >= 1, got {output_size!r}")
    if h < 1 or w < 1:
        raise ShapeError(f"{op}: input {x.shape} has an empty spatial dim")
    return apply(AdaptiveAvgPool2d, (x,), {"output_size": out})


# -- embedding -----------------------------------------------------------------------------------------------------
class Embedding(Op):
    name = "embedding"
    kind = "nn"
    rule = "dW[i] = Σ dY at every position whose id is i (scatter-add); dW[padding_idx] = 0"

    @staticmethod
    def forward(ctx: Any, weight: Any, ids: Any = None) -> Any:
        if ids is None:
            ids = ctx.attrs["indices"].array
        ctx.state = (ids, weight.shape[0])
        return weight[ids]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        ids, num = ctx.state
        attrs = {"indices": IndexArg(ids), "num_embeddings": num}
        if ctx.attrs.get("padding_idx") is not None:
            attrs["padding_idx"] = ctx.attrs["padding_idx"]
        grad = apply(EmbeddingGrad, (g,), attrs)
        return (grad,) if len(ctx.next) == 1 else (grad, None)


class EmbeddingGrad(Op):
    name = "embedding_grad"
    kind = "gradient"
    examples = (Example(lambda g: apply(EmbeddingGrad, (g,), {"indices": _IDS, "num_embeddings": 4}), ((2, 2, 3),)),
                Example(lambda g: apply(EmbeddingGrad, (g,), {"indices": _IDS, "num_embeddings": 4, "padding_idx": 1}),
                        ((2, 2, 3),)))
    rule = "d(dY) = embedding(dW̃, ids) (row padding_idx of dW̃ zeroed)"

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        ids = ctx.attrs["indices"].array
        d = g.shape[-1]
        out = xp_of(g).zeros((ctx.attrs["num_embeddings"], d), dtype=g.dtype)
        _scatter_add(out, ids.reshape(-1), g.reshape(-1, d))
        pad = ctx.attrs.get("padding_idx")
        if pad is not None:
            out[pad] = 0
        return out

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        attrs = {"indices": ctx.attrs["indices"]}
        pad = ctx.attrs.get("padding_idx")
        if pad is not None:  # the adjoint of zeroing row padding_idx: zero it in dW̃ before the gather
            keep = xp_of(h.data).ones((h.shape[0], 1), dtype=h.data.dtype)
            keep[pad] = 0
            h = mul(h, constant(keep))
            attrs["padding_idx"] = pad
        return (apply(Embedding, (h,), attrs),)


def _embedding_call(weight: Tensor, indices: Any, padding_idx: int | None = None) -> Any:
    return embedding(indices, weight, padding_idx)  # the format lists (weight, ids)


@implements(Embedding, call=_embedding_call)
def embedding(indices: Any, weight: Tensor, padding_idx: int | None = None) -> Any:
    """Rows of `weight` [V, D] at int64 `indices` of any shape: the result is indices.shape + (D,).

    Argument order as PyTorch's `F.embedding(input, weight, padding_idx)`: the row `padding_idx` (negative
    counts from V) gets no gradient; the output still reads it.

    >>> from rtxviz import Tensor, Variable
    >>> embedding(Tensor([2, 0]), Tensor.arange(6.0).reshape(3, 2)).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    >>> w = Variable(Tensor.ones([3, 2]), requires_grad=True)
    >>> embedding(Tensor([2, 0, 2]), w, padding_idx=-1).sum().backward()
    >>> w.grad.tolist()
    [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
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
    attrs: dict = {"indices": IndexArg(ids)}
    if padding_idx is not None:
        pad = operator.index(padding_idx)
        if not -v <= pad < v:
            raise ShapeError(f"{op}: padding_idx {pad} is out of range for a weight with {v} rows "
                             f"(expected {-v}..{v - 1})")
        attrs["padding_idx"] = pad + v if pad < 0 else pad
    return apply(Embedding, (weight,), attrs)
