"""conv2d as im2col + one batched matmul, with its two gradients as ops of their own.

conv2d is bilinear in (input, weight), so three ops close under differentiation:

- ``conv2d(x, w)``               backward: dx = conv2d_grad_input(dy, w), dw = conv2d_grad_weight(x, dy)
- ``conv2d_grad_input(dy, w)``   (col2im; a transposed convolution) backward: conv2d and conv2d_grad_weight
- ``conv2d_grad_weight(x, dy)``  (im2col and a matmul) backward: conv2d_grad_input and conv2d

so create_graph and second derivatives need nothing more. First order stays fast: the im2col columns made in
forward are handed to the weight gradient instead of being rebuilt.

im2col lays the columns out channel-major, as [C, kh, kw, N, Ho, Wo]: each kernel offset (i, j) is one strided
slice copy of the padded input (itself made channel-major, [C, N, Hp, Wp], by one transposing copy), and every
product is one large GEMM over the whole batch: the output [O, N·Ho·Wo] = W[O, C·kh·kw] @ cols[C·kh·kw, N·Ho·Wo]
(then one transposing copy back to NCHW), the weight gradient dY[O, N·Ho·Wo] @ colsᵀ. Measured per shape against
the batch-major layout [N, C·kh·kw, Ho·Wo] with N small GEMMs (benchmarks/README.md, issue 21): the one large
GEMM wins most on the weight gradient, where the batch-major layout also had to sum N partial products.
col2im adds the slices back, one kernel offset at a time (at stride 1 as contiguous runs of "wide rows", see
`Plan`; there the compiled `col2im_wide` of rtxviz/_native.c does the same adds a plane at a time, in cache).

Where a convolution has c·kh·kw >= 32 (and groups == 1), forward uses the row layout instead,
[N·Ho·Wo, kh·kw·C] (`_im2col_rows`: one strided copy from NHWC; out = rows @ Wᵀ), which OpenBLAS multiplies
faster at these shapes; the thin ones (c·kh·kw < 32, a 1-channel input) keep the channel-major layout and run
per image, forward and weight gradient alike (there the n small products and their sum beat one GEMM with
K = n·ho·wo and the transposing copy of dY it needs; issue 21, second round, in benchmarks/README.md).

conv1d is conv2d of height 1, and conv_transpose2d is conv2d_grad_input with its input in the place of dY: both
run the same kernels, and their gradients are the same three ops.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ... import accel
from ..device import xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, constant, implements, tensor_method
from .reduction import sum as _sum
from .shape import cat, squeeze, unsqueeze

Pair = tuple[int, int]


def _pair(v: Any) -> Pair:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _geom(attrs: dict) -> tuple[Pair, Pair, Pair, int]:
    """(stride, padding, dilation, groups) from attrs that may hold ints or pairs (the reference files use ints)."""
    return (_pair(attrs.get("stride", 1)), _pair(attrs.get("padding", 0)), _pair(attrs.get("dilation", 1)),
            int(attrs.get("groups", 1)))


def out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def pad2d(x: Any, ph: int, pw: int, value: float = 0.0, extra: Pair = (0, 0)) -> Any:
    """x [N, C, H, W] with `value` borders of ph rows and pw columns, and `extra` more rows and columns at the
    bottom and right (pooling's ceil mode); x itself when there is no padding."""
    if not ph and not pw and not extra[0] and not extra[1]:
        return x
    n, c, h, w = x.shape
    xp = xp_of(x)
    out = xp.full((n, c, h + 2 * ph + extra[0], w + 2 * pw + extra[1]), value, dtype=x.dtype)
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def window(xpad: Any, i: int, j: int, ho: int, wo: int, stride: Pair, dilation: Pair) -> Any:
    """The strided view of `xpad` that kernel offset (i, j) sees at every output position: [N, C, ho, wo]."""
    hi, wj = i * dilation[0], j * dilation[1]
    return xpad[:, :, hi:hi + stride[0] * (ho - 1) + 1:stride[0], wj:wj + stride[1] * (wo - 1) + 1:stride[1]]


class Plan:
    """The geometry of one convolution, and the column layout its kernels use.

    Columns are channel-major, [c, kh, kw, n, ho·rw]: the batch sits inside each column row, so every
    convolution is one large GEMM over all n images (W[O, C·kh·kw] @ cols[C·kh·kw, n·ho·rw]) instead of n
    small ones, and the weight gradient is one GEMM over n·ho·wo with no sum of n partial products.

    col2im at stride 1 uses the "wide row" layout (`wide=True`): each column row spans the full padded width wp
    instead of wo, so every kernel offset is one contiguous run of the flattened padded image, added in one
    fast pass instead of ho short strided rows. The output gradient is widened with zeros, so the wp - wo extra
    positions add nothing. im2col keeps the narrow layout: there strided copies beat copy-then-crop.
    """

    __slots__ = ("n", "c", "h", "w", "o", "kh", "kw", "stride", "padding", "dilation", "groups", "ho", "wo",
                 "hp", "wp", "wide", "rw", "slack")

    def __init__(self, x_shape: tuple, w_shape: tuple, stride: Pair, padding: Pair, dilation: Pair,
                 groups: int, wide: bool = False) -> None:
        self.n, self.c, self.h, self.w = x_shape
        self.o, _, self.kh, self.kw = w_shape
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.ho = out_size(self.h, self.kh, stride[0], padding[0], dilation[0])
        self.wo = out_size(self.w, self.kw, stride[1], padding[1], dilation[1])
        self.hp, self.wp = self.h + 2 * padding[0], self.w + 2 * padding[1]
        self.wide = wide and stride == (1, 1)
        self.rw = self.wp if self.wide else self.wo
        self.slack = (self.kw - 1) * dilation[1]  # the last offset's run overshoots the image by this much

    @property
    def cols_per_channel(self) -> int:
        """The length of one column row: n·ho·rw."""
        return self.n * self.ho * self.rw

    def offsets(self) -> Iterator[tuple[int, int, int]]:
        for i in range(self.kh):
            for j in range(self.kw):
                yield i, j, i * self.dilation[0] * self.wp + j * self.dilation[1]

    def flat_buffer(self, xp: Any, dtype: Any) -> tuple[Any, Any]:
        """A zero [c, n, hp·wp + slack] buffer and its [c, n, h, w] interior view (channel-major, as the columns)."""
        buf = xp.zeros((self.c, self.n, self.hp * self.wp + self.slack), dtype=dtype)
        ph, pw = self.padding
        inner = buf[:, :, :self.hp * self.wp].reshape(self.c, self.n, self.hp, self.wp)
        return buf, inner[:, :, ph:ph + self.h, pw:pw + self.w]


def _channel_major_padded(pl: Plan, x: Any) -> Any:
    """x [n, c, h, w] as [c, n, hp, wp] with zero borders: one transposing copy, so that the kernel offsets'
    copies read contiguous rows (a view of x itself when there is no padding)."""
    ph, pw = pl.padding
    xt = x.transpose(1, 0, 2, 3)
    if not ph and not pw:
        return xt
    out = xp_of(x).zeros((pl.c, pl.n, pl.hp, pl.wp), dtype=x.dtype)
    out[:, :, ph:ph + pl.h, pw:pw + pl.w] = xt
    return out


def im2col(pl: Plan, x: Any) -> Any:
    """Columns [c, kh, kw, n, ho·wo]: one strided copy per kernel offset (narrow layout only)."""
    cols = xp_of(x).empty((pl.c, pl.kh, pl.kw, pl.n, pl.ho * pl.wo), dtype=x.dtype)
    xpad = _channel_major_padded(pl, x)
    cols6 = cols.reshape(pl.c, pl.kh, pl.kw, pl.n, pl.ho, pl.wo)
    for i in range(pl.kh):
        for j in range(pl.kw):
            cols6[:, i, j] = window(xpad, i, j, pl.ho, pl.wo, pl.stride, pl.dilation)
    return cols


def _native_col2im(cols: Any) -> bool:
    """Whether the compiled col2im takes these columns: numpy float32/float64, not empty, and only where the
    compiled module has it (read at each call, so a test can switch it off)."""
    return accel.col2im_wide is not None and type(cols) is np.ndarray and cols.dtype in (np.float32, np.float64) \
        and cols.size > 0


def col2im(pl: Plan, cols: Any) -> Any:
    """The adjoint of im2col: add each kernel offset's columns back into a zero image, returned [n, c, h, w]."""
    xp = xp_of(cols)
    cols = cols.reshape(pl.c, pl.kh, pl.kw, pl.n, pl.ho * pl.rw)
    if pl.wide and _native_col2im(cols):  # one pass in C, the same sums (rtxviz/_native.c)
        dx = np.empty((pl.n, pl.c, pl.h, pl.w), dtype=cols.dtype)
        accel.col2im_wide(np.ascontiguousarray(cols), dx, pl.c, pl.n, pl.h, pl.w, pl.hp, pl.wp, *pl.padding,
                          pl.kh, pl.kw, *pl.dilation, pl.ho)
        return dx
    if pl.wide:
        buf, inner = pl.flat_buffer(xp, cols.dtype)
        run = pl.ho * pl.wp
        for i, j, off in pl.offsets():
            buf[:, :, off:off + run] += cols[:, i, j]
        return xp.ascontiguousarray(inner.transpose(1, 0, 2, 3))
    ph, pw = pl.padding
    dx = xp.zeros((pl.c, pl.n, pl.hp, pl.wp), dtype=cols.dtype)
    cols6 = cols.reshape(pl.c, pl.kh, pl.kw, pl.n, pl.ho, pl.wo)
    for i in range(pl.kh):
        for j in range(pl.kw):
            window(dx, i, j, pl.ho, pl.wo, pl.stride, pl.dilation)[...] += cols6[:, i, j]
    return xp.ascontiguousarray(dx[:, :, ph:ph + pl.h, pw:pw + pl.w].transpose(1, 0, 2, 3))


def _widen(pl: Plan, g: Any) -> Any:
    """The output gradient [n, o, ho, wo] in the column layout [o, n·ho·rw] (zeros in the wide rows' extra
    positions), or [groups, o/groups, n·ho·rw]."""
    gt = g.transpose(1, 0, 2, 3)
    if pl.rw == pl.wo:
        gw = xp_of(g).ascontiguousarray(gt)
    else:
        gw = xp_of(g).zeros((pl.o, pl.n, pl.ho, pl.rw), dtype=g.dtype)
        gw[..., :pl.wo] = gt
    if pl.groups == 1:
        return gw.reshape(pl.o, pl.cols_per_channel)
    return gw.reshape(pl.groups, pl.o // pl.groups, pl.cols_per_channel)


def _w_mat(pl: Plan, w: Any) -> Any:
    k = w.size // pl.o
    return w.reshape(pl.o, k) if pl.groups == 1 else w.reshape(pl.groups, pl.o // pl.groups, k)


def _cols_mat(pl: Plan, cols: Any) -> Any:
    """The columns as the GEMM operand: [c·kh·kw, n·ho·rw], or [groups, c/groups·kh·kw, n·ho·rw]."""
    if pl.groups == 1:
        return cols.reshape(-1, pl.cols_per_channel)
    return cols.reshape(pl.groups, -1, pl.cols_per_channel)


# Below this many rows per column (c·kh·kw), the forward product runs per image straight into NCHW: the GEMM is
# too thin to gain from one large call, and the transposing copy of the output costs as much as the product
# (conv_train's 1-channel first conv: 0.63 vs 0.97 ms at 1 thread, 0.45 vs 0.56 ms at 2; at c·kh·kw = 144 the
# large GEMM is as fast or faster).
_PER_IMAGE_BELOW = 32


def _im2col_rows(pl: Plan, x: Any) -> Any:
    """im2col columns in the row layout, [n·ho·wo, kh·kw·c]: one row per output position, channels innermost
    (2-D, which is how the weight gradient tells them from the channel-major columns, 5-D).

    Built by one strided copy of the padded input in NHWC (the window view has runs of c contiguous values), and
    multiplied as rows @ Wᵀ, a GEMM whose long dimension is M (n·ho·wo) and whose N is the output channels. On
    conv_train's second convolution (and bn_conv_train's) this is the faster lowering: OpenBLAS ran
    [12544, 144] @ [144, 32] at ~2x the speed of W[32, 144] @ cols[144, 12544], and the one copy beat the
    channel-major layout's kh·kw copies of 14-float runs (1.0 against 1.3-1.8 ms, 1 thread, 2-core Intel Xeon).
    groups == 1 only (the channel-major layout handles groups)."""
    xp = xp_of(x)
    ph, pw = pl.padding
    xpad = xp.zeros((pl.n, pl.hp, pl.wp, pl.c), dtype=x.dtype)
    xpad[:, ph:ph + pl.h, pw:pw + pl.w, :] = x.transpose(0, 2, 3, 1)
    sn, sh, sw, sc = xpad.strides
    view = xp.lib.stride_tricks.as_strided(
        xpad, (pl.n, pl.ho, pl.wo, pl.kh, pl.kw, pl.c),
        (sn, sh * pl.stride[0], sw * pl.stride[1], sh * pl.dilation[0], sw * pl.dilation[1], sc))
    return xp.ascontiguousarray(view).reshape(pl.n * pl.ho * pl.wo, pl.kh * pl.kw * pl.c)


def _w_rows(w: Any) -> Any:
    """W [o, c, kh, kw] as [o, kh·kw·c], the rows' column order."""
    o = w.shape[0]
    return w.transpose(0, 2, 3, 1).reshape(o, -1)


def _g_rows(g: Any) -> Any:
    """dY [n, o, ho, wo] as [n·ho·wo, o] (one transposing copy)."""
    return xp_of(g).ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(-1, g.shape[1])


# Below this many rows per column (c·kh·kw), the forward product runs per image straight into NCHW from the
# channel-major columns; from it up, on the row layout (`_im2col_rows`).
_ROWS_FROM = _PER_IMAGE_BELOW


def _uses_rows(pl: Plan) -> bool:
    """Whether this convolution's columns are in the row layout (forward and weight gradient alike)."""
    return pl.groups == 1 and pl.c * pl.kh * pl.kw >= _ROWS_FROM


def _conv_forward(pl: Plan, x: Any, w: Any) -> tuple[Any, Any]:
    k = pl.c // pl.groups * pl.kh * pl.kw
    if _uses_rows(pl):
        rows = _im2col_rows(pl, x)
        out = rows @ _w_rows(w).T  # [n·ho·wo, o]
        out = out.reshape(pl.n, pl.ho, pl.wo, pl.o).transpose(0, 3, 1, 2)
        return xp_of(x).ascontiguousarray(out), rows
    cols = im2col(pl, x)
    if pl.groups == 1 and k < _PER_IMAGE_BELOW:  # N products of W[O, k] with a strided [k, ho·wo] slice
        out = _w_mat(pl, w) @ cols.reshape(k, pl.n, pl.ho * pl.wo).transpose(1, 0, 2)
        return out.reshape(pl.n, pl.o, pl.ho, pl.wo), cols
    out = _w_mat(pl, w) @ _cols_mat(pl, cols)  # [o, n·ho·wo] (groups: [g, o/g, n·ho·wo], the same memory)
    out = out.reshape(pl.o, pl.n, pl.ho, pl.wo).transpose(1, 0, 2, 3)
    return xp_of(x).ascontiguousarray(out), cols


def _weight_grad(pl: Plan, cols: Any, g: Any, w_shape: tuple) -> Any:
    if cols.ndim == 2:  # the row layout: dW[o, (kh kw c)] = (rowsᵀ @ dY_rows)ᵀ
        out = (cols.T @ _g_rows(g)).T
        return xp_of(g).ascontiguousarray(out.reshape(pl.o, pl.kh, pl.kw, pl.c).transpose(0, 3, 1, 2))
    k = cols.size // pl.cols_per_channel
    if pl.groups == 1 and k < _PER_IMAGE_BELOW:
        # per image, dY[n] [o, ho·wo] @ cols[:, n]ᵀ, then the sum of the n products: on conv_train's 1-channel
        # first convolution (k = 9) 0.33-0.40 ms against 1.15-1.35 ms for the one long-K GEMM and the transposing
        # copy of dY it needs, at 1 and 2 threads alike
        hw = pl.ho * pl.wo
        per_image = g.reshape(pl.n, pl.o, hw) @ cols.reshape(k, pl.n, hw).transpose(1, 2, 0)
        return per_image.sum(axis=0).reshape(w_shape)
    out = _widen(pl, g) @ _cols_mat(pl, cols).swapaxes(-1, -2)
    return out.reshape(w_shape)


def _input_grad(pl: Plan, g: Any, w: Any) -> Any:
    return col2im(pl, _w_mat(pl, w).swapaxes(-1, -2) @ _widen(pl, g))


class _Cached:
    """Forward's im2col columns, handed to the weight gradient through its attrs (short repr for messages)."""

    __slots__ = ("cols",)

    def __init__(self, cols: Any) -> None:
        self.cols = cols

    def __repr__(self) -> str:
        return f"<cached im2col {tuple(self.cols.shape)}>"


def _geom_attrs(attrs: dict) -> dict:
    return {k: attrs[k] for k in ("stride", "padding", "dilation", "groups") if k in attrs}


class Conv2d(Op):
    name = "conv2d"
    kind = "conv"
    rule = "dX = conv_transpose(dY, W), dW = Σ dY ⋆ X (im2col), dB = Σ dY"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any = None) -> Any:
        pl = Plan(x.shape, w.shape, *_geom(ctx.attrs))
        out, cols = _conv_forward(pl, x, w)
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


class Conv2dGradInput(Op):
    name = "conv2d_grad_input"
    kind = "gradient"
    examples = (
        Example(lambda g, w: apply(Conv2dGradInput, (g, w), {"stride": (1, 1), "padding": (1, 0),
                                                             "input_size": (4, 5)}), ((2, 3, 4, 4), (3, 2, 3, 2))),
        Example(lambda g, w: apply(Conv2dGradInput, (g, w), {"stride": (2, 2), "padding": (0, 0), "groups": 2,
                                                             "input_size": (5, 5)}), ((1, 4, 2, 2), (4, 1, 2, 2))),
    )
    rule = "d(dY) = conv2d(H, W), dW = conv2d_grad_weight(H, dY)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, g: Any, w: Any) -> Any:
        geom = _geom(ctx.attrs)
        x_shape = (g.shape[0], w.shape[1] * geom[3], *ctx.attrs["input_size"])
        return _input_grad(Plan(x_shape, w.shape, *geom, wide=True), g, w)

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        g, w = ctx.saved_inputs
        geom = _geom_attrs(ctx.attrs)
        gg = apply(Conv2d, (h, w), geom) if ctx.next[0] is not None else None
        gw = None
        if ctx.next[1] is not None:
            gw = apply(Conv2dGradWeight, (h, g), {**geom, "kernel_size": tuple(w.shape[2:])})
        return gg, gw


class Conv2dGradWeight(Op):
    name = "conv2d_grad_weight"
    kind = "gradient"
    examples = (
        Example(lambda x, g: apply(Conv2dGradWeight, (x, g), {"stride": (1, 1), "padding": (1, 0),
                                                              "kernel_size": (3, 2)}), ((2, 2, 4, 5), (2, 3, 4, 4))),
        Example(lambda x, g: apply(Conv2dGradWeight, (x, g), {"stride": (1, 1), "padding": (0, 0),
                                                              "dilation": (2, 1), "kernel_size": (2, 2)}),
                ((1, 2, 5, 4), (1, 3, 3, 3))),
    )
    rule = "dX = conv2d_grad_input(dY, H), d(dY) = conv2d(X, H)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, g: Any) -> Any:
        geom = _geom(ctx.attrs)
        w_shape = (g.shape[1], x.shape[1] // geom[3], *ctx.attrs["kernel_size"])
        pl = Plan(x.shape, w_shape, *geom)
        cached = ctx.attrs.get("cols")
        if cached is not None:
            cols = cached.cols
        else:
            cols = _im2col_rows(pl, x) if _uses_rows(pl) else im2col(pl, x)
        return _weight_grad(pl, cols, g, w_shape)

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


def input_rank_message(op: str, nd: int, shape: tuple[int, ...]) -> str:
    """The error for an input of a convolution or pooling over nd spatial dims with neither nd + 1 dims
    (unbatched) nor nd + 2 (batched), in PyTorch's terms ("Expected 3D (unbatched) or 4D (batched) input").

    >>> input_rank_message("conv2d", 2, (2, 3))
    'conv2d: input must be 3D (unbatched, [C, H, W]) or 4D (batched, [N, C, H, W]), got 2D input of shape (2, 3)'
    """
    space = "L" if nd == 1 else "H, W"
    return (f"{op}: input must be {nd + 1}D (unbatched, [C, {space}]) or {nd + 2}D (batched, [N, C, {space}]), "
            f"got {len(shape)}D input of shape {tuple(shape)}")


def is_unbatched(x: Any, nd: int) -> bool:
    """Whether x is a float Tensor of nd + 1 dims: the unbatched input [C, *space] of an nd-d convolution or
    pooling, which runs as a batch of one (unsqueeze, the op, squeeze: all ops, so the graph and gradients are
    the batched ones), as PyTorch's."""
    return isinstance(x, Tensor) and is_float(x.dtype) and x.ndim == nd + 1


def _check_conv(op: str, x: Tensor, weight: Tensor, nd: int, groups: int) -> None:
    """Dtypes and ranks of a convolution's input [N, C, *space] and weight (nd spatial dims)."""
    if not isinstance(x, Tensor) or not is_float(x.dtype):
        raise DTypeError(f"{op}: input must be a float32 or float64 Tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if not isinstance(weight, Tensor) or weight.dtype != x.dtype:
        raise DTypeError(f"{op}: weight must be a Tensor of the input's dtype {x.dtype}, got "
                         f"{getattr(weight, 'dtype', type(weight).__name__)}")
    if x.ndim != nd + 2:
        raise ShapeError(input_rank_message(op, nd, x.shape))
    if weight.ndim != nd + 2:
        kernel = "k" if nd == 1 else "kh, kw"
        layout = f"[C, O/groups, {kernel}]" if "transpose" in op else f"[O, C/groups, {kernel}]"
        raise ShapeError(f"{op}: weight must be {layout} ({nd + 2} dims), got shape {weight.shape}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be an int >= 1, got {groups!r}")


def _check_bias(op: str, bias: Tensor | None, o: int, x: Tensor) -> None:
    if bias is None:
        return
    if not isinstance(bias, Tensor) or bias.dtype != x.dtype:
        raise DTypeError(f"{op}: bias must be a Tensor of the input's dtype {x.dtype}, got "
                         f"{getattr(bias, 'dtype', type(bias).__name__)}")
    if tuple(bias.shape) != (o,):
        raise ShapeError(f"{op}: bias must have shape ({o},) for {o} output channels, got {bias.shape}")


def _with_bias(op: type, x: Tensor, weight: Tensor, bias: Tensor | None, attrs: dict) -> Any:
    return apply(op, (x, weight) if bias is None else (x, weight, bias), attrs)


@tensor_method("conv2d")
@implements(Conv2d)
def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int | Pair = 1,
           padding: int | Pair = 0, dilation: int | Pair = 1, groups: int = 1) -> Any:
    """2-D cross-correlation of x [N, C, H, W] with weight [O, C/groups, kh, kw], plus bias [O].

    An unbatched x [C, H, W] gives an unbatched output, as PyTorch's.

    >>> from rtxviz import Tensor
    >>> conv2d(Tensor.ones([1, 1, 3, 3]), Tensor.ones([1, 1, 2, 2]), padding=0).tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
    >>> conv2d(Tensor.ones([1, 3, 3]), Tensor.ones([2, 1, 2, 2])).shape  # unbatched
    (2, 2, 2)
    """
    if is_unbatched(x, 2):
        return squeeze(conv2d(unsqueeze(x, 0), weight, bias, stride, padding, dilation, groups), 0)
    op = "conv2d"
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    _check_nonneg_pair(op, "stride", stride, 1)
    _check_nonneg_pair(op, "padding", padding, 0)
    _check_nonneg_pair(op, "dilation", dilation, 1)
    _check_conv(op, x, weight, 2, groups)
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    if c % groups or o % groups:
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
    _check_bias(op, bias, o, x)
    attrs: dict = {"stride": stride, "padding": padding}
    if dilation != (1, 1):
        attrs["dilation"] = dilation
    if groups != 1:
        attrs["groups"] = groups
    return _with_bias(Conv2d, x, weight, bias, attrs)


# -- conv1d: conv2d on a height of 1 -----------------------------------------------------------------------------
def _geom1d(attrs: dict) -> dict:
    """conv1d's (stride, padding, dilation) as the attrs of the 2-D convolution of height 1 it runs."""
    out = {"stride": (1, attrs["stride"]), "padding": (0, attrs["padding"])}
    if attrs.get("dilation", 1) != 1:
        out["dilation"] = (1, attrs["dilation"])
    if attrs.get("groups", 1) != 1:
        out["groups"] = attrs["groups"]
    return out


class Conv1d(Op):
    """conv1d as conv2d of height 1: the same im2col, matmul and gradient ops (conv2d_grad_input/_weight)."""

    name = "conv1d"
    kind = "conv"
    rule = "dX = conv_transpose1d(dY, W), dW = Σ dY ⋆ X (im2col), dB = Σ dY"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any = None) -> Any:
        n, c, length = x.shape
        pl = Plan((n, c, 1, length), (w.shape[0], w.shape[1], 1, w.shape[2]), *_geom(_geom1d(ctx.attrs)))
        out, cols = _conv_forward(pl, x[:, :, None, :], w[:, :, None, :])
        out = out.reshape(n, pl.o, pl.wo)
        if b is not None:
            out += b.reshape(1, -1, 1)
        ctx.state = cols
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        x, w = inputs[0], inputs[1]
        geom = _geom1d(ctx.attrs)
        g4 = unsqueeze(g, 2)
        gx = gw = gb = None
        if ctx.next[0] is not None:
            gx = squeeze(apply(Conv2dGradInput, (g4, unsqueeze(w, 2)), {**geom, "input_size": (1, x.shape[2])}), 2)
        if ctx.next[1] is not None:
            gw = squeeze(apply(Conv2dGradWeight, (unsqueeze(x, 2), g4),
                               {**geom, "kernel_size": (1, w.shape[2]), "cols": _Cached(ctx.state)}), 2)
        if len(inputs) == 2:
            return gx, gw
        if ctx.next[2] is not None:
            gb = _sum(g, (0, 2))
        return gx, gw, gb


def _single(op: str, label: str, v: Any, minimum: int) -> int:
    if isinstance(v, list | tuple):
        if len(v) != 1:
            raise ValueError(f"{op}: {label} must be an int or a sequence of one int, got {v!r}")
        v = v[0]
    v = int(v)
    if v < minimum:
        raise ValueError(f"{op}: {label} must be >= {minimum}, got {v}")
    return v


@tensor_method("conv1d")
@implements(Conv1d)
def conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int = 1, padding: int = 0,
           dilation: int = 1, groups: int = 1) -> Any:
    """1-D cross-correlation of x [N, C, L] with weight [O, C/groups, k], plus bias [O] (PyTorch's F.conv1d).

    An unbatched x [C, L] gives an unbatched output, as PyTorch's.

    >>> from rtxviz import Tensor
    >>> conv1d(Tensor.ones([1, 1, 4]), Tensor.ones([1, 1, 2]), padding=1).tolist()
    [[[1.0, 2.0, 2.0, 2.0, 1.0]]]
    """
    if is_unbatched(x, 1):
        return squeeze(conv1d(unsqueeze(x, 0), weight, bias, stride, padding, dilation, groups), 0)
    op = "conv1d"
    s, p, d = _single(op, "stride", stride, 1), _single(op, "padding", padding, 0), _single(op, "dilation", dilation, 1)
    _check_conv(op, x, weight, 1, groups)
    n, c, length = x.shape
    o, cg, k = weight.shape
    if c % groups or o % groups:
        raise ShapeError(f"{op}: groups={groups} must divide both the input channels ({c}) and the output "
                         f"channels ({o}) (input {x.shape}, weight {weight.shape})")
    if cg * groups != c:
        raise ShapeError(f"{op}: input has {c} channels but weight expects {cg * groups} "
                         f"(input {x.shape}, weight {weight.shape}, groups={groups})")
    ek = d * (k - 1) + 1
    if ek > length + 2 * p:
        raise ShapeError(f"{op}: kernel {ek} (dilated) is larger than the padded input {length + 2 * p} "
                         f"(input {x.shape}, weight {weight.shape}, padding {p}, dilation {d})")
    _check_bias(op, bias, o, x)
    return _with_bias(Conv1d, x, weight, bias, {"stride": s, "padding": p, "dilation": d, "groups": groups})


# -- conv_transpose2d: the adjoint of conv2d in its input ----------------------------------------------------------
class ConvTranspose2d(Op):
    """conv_transpose2d(x, w) is conv2d's input gradient with x in the place of dY (col2im of Wᵀ·x), so its
    gradients are conv2d (in x) and conv2d_grad_weight (in w), and the three ops close under differentiation.

    Its input always has the size conv2d of the output would give (the public function pads it with zero rows
    and columns when output_padding reaches past the stride)."""

    name = "conv_transpose2d"
    kind = "conv"
    rule = "dX = conv2d(dY, W), dW = Σ X ⋆ dY (im2col of dY), dB = Σ dY"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any = None) -> Any:
        geom = _geom(ctx.attrs)
        y_shape = (x.shape[0], w.shape[1] * geom[3], *ctx.attrs["output_size"])
        out = _input_grad(Plan(y_shape, w.shape, *geom, wide=True), x, w)
        if b is not None:
            out += b.reshape(1, -1, 1, 1)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        x, w = inputs[0], inputs[1]
        geom = _geom_attrs(ctx.attrs)
        gx = gw = gb = None
        if ctx.next[0] is not None:
            gx = apply(Conv2d, (g, w), geom)
        if ctx.next[1] is not None:
            gw = apply(Conv2dGradWeight, (g, x), {**geom, "kernel_size": tuple(w.shape[2:])})
        if len(inputs) == 2:
            return gx, gw
        if ctx.next[2] is not None:
            gb = _sum(g, (0, 2, 3))
        return gx, gw, gb


