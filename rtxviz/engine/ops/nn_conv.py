"""conv2d as im2col + one batched matmul, with its two gradients as ops of their own.

conv2d is bilinear in (input, weight), so three ops close under differentiation:

- ``conv2d(x, w)``               backward: dx = conv2d_grad_input(dy, w), dw = conv2d_grad_weight(x, dy)
- ``conv2d_grad_input(dy, w)``   (col2im; a transposed convolution) backward: conv2d and conv2d_grad_weight
- ``conv2d_grad_weight(x, dy)``  (im2col and a matmul) backward: conv2d_grad_input and conv2d

so create_graph and second derivatives need nothing more. First order stays fast: the im2col columns made in
forward are handed to the weight gradient instead of being rebuilt.

im2col lays the columns out as [N, C, kh, kw, Ho, Wo]: each kernel offset (i, j) is one strided slice copy of
the padded input, and the output [N, O, Ho·Wo] comes straight out of W[O, C·kh·kw] @ cols[N, C·kh·kw, Ho·Wo]
already in NCHW order (no transpose copy). col2im adds the slices back, one kernel offset at a time.
"""

from __future__ import annotations

from typing import Any

from ..device import xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import register
from .reduction import sum as _sum

Pair = tuple[int, int]


def _pair(v: Any) -> Pair:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _geom(attrs: dict) -> tuple[Pair, Pair, Pair, int]:
    """(stride, padding, dilation, groups) from attrs that may hold ints or pairs (the reference files use ints)."""
    return (_pair(attrs.get("stride", 1)), _pair(attrs.get("padding", 0)), _pair(attrs.get("dilation", 1)),
            int(attrs.get("groups", 1)))


def out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def pad2d(x: Any, ph: int, pw: int, value: float = 0.0) -> Any:
    """x [N, C, H, W] with `value` borders of ph rows and pw columns (x itself when there is no padding)."""
    if not ph and not pw:
        return x
    n, c, h, w = x.shape
    xp = xp_of(x)
    out = xp.full((n, c, h + 2 * ph, w + 2 * pw), value, dtype=x.dtype)
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def window(xpad: Any, i: int, j: int, ho: int, wo: int, stride: Pair, dilation: Pair) -> Any:
    """The strided view of `xpad` that kernel offset (i, j) sees at every output position: [N, C, ho, wo]."""
    hi, wj = i * dilation[0], j * dilation[1]
    return xpad[:, :, hi:hi + stride[0] * (ho - 1) + 1:stride[0], wj:wj + stride[1] * (wo - 1) + 1:stride[1]]