@tensor_method("conv_transpose2d")
@implements(ConvTranspose2d)
def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int | Pair = 1,
                     padding: int | Pair = 0, output_padding: int | Pair = 0, groups: int = 1,
                     dilation: int | Pair = 1) -> Any:
    """The transposed 2-D convolution of x [N, C, H, W] with weight [C, O/groups, kh, kw], plus bias [O]
    (PyTorch's F.conv_transpose2d, argument order included): the gradient of conv2d in its input.

    An unbatched x [C, H, W] gives an unbatched output, as PyTorch's.

    The output is [N, O, (H - 1)·stride - 2·padding + dilation·(kh - 1) + output_padding + 1, ...].

    >>> from rtxviz import Tensor
    >>> conv_transpose2d(Tensor.ones([1, 1, 2, 2]), Tensor.ones([1, 1, 2, 2]), stride=2).shape
    (1, 1, 4, 4)
    >>> conv_transpose2d(Tensor.ones([1, 1, 2, 2]), Tensor.ones([1, 1, 2, 2])).tolist()
    [[[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]]]
    """
    if is_unbatched(x, 2):
        return squeeze(conv_transpose2d(unsqueeze(x, 0), weight, bias, stride, padding, output_padding, groups,
                                        dilation), 0)
    op = "conv_transpose2d"
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    output_padding = _pair(output_padding)
    _check_nonneg_pair(op, "stride", stride, 1)
    _check_nonneg_pair(op, "padding", padding, 0)
    _check_nonneg_pair(op, "output_padding", output_padding, 0)
    _check_nonneg_pair(op, "dilation", dilation, 1)
    _check_conv(op, x, weight, 2, groups)
    n, c, h, w = x.shape
    cw, og, kh, kw = weight.shape
    if cw != c:
        raise ShapeError(f"{op}: input has {c} channels but weight [C, O/groups, kh, kw] expects {cw} "
                         f"(input {x.shape}, weight {weight.shape})")
    if c % groups:
        raise ShapeError(f"{op}: groups={groups} must divide the input channels ({c}) (input {x.shape}, "
                         f"weight {weight.shape})")
    for i in range(2):
        if output_padding[i] >= max(stride[i], dilation[i]):
            raise ValueError(f"{op}: output_padding {output_padding} must be smaller than stride {stride} or "
                             f"dilation {dilation}")
    size = tuple((s - 1) * st - 2 * p + d * (k - 1) + op_ + 1 for s, st, p, d, k, op_ in
                 zip((h, w), stride, padding, dilation, (kh, kw), output_padding, strict=True))
    if size[0] < 1 or size[1] < 1:
        raise ShapeError(f"{op}: the output size {size} is not positive (input {x.shape}, weight {weight.shape}, "
                         f"stride {stride}, padding {padding}, dilation {dilation})")
    o = og * groups
    _check_bias(op, bias, o, x)
    attrs: dict = {"stride": stride, "padding": padding, "output_size": size}
    if dilation != (1, 1):
        attrs["dilation"] = dilation
    if groups != 1:
        attrs["groups"] = groups
    # An output_padding at or past the stride reaches rows no input row feeds: zero rows, so that conv2d of the
    # output has the input's size again (the op's invariant).
    ho, wo = (out_size(size[i], (kh, kw)[i], stride[i], padding[i], dilation[i]) for i in range(2))
    if ho > h:
        x = cat([x, constant(xp_of(x.data).zeros((n, c, ho - h, w), dtype=x.data.dtype))], 2)
    if wo > w:
        x = cat([x, constant(xp_of(x.data).zeros((n, c, ho, wo - w), dtype=x.data.dtype))], 3)
    return _with_bias(ConvTranspose2d, x, weight, bias, attrs)