def im2col(x: Any, kh: int, kw: int, stride: Pair, padding: Pair, dilation: Pair, ho: int, wo: int) -> Any:
    """Columns [N, C, kh, kw, ho, wo]: one strided copy per kernel offset."""
    xpad = pad2d(x, *padding)
    n, c = x.shape[:2]
    cols = xp_of(x).empty((n, c, kh, kw, ho, wo), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = window(xpad, i, j, ho, wo, stride, dilation)
    return cols


def col2im(cols: Any, x_shape: tuple, stride: Pair, padding: Pair, dilation: Pair) -> Any:
    """The adjoint of im2col: add each kernel offset's slice back into a zero image of shape `x_shape`."""
    n, c, h, w = x_shape
    _, _, kh, kw, ho, wo = cols.shape
    ph, pw = padding
    xp = xp_of(cols)
    dx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            window(dx, i, j, ho, wo, stride, dilation)[...] += cols[:, :, i, j]
    if ph or pw:
        dx = xp.ascontiguousarray(dx[:, :, ph:ph + h, pw:pw + w])
    return dx


def _conv_forward(x: Any, w: Any, stride: Pair, padding: Pair, dilation: Pair, groups: int) -> tuple[Any, Any]:
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, wo = out_size(h, kh, stride[0], padding[0], dilation[0]), out_size(wd, kw, stride[1], padding[1], dilation[1])
    cols = im2col(x, kh, kw, stride, padding, dilation, ho, wo)
    k, p = cg * kh * kw, ho * wo
    if groups == 1:
        out = w.reshape(o, k) @ cols.reshape(n, k, p)
    else:
        out = w.reshape(groups, o // groups, k) @ cols.reshape(n, groups, k, p)
    return out.reshape(n, o, ho, wo), cols


def _weight_grad(cols: Any, g: Any, w_shape: tuple, groups: int) -> Any:
    o, cg, kh, kw = w_shape
    n, _, ho, wo = g.shape
    k, p = cg * kh * kw, ho * wo
    if groups == 1:
        gw = (g.reshape(n, o, p) @ cols.reshape(n, k, p).swapaxes(-1, -2)).sum(axis=0)
    else:
        gw = (g.reshape(n, groups, o // groups, p) @ cols.reshape(n, groups, k, p).swapaxes(-1, -2)).sum(axis=0)
    return gw.reshape(w_shape)


def _input_grad(g: Any, w: Any, x_shape: tuple, stride: Pair, padding: Pair, dilation: Pair, groups: int) -> Any:
    o, cg, kh, kw = w.shape
    n, _, ho, wo = g.shape
    k, p = cg * kh * kw, ho * wo
    if groups == 1:
        dcols = w.reshape(o, k).T @ g.reshape(n, o, p)
    else:
        dcols = w.reshape(groups, o // groups, k).swapaxes(-1, -2) @ g.reshape(n, groups, o // groups, p)
    return col2im(dcols.reshape(n, x_shape[1], kh, kw, ho, wo), x_shape, stride, padding, dilation)


class _Cached:
    """Forward's im2col columns, handed to the weight gradient through its attrs (short repr for messages)."""

    __slots__ = ("cols",)

    def __init__(self, cols: Any) -> None:
        self.cols = cols

    def __repr__(self) -> str:
        return f"<cached im2col {tuple(self.cols.shape)}>"


def _geom_attrs(attrs: dict) -> dict:
    return {k: attrs[k] for k in ("stride", "padding", "dilation", "groups") if k in attrs}


@register
class Conv2d(Op):
    name = "conv2d"
    rule = "dX = conv_transpose(dY, W), dW = Σ dY ⋆ X (im2col), dB = Σ dY"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any = None) -> Any:
        stride, padding, dilation, groups = _geom(ctx.attrs)
        out, cols = _conv_forward(x, w, stride, padding, dilation, groups)
        if b is not None:
            out += b.reshape(1, -1, 1, 1)
        ctx.state = cols
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        x, w = inputs[0], inputs[1]
        geom = _geom_attrs(ctx.attrs)
        gx = gw = gb = None
        if ctx.next[0] is not None:
            gx = apply(Conv2dGradInput, (g, w), {**geom, "input_size": tuple(x.shape[2:])})
        if ctx.next[1] is not None:
            gw = apply(Conv2dGradWeight, (x, g), {**geom, "kernel_size": tuple(w.shape[2:]),
                                                  "cols": _Cached(ctx.state)})
        if len(inputs) == 2:
            return gx, gw
        if ctx.next[2] is not None:
            gb = _sum(g, (0, 2, 3))
        return gx, gw, gb


@register
class Conv2dGradInput(Op):
    name = "conv2d_grad_input"
    rule = "d(dY) = conv2d(H, W), dW = conv2d_grad_weight(H, dY)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, g: Any, w: Any) -> Any:
        stride, padding, dilation, groups = _geom(ctx.attrs)
        x_shape = (g.shape[0], w.shape[1] * groups, *ctx.attrs["input_size"])
        return _input_grad(g, w, x_shape, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        g, w = ctx.saved_inputs
        geom = _geom_attrs(ctx.attrs)
        gg = apply(Conv2d, (h, w), geom) if ctx.next[0] is not None else None
        gw = None
        if ctx.next[1] is not None:
            gw = apply(Conv2dGradWeight, (h, g), {**geom, "kernel_size": tuple(w.shape[2:])})
        return gg, gw


@register
class Conv2dGradWeight(Op):
    name = "conv2d_grad_weight"
    rule = "dX = conv2d_grad_input(dY, H), d(dY) = conv2d(X, H)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, g: Any) -> Any:
        stride, padding, dilation, groups = _geom(ctx.attrs)
        kh, kw = ctx.attrs["kernel_size"]
        w_shape = (g.shape[1], x.shape[1] // groups, kh, kw)
        cached = ctx.attrs.get("cols")
        cols = cached.cols if cached is not None else im2col(x, kh, kw, stride, padding, dilation, *g.shape[2:])
        return _weight_grad(cols, g, w_shape, groups)

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        x, g = ctx.saved_inputs
        geom = _geom_attrs(ctx.attrs)
        gx = apply(Conv2dGradInput, (g, h), {**geom, "input_size": tuple(x.shape[2:])}) if ctx.next[0] is not None \
            else None
        gg = apply(Conv2d, (x, h), geom) if ctx.next[1] is not None else None
        return gx, gg


def _check_nonneg_pair(op: str, label: str, v: Pair, minimum: int) -> None:
    if v[0] < minimum or v[1] < minimum:
        raise ValueError(f"{op}: {label} must be >= {minimum}, got {v}")


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int | Pair = 1,
           padding: int | Pair = 0, dilation: int | Pair = 1, groups: int = 1) -> Any:
    """2-D cross-correlation of x [N, C, H, W] with weight [O, C/groups, kh, kw], plus bias [O].

    >>> from rtxviz import Tensor
    >>> conv2d(Tensor.ones([1, 1, 3, 3]), Tensor.ones([1, 1, 2, 2]), padding=0).tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    op = "conv2d"
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    _check_nonneg_pair(op, "stride", stride, 1)
    _check_nonneg_pair(op, "padding", padding, 0)
    _check_nonneg_pair(op, "dilation", dilation, 1)
    if not is_float(x.dtype):
        raise DTypeError(f"{op}: input must be float32 or float64, got {x.dtype}")
    if x.ndim != 4:
        raise ShapeError(f"{op}: input must be [N, C, H, W] (4 dims), got shape {x.shape}")
    if weight.ndim != 4:
        raise ShapeError(f"{op}: weight must be [O, C/groups, kh, kw] (4 dims), got shape {weight.shape}")
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    if groups < 1 or c % groups or o % groups:
        raise ShapeError(f"{op}: groups={groups} must divide both the input channels ({c}) and the output "
                         f"channels ({o}) (input {x.shape}, weight {weight.shape})")
    if cg * groups != c:
        raise ShapeError(f"{op}: input has {c} channels but weight expects {cg * groups} "
                         f"(input {x.shape}, weight {weight.shape}, groups={groups})")
    ekh, ekw = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    if ekh > h + 2 * padding[0] or ekw > w + 2 * padding[1]:
        raise ShapeError(f"{op}: kernel ({ekh}, {ekw}) is larger than the padded input "
                         f"({h + 2 * padding[0]}, {w + 2 * padding[1]}) (input {x.shape}, weight {weight.shape}, "
                         f"padding {padding}, dilation {dilation})")
    attrs: dict = {"stride": stride, "padding": padding}
    if dilation != (1, 1):
        attrs["dilation"] = dilation
    if groups != 1:
        attrs["groups"] = groups
    if bias is None:
        return apply(Conv2d, (x, weight), attrs)
    if tuple(bias.shape) != (o,):
        raise ShapeError(f"{op}: bias must have shape ({o},) for {o} output channels, got {bias.shape}")
    return apply(Conv2d, (x, weight, bias), attrs)


Tensor.conv2d = conv2d
