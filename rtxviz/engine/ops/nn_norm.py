"""softmax, log_softmax, layer_norm, batch_norm, group_norm, instance_norm and dropout.

Rules read the saved output (softmax, log_softmax) so backward needs no recomputation. layer_norm keeps its
normalised input and 1/std from forward for a plain backward, and recomputes them with differentiable ops only
when backward itself is being recorded (create_graph), so first-order stays cheap and higher orders stay exact.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import random as _random
from ..backward import grad
from ..device import device_of, to_device, xp_of
from ..dtypes import is_float
from ..errors import DTypeError, GraphError, ShapeError
from ..grad_mode import STATE
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, constant, implements, norm_dim, tensor_method
from .arithmetic import add, add_scalar, mul, mul_scalar, pow_scalar, sub
from .broadcast import sum_to
from .reduction import mean
from .reduction import sum as _sum
from .shape import narrow, reshape
from .unary import exp


def _const(array: Any) -> Tensor:
    return Tensor._wrap(array)


def _check_float(op: str, x: Tensor) -> None:
    if not is_float(x.data.dtype):
        raise DTypeError(f"{op}: expected a float32 or float64 tensor, got dtype {x.data.dtype} (shape {x.shape})")


# -- softmax / log_softmax -------------------------------------------------------------------------------------
class Softmax(Op):
    name = "softmax"
    kind = "nn"
    rule = "dX = Y · (dY - Σ_dim(dY · Y))"
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        dim = ctx.attrs["dim"]
        xp = xp_of(x)
        e = xp.exp(x - x.max(axis=dim, keepdims=True))  # shifted by the max: exp never overflows
        e /= e.sum(axis=dim, keepdims=True)
        return e

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        y = ctx.output
        return (mul(y, sub(g, _sum(mul(g, y), ctx.attrs["dim"], keepdim=True))),)


class LogSoftmax(Op):
    name = "log_softmax"
    kind = "nn"
    rule = "dX = dY - exp(Y) · Σ_dim(dY)"
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        dim = ctx.attrs["dim"]
        xp = xp_of(x)
        shifted = x - x.max(axis=dim, keepdims=True)
        shifted -= xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
        return shifted

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        y = ctx.output
        return (sub(g, mul(exp(y), _sum(g, ctx.attrs["dim"], keepdim=True))),)


@tensor_method("softmax")
@implements(Softmax)
def softmax(x: Tensor, dim: int = -1) -> Any:
    """exp(x) / Σ exp(x) along `dim` (numerically stable).

    >>> from rtxviz import Tensor
    >>> [round(v, 4) for v in Tensor.from_slice([0.0, 0.0], [2]).softmax(0).tolist()]
    [0.5, 0.5]
    """
    _check_float("softmax", x)
    return apply(Softmax, (x,), {"dim": norm_dim("softmax", dim, x.ndim)})


@tensor_method("log_softmax")
@implements(LogSoftmax)
def log_softmax(x: Tensor, dim: int = -1) -> Any:
    """log(softmax(x)) along `dim`, computed as x - logsumexp(x) (stable for large logits).

    >>> from rtxviz import Tensor
    >>> round(Tensor.from_slice([0.0, 0.0], [2]).log_softmax(0).tolist()[0], 4)
    -0.6931
    """
    _check_float("log_softmax", x)
    return apply(LogSoftmax, (x,), {"dim": norm_dim("log_softmax", dim, x.ndim)})


# -- layer_norm ------------------------------------------------------------------------------------------------
def _norm_axes(x_ndim: int, k: int) -> tuple[int, ...]:
    return tuple(range(x_ndim - k, x_ndim))


class LayerNorm(Op):
    name = "layer_norm"
    kind = "nn"
    rule = "dX = (1/σ)·(dX̂ - mean(dX̂) - X̂·mean(dX̂·X̂)), dX̂ = dY·W; dW = Σ dY·X̂; dB = Σ dY"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any = None, b: Any = None) -> Any:
        axes = _norm_axes(x.ndim, len(ctx.attrs["normalized_shape"]))
        xp = xp_of(x)
        xc = x - x.mean(axis=axes, keepdims=True)
        var = (xc * xc).mean(axis=axes, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + ctx.attrs["eps"])
        xhat = xc * rstd
        ctx.state = (xhat, rstd)
        out = xhat if w is None else xhat * w
        if b is not None:
            out += b
        return out.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        x = inputs[0]
        w = inputs[1] if len(inputs) > 1 else None
        axes = _norm_axes(x.ndim, len(ctx.attrs["normalized_shape"]))
        if STATE.enabled:
            # Recording the backward (create_graph): X̂ and 1/σ must be functions of X, not constants.
            xc = sub(x, mean(x, axes, keepdim=True))
            rstd = pow_scalar(add_scalar(mean(mul(xc, xc), axes, keepdim=True), ctx.attrs["eps"]), -0.5)
            xhat = mul(xc, rstd)
        else:
            xhat, rstd = (_const(a) for a in ctx.state)
        grads: list[Any] = [None] * len(inputs)
        if ctx.next[0] is not None:
            dxhat = g if w is None else mul(g, w)
            inner = sub(sub(dxhat, mean(dxhat, axes, keepdim=True)), mul(xhat, mean(mul(dxhat, xhat), axes, True)))
            grads[0] = mul(rstd, inner)
        if w is not None and ctx.next[1] is not None:
            grads[1] = sum_to(mul(g, xhat), w.shape)
        if len(inputs) > 2 and ctx.next[2] is not None:
            grads[2] = sum_to(g, inputs[2].shape)
        return tuple(grads)


@tensor_method("layer_norm")
@implements(LayerNorm, call=lambda x, weight=None, bias=None, *, normalized_shape, eps=1e-5:
            layer_norm(x, normalized_shape, weight, bias, eps))
def layer_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Any:
    """Normalise over the trailing `normalized_shape` dims, then scale by `weight` and shift by `bias`.

    >>> from rtxviz import Tensor
    >>> [round(v, 3) for v in layer_norm(Tensor.from_slice([1.0, 3.0], [1, 2]), 2).tolist()[0]]
    [-1.0, 1.0]
    """
    _check_float("layer_norm", x)
    ns = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    if len(ns) == 0 or len(ns) > x.ndim or tuple(x.shape[x.ndim - len(ns):]) != ns:
        raise ShapeError(f"layer_norm: normalized_shape {list(ns)} does not match the trailing dims of the input "
                         f"of shape {x.shape}")
    for label, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != ns:
            raise ShapeError(f"layer_norm: {label} has shape {t.shape}, expected normalized_shape {ns}")
    attrs = {"normalized_shape": list(ns), "eps": float(eps)}
    if weight is None and bias is None:
        return apply(LayerNorm, (x,), attrs)
    if weight is None:  # a constant 1 keeps the inputs positional: (x, weight, bias)
        weight = constant(xp_of(x.data).ones(ns, dtype=x.data.dtype))
    if bias is None:
        return apply(LayerNorm, (x, weight), attrs)
    return apply(LayerNorm, (x, weight, bias), attrs)



# -- batch_norm / group_norm / instance_norm ------------------------------------------------------------------
# One scheme for the three: x is viewed so that each statistic is one slice of `axes` (batch_norm: x itself,
# every dim but 1; instance_norm: x itself, the positions; group_norm: [N, G, C/G·positions], the last dim), then
# scaled by weight [C] and shifted by bias [C] per channel. Forward keeps X̂ (in the view's shape) and 1/σ; backward
# is dX = (1/σ)·(dX̂ - mean(dX̂) - X̂·mean(dX̂·X̂)) over the same axes, with X̂ and 1/σ rebuilt from X by ops when
# backward itself is recorded (create_graph), so that every order is exact.
class Running:
    """Running statistics (Tensors [C]) an op reads (eval) or updates in place (training, with momentum).

    `count` (BatchNorm's num_batches_tracked, an int64 Tensor), when given, is incremented in place by the op on
    each update, and `cumulative` takes momentum = 1/count (PyTorch's momentum=None): both happen inside the
    op's forward, so a graph-cache replay of a training step counts its batch too."""

    __slots__ = ("mean", "var", "momentum", "count", "cumulative")

    def __init__(self, mean: Tensor | None, var: Tensor | None, momentum: float | None = None,
                 count: Tensor | None = None, cumulative: bool = False) -> None:
        self.mean, self.var, self.momentum = mean, var, momentum
        self.count, self.cumulative = count, cumulative

    @property
    def updates(self) -> bool:
        return self.momentum is not None or self.cumulative

    def __repr__(self) -> str:
        if self.cumulative:
            kind = "cumulative average"
        else:
            kind = "read" if self.momentum is None else f"momentum {self.momentum:g}"
        return f"<running statistics, {kind}{', counted' if self.count is not None else ''}>"


def _chan_shape(c: int, nd: int) -> tuple[int, ...]:
    return (1, c) + (1,) * (nd - 2)


def _layout(kind: str, shape: tuple[int, ...], attrs: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(view, axes): the shape x is normalised in, and the axes of one statistic in it."""
    nd = len(shape)
    if kind == "batch":
        return shape, (0,) + tuple(range(2, nd))
    if kind == "instance":
        return shape, tuple(range(2, nd))
    return (shape[0], attrs["num_groups"], -1), (2,)


def _reduced_axes(nd: int) -> tuple[int, ...]:
    """Every axis but the channel's: where dW and dB sum."""
    return (0,) + tuple(range(2, nd))


def _update_running(running: Running, mean: Any, var: Any, count: int, c: int) -> None:
    """running = (1 - momentum)·running + momentum·batch statistic (the variance unbiased), in place, as PyTorch;
    per-sample statistics (instance_norm) are averaged over the batch first."""
    if running.count is not None:
        running.count.data[...] += 1
    m = 1.0 / float(running.count.data) if running.cumulative and running.count is not None else running.momentum
    assert m is not None  # an update has a momentum or counts (a read has neither)
    mean_c = mean.reshape(-1, c).mean(axis=0)
    var_c = var.reshape(-1, c).mean(axis=0) * (count / (count - 1))
    for t, stat in ((running.mean, mean_c), (running.var, var_c)):
        if t is not None:
            t.data *= 1.0 - m
            t.data += (m * stat).astype(t.data.dtype, copy=False)


def _batch_statistics(x: Any, eps: float) -> tuple[Any, Any, Any, Any]:
    """batch_norm's training statistics per channel of x [N, C, ...]: (X̂ in x's shape, mean, biased variance,
    1/σ, the last three [1, C, 1, ...]). The sums are einsums over x viewed [N, C, rest] (a sum of each row, then
    over N: ~3x faster than numpy's mean over the axes (0, 2, ...), whose strided reduction does not vectorise,
    and the variance's squares are never stored); each row's sum runs over one sample's values only, so float32
    keeps its precision as with the pairwise mean."""
    xp = xp_of(x)
    n, c = x.shape[0], x.shape[1]
    cs = _chan_shape(c, x.ndim)
    x3 = x.reshape(n, c, -1)
    count = x3.shape[0] * x3.shape[2]
    mean = xp.einsum("ncm->nc", x3).sum(axis=0) / count
    xhat = x3 - mean[:, None]
    var = xp.einsum("ncm,ncm->nc", xhat, xhat).sum(axis=0) / count
    rstd = 1.0 / xp.sqrt(var + eps)
    xhat *= rstd[:, None]
    return xhat.reshape(x.shape), mean.reshape(cs), var.reshape(cs), rstd.reshape(cs)


def _norm_forward(kind: str, ctx: Any, x: Any, w: Any, b: Any) -> Any:
    attrs = ctx.attrs
    nd, c = x.ndim, x.shape[1]
    xp = xp_of(x)
    running = attrs.get("running")
    if kind == "batch" and not attrs["training"]:  # eval: the running statistics, per channel
        mean = running.mean.data.astype(x.dtype, copy=False).reshape(_chan_shape(c, nd))
        rstd = (1.0 / xp.sqrt(running.var.data.astype(x.dtype, copy=False) + attrs["eps"])).reshape(mean.shape)
        xhat = (x - mean) * rstd
        ctx.state = (xhat, rstd, mean)
    elif kind == "batch" and x.size > 0:
        xhat, mean, var, rstd = _batch_statistics(x, attrs["eps"])
        ctx.state = (xhat, rstd)
        if running is not None and running.updates:
            _update_running(running, mean, var, x.size // c, c)
    else:
        view, axes = _layout(kind, x.shape, attrs)
        xv = x.reshape(view)
        mean = xv.mean(axis=axes, keepdims=True)
        xhat = xv - mean
        var = (xhat * xhat).mean(axis=axes, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + attrs["eps"])
        xhat *= rstd
        ctx.state = (xhat, rstd)
        if running is not None and running.updates:
            _update_running(running, mean, var, xv.size // mean.size, c)
        xhat = xhat.reshape(x.shape)
    cs = _chan_shape(c, nd)
    out = xhat * w.reshape(cs) if w is not None else xhat.copy()
    if b is not None:
        out += b.reshape(cs)
    return out.astype(x.dtype, copy=False)


def _norm_backward(kind: str, ctx: Any, g: Any) -> tuple:
    inputs = ctx.saved_inputs
    x = inputs[0]
    w = inputs[1] if len(inputs) > 1 else None
    nd, c = x.ndim, x.shape[1]
    cs = _chan_shape(c, nd)
    fixed = kind == "batch" and not ctx.attrs["training"]  # statistics that do not depend on X
    view, axes = (x.shape, ()) if fixed else _layout(kind, x.shape, ctx.attrs)
    if fixed:
        rstd, mean_c = _const(ctx.state[1]), _const(ctx.state[2])
        xhat = mul(sub(x, mean_c), rstd) if STATE.enabled else _const(ctx.state[0])
    elif STATE.enabled:
        # Recording the backward (create_graph): X̂ and 1/σ must be functions of X, not constants.
        xv = reshape(x, view)
        xc = sub(xv, mean(xv, axes, keepdim=True))
        rstd = pow_scalar(add_scalar(mean(mul(xc, xc), axes, keepdim=True), ctx.attrs["eps"]), -0.5)
        xhat = mul(xc, rstd)
    else:
        xhat, rstd = _const(ctx.state[0]), _const(ctx.state[1])
    grads: list[Any] = [None] * len(inputs)
    if kind == "batch" and not fixed:
        return _batch_norm_train_grads(ctx, g, x, w, xhat, rstd, len(inputs))
    if ctx.next[0] is not None:
        dxhat = g if w is None else mul(g, reshape(w, cs))
        if fixed:
            grads[0] = mul(dxhat, rstd)
        else:
            dv = reshape(dxhat, view)
            inner = sub(sub(dv, mean(dv, axes, keepdim=True)), mul(xhat, mean(mul(dv, xhat), axes, keepdim=True)))
            grads[0] = reshape(mul(rstd, inner), x.shape)
    red = _reduced_axes(nd)
    if w is not None and ctx.next[1] is not None:
        grads[1] = _sum(mul(g, reshape(xhat, x.shape)), red)
    if len(inputs) > 2 and ctx.next[2] is not None:
        grads[2] = _sum(g, red)
    return tuple(grads)


def _batch_norm_train_grads(ctx: Any, g: Any, x: Any, w: Any, xhat: Any, rstd: Any, n_inputs: int) -> tuple:
    """batch_norm's training-mode gradients with the per-channel sums shared: S = Σ dY·X̂ (which is dW) and
    T = Σ dY (which is dB), then dX = (W/σ)·(dY - X̂·S/M - T/M), M the values per channel. The same formula as
    the general one (mean(dX̂·X̂) = W·S/M), in 7 passes over the input instead of 12; still ops only, so that a
    recorded backward (create_graph) is exact."""
    nd, c = x.ndim, x.shape[1]
    cs, red = _chan_shape(c, nd), _reduced_axes(nd)
    count = x.data.size // c
    xhat = reshape(xhat, x.shape)
    need_x = ctx.next[0] is not None
    need_w = w is not None and ctx.next[1] is not None
    need_b = n_inputs > 2 and ctx.next[2] is not None
    if not STATE.enabled and count > 0 and (need_x or need_w or need_b):
        # Not recorded: one helper op on raw arrays (what a graph cache replays), its result [dX, S, T] flat.
        flat = apply(BatchNormTrainBackward, (g, xhat, rstd) if w is None else (g, xhat, rstd, w))
        size = x.data.size
        dx = reshape(narrow(flat, 0, 0, size), tuple(x.shape)) if need_x else None
        sums = (narrow(flat, 0, size, c) if need_w else None, narrow(flat, 0, size + c, c) if need_b else None)
        return (dx, *sums)[:n_inputs]
    s = _sum(mul(g, xhat), red) if need_x or need_w else None
    t = _sum(g, red) if need_x or need_b else None
    grads: list[Any] = [None] * n_inputs
    if need_x:
        assert s is not None and t is not None  # both summed above when X needs a gradient
        scale = reshape(rstd, (c,)) if w is None else mul(reshape(w, (c,)), reshape(rstd, (c,)))
        centred = add(add(g, mul(xhat, reshape(mul_scalar(s, -1.0 / count), cs))),
                      reshape(mul_scalar(t, -1.0 / count), cs))
        grads[0] = mul(centred, reshape(scale, cs))
    if need_w:
        grads[1] = s
    if need_b:
        grads[2] = t
    return tuple(grads)


class BatchNormTrainBackward(Op):
    """batch_norm's training-mode first-order gradients on raw arrays, packed flat [dX, dW = S, dB = T]: the
    formula of _batch_norm_train_grads, its sums S = Σ dY·X̂ and T = Σ dY as einsums over [N, C, rest] (as
    _batch_statistics: ~3x faster than numpy's strided sums over the axes (0, 2, ...)) and dX in one buffer
    updated in place (4 passes and one allocation instead of 4 ops' temporaries). Inputs (dY, X̂, 1/σ [1, C, 1, ...]
    [, W]). Only used where no graph is recorded, so it has no backward of its own."""

    name = "batch_norm_backward"
    kind = "gradient"
    rule = "(first-order helper of batch_norm in training mode; not differentiated)"
    differentiable = False
    examples = (
        Example(lambda x, w, b: grad(batch_norm(x, None, None, w, b, True, 0.0, 1e-5).pow(2).sum(), [x])[0],
                ((4, 3, 2), (3,), (3,))),
    )

    @staticmethod
    def forward(ctx: Any, g: Any, xhat: Any, rstd: Any, w: Any = None) -> Any:
        xp = xp_of(g)
        n, c = g.shape[0], g.shape[1]
        g3, xhat3 = g.reshape(n, c, -1), xhat.reshape(n, c, -1)
        size, count = g.size, g3.shape[0] * g3.shape[2]
        flat = xp.empty(size + 2 * c, dtype=g.dtype)
        s, t = flat[size:size + c], flat[size + c:]
        xp.einsum("ncm,ncm->nc", g3, xhat3).sum(axis=0, out=s)
        xp.einsum("ncm->nc", g3).sum(axis=0, out=t)
        scale = rstd.reshape(c) if w is None else w.reshape(c) * rstd.reshape(c)
        dx = flat[:size].reshape(g3.shape)
        xp.multiply(xhat3, (s * (-1.0 / count))[:, None], out=dx)
        dx += g3
        dx += (t * (-1.0 / count))[:, None]
        dx *= scale[:, None]
        return flat

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError("batch_norm_backward: internal first-order helper, not differentiated")


def _norm_batched(kind: str, ctx: Any, g: Any) -> tuple:
    """The batch rule: backward's first-order formula on raw arrays, the batch of gradients one more leading dim."""
    inputs = ctx.saved_inputs
    x = inputs[0].data
    w = inputs[1].data if len(inputs) > 1 else None
    nd, c, bsz = x.ndim, x.shape[1], g.shape[0]
    cs = _chan_shape(c, nd)
    xhat, rstd = ctx.state[0], ctx.state[1]
    red = tuple(a + 1 for a in _reduced_axes(nd))
    grads: list[Any] = [None] * len(inputs)
    if ctx.next[0] is not None:
        dxhat = g if w is None else g * w.reshape(cs)
        if kind == "batch" and not ctx.attrs["training"]:
            grads[0] = dxhat * rstd
        else:
            view, axes = _layout(kind, x.shape, ctx.attrs)
            dv = dxhat.reshape((bsz, *xhat.shape))
            axes1 = tuple(a + 1 for a in axes)
            inner = dv - dv.mean(axis=axes1, keepdims=True) - xhat * (dv * xhat).mean(axis=axes1, keepdims=True)
            grads[0] = (rstd * inner).reshape(g.shape)
    if w is not None and ctx.next[1] is not None:
        grads[1] = (g * xhat.reshape(x.shape)).sum(axis=red)
    if len(inputs) > 2 and ctx.next[2] is not None:
        grads[2] = g.sum(axis=red)
    return tuple(grads)


class BatchNorm(Op):
    name = "batch_norm"
    kind = "nn"
    rule = ("dX = (1/σ)·(dX̂ - mean(dX̂) - X̂·mean(dX̂·X̂)) over all dims but C (training) or dX̂/σ (eval), "
            "dX̂ = dY·W; dW = Σ dY·X̂; dB = Σ dY")
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any = None, b: Any = None) -> Any:
        return _norm_forward("batch", ctx, x, w, b)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return _norm_backward("batch", ctx, g)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return _norm_batched("batch", ctx, g)


class GroupNorm(Op):
    name = "group_norm"
    kind = "nn"
    rule = "dX = (1/σ)·(dX̂ - mean(dX̂) - X̂·mean(dX̂·X̂)) over each group, dX̂ = dY·W; dW = Σ dY·X̂; dB = Σ dY"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any = None, b: Any = None) -> Any:
        return _norm_forward("group", ctx, x, w, b)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return _norm_backward("group", ctx, g)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return _norm_batched("group", ctx, g)


class InstanceNorm(Op):
    name = "instance_norm"
    kind = "nn"
    rule = ("dX = (1/σ)·(dX̂ - mean(dX̂) - X̂·mean(dX̂·X̂)) over each (sample, channel), dX̂ = dY·W; "
            "dW = Σ dY·X̂; dB = Σ dY")
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any = None, b: Any = None) -> Any:
        return _norm_forward("instance", ctx, x, w, b)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return _norm_backward("instance", ctx, g)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return _norm_batched("instance", ctx, g)


def _check_channels(op: str, x: Tensor, **tensors: Tensor | None) -> int:
    """x [N, C, ...] is a float Tensor; every given per-channel tensor is [C] of x's dtype. Returns C."""
    _check_float(op, x)
    if x.ndim < 2:
        raise ShapeError(f"{op}: input must be [N, C, ...] (at least 2 dims), got shape {x.shape}")
    c = x.shape[1]
    for label, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, Tensor) or t.dtype != x.dtype:
            raise DTypeError(f"{op}: {label} must be a Tensor of the input's dtype {x.dtype}, got "
                             f"{getattr(t, 'dtype', type(t).__name__)}")
        if tuple(t.shape) != (c,):
            raise ShapeError(f"{op}: {label} must have shape ({c},) for {c} channels (input {x.shape}), "
                             f"got {t.shape}")
    return c


def _apply_norm(op: type, x: Tensor, weight: Tensor | None, bias: Tensor | None, attrs: dict) -> Any:
    if weight is None and bias is None:
        return apply(op, (x,), attrs)
    if weight is None:  # a constant 1 keeps the inputs positional: (x, weight, bias)
        weight = constant(xp_of(x.data).ones((x.shape[1],), dtype=x.data.dtype))
    if bias is None:
        return apply(op, (x, weight), attrs)
    return apply(op, (x, weight, bias), attrs)


def _check_momentum(op: str, momentum: Any) -> float:
    if momentum is None or isinstance(momentum, bool) or not 0.0 <= float(momentum) <= 1.0:
        raise ValueError(f"{op}: momentum must be a float in [0, 1], got {momentum!r} (a cumulative average, "
                         "momentum None, needs the counter: pass num_batches_tracked)")
    return float(momentum)


@tensor_method("batch_norm")
@implements(BatchNorm, call=lambda x, weight=None, bias=None, *, training, eps, running_mean, running_var:
            batch_norm(x, _stat_tensor(running_mean, x), _stat_tensor(running_var, x), weight, bias, training,
                       eps=eps))
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float | None = 0.1, eps: float = 1e-5, *,
               num_batches_tracked: Tensor | None = None) -> Any:
    """Batch normalisation of input [N, C, ...] per channel, as PyTorch's F.batch_norm: with training, the batch
    mean and biased variance over every dim but 1 (and running_mean / running_var, when given, updated in place:
    (1 - momentum)·running + momentum·batch, the variance unbiased); without, running_mean and running_var.
    Then (x - mean) / sqrt(var + eps) · weight + bias.

    `num_batches_tracked` (an int64 0-d Tensor, BatchNorm's counter; not in PyTorch's F.batch_norm) is
    incremented in place with each update, and then momentum may be None: a cumulative average (1/count).

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 3.0, 2.0, 6.0], [2, 2])
    >>> rm, rv = Tensor.zeros([2]), Tensor.ones([2])
    >>> [round(v, 3) for v in batch_norm(x, rm, rv, training=True).tolist()[0]]
    [-1.0, -1.0]
    >>> [round(v, 3) for v in rm.tolist()], [round(v, 3) for v in rv.tolist()]  # 0.9 · old + 0.1 · batch
    ([0.15, 0.45], [0.95, 1.35])
    >>> [round(v, 3) for v in batch_norm(x, rm, rv).tolist()[0]]  # eval: the running statistics
    [0.872, 2.195]
    """
    op = "batch_norm"
    x = input
    c = _check_channels(op, x, weight=weight, bias=bias)
    for label, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and (not isinstance(t, Tensor) or tuple(t.shape) != (c,)):
            raise ShapeError(f"{op}: {label} must be a Tensor of shape ({c},) for {c} channels (input {x.shape}), "
                             f"got {getattr(t, 'shape', type(t).__name__)}")
    attrs: dict = {"training": bool(training), "eps": float(eps)}
    if training:
        if x.data.size // max(c, 1) <= 1:
            raise ValueError(f"{op}: expected more than 1 value per channel when training, got input of shape "
                             f"{x.shape}")
        if running_mean is not None or running_var is not None:
            if num_batches_tracked is not None and (not isinstance(num_batches_tracked, Tensor)
                                                    or num_batches_tracked.data.dtype.kind not in "iu"
                                                    or num_batches_tracked.ndim != 0):
                raise DTypeError(f"{op}: num_batches_tracked must be a 0-d integer Tensor, got "
                                 f"{getattr(num_batches_tracked, 'dtype', type(num_batches_tracked).__name__)}")
            cumulative = momentum is None and num_batches_tracked is not None
            attrs["running"] = Running(running_mean, running_var,
                                       None if cumulative else _check_momentum(op, momentum),
                                       num_batches_tracked, cumulative)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: running_mean and running_var are needed when not training (eval mode uses "
                             "them instead of the batch statistics)")
        attrs["running"] = Running(running_mean, running_var)
    return _apply_norm(BatchNorm, x, weight, bias, attrs)


def _stat_tensor(values: Sequence[float] | None, like: Tensor) -> Tensor | None:
    """A reference file's running statistics (a list of floats, or null) as a constant of the input's dtype."""
    if values is None:
        return None
    return constant(xp_of(like.data).asarray(values, dtype=like.data.dtype))


@tensor_method("group_norm")
@implements(GroupNorm, call=lambda x, weight=None, bias=None, *, num_groups, eps:
            group_norm(x, num_groups, weight, bias, eps))
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Any:
    """Group normalisation of input [N, C, ...] (PyTorch's F.group_norm): the C channels split into num_groups
    groups, each normalised by its mean and biased variance over its channels and all positions; then weight [C]
    and bias [C] per channel.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 3.0, 5.0, 9.0], [1, 4])
    >>> [round(v, 3) for v in group_norm(x, 2).tolist()[0]]
    [-1.0, 1.0, -1.0, 1.0]
    """
    op = "group_norm"
    x = input
    c = _check_channels(op, x, weight=weight, bias=bias)
    g = operator.index(num_groups)
    if g < 1 or c % g:
        raise ShapeError(f"{op}: num_groups={g} must be >= 1 and divide the {c} channels (input {x.shape})")
    return _apply_norm(GroupNorm, x, weight, bias, {"num_groups": g, "eps": float(eps)})


@tensor_method("instance_norm")
@implements(InstanceNorm, call=lambda x, weight=None, bias=None, *, eps:
            instance_norm(x, weight=weight, bias=bias, eps=eps))
def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None, bias: Tensor | None = None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Instance normalisation of input [N, C, ...] (PyTorch's F.instance_norm): each (sample, channel) normalised
    over its positions, then weight [C] and bias [C]. running_mean / running_var, when given, are updated in place
    with the batch average of the per-instance statistics; use_input_stats=False normalises with them instead
    (that is batch_norm in eval mode, and is recorded as such).

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 3.0, 2.0, 6.0], [1, 2, 2])
    >>> [[round(v, 3) for v in row] for row in instance_norm(x).tolist()[0]]
    [[-1.0, 1.0], [-1.0, 1.0]]
    """
    op = "instance_norm"
    x = input
    c = _check_channels(op, x, weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    if not use_input_stats:
        return batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=eps)
    if x.ndim < 3 or x.data.size // max(x.shape[0] * c, 1) <= 1:
        raise ValueError(f"{op}: expected more than 1 spatial element per (sample, channel), got input of shape "
                         f"{x.shape}")
    attrs: dict = {"eps": float(eps)}
    if running_mean is not None or running_var is not None:
        attrs["running"] = Running(running_mean, running_var, _check_momentum(op, momentum))
    return _apply_norm(InstanceNorm, x, weight, bias, attrs)


# -- dropout ---------------------------------------------------------------------------------------------------
class Dropout(Op):
    name = "dropout"
    kind = "nn"
    rule = "dX = dY · mask / (1 - p)"
    # the harness seeds every evaluation alike
    examples = (Example(lambda x: dropout(x, 0.5), ((4, 6),)), Example(lambda x: dropout2d(x, 0.5), ((3, 4, 2, 2),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        p = ctx.attrs["p"]
        # Drawn on the CPU from rtxviz's generator: seeded, identical on numpy and cupy, and replayable by
        # restoring the generator state (checkpoint recomputation). Channelwise (dropout2d): one draw per
        # (sample, channel), broadcast over the positions.
        shape = x.shape[:2] + (1,) * (x.ndim - 2) if ctx.attrs.get("channelwise") else x.shape
        keep = _random.generator().random(shape) >= p
        scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
        mask = keep.astype(x.dtype) * x.dtype.type(scale)
        if type(x) is not np.ndarray:
            mask = to_device(mask, device_of(x))
        ctx.state = mask
        return x * mask

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, _const(ctx.state)),)


@tensor_method("dropout")
@implements(Dropout, reference=None)
def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Any:
    """Zero each element with probability `p` and scale the rest by 1/(1-p); `x` itself when not training.

    >>> from rtxviz import Tensor
    >>> dropout(Tensor.ones([3]), 0.5, training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability p must be between 0 and 1, got {p}")
    _check_float("dropout", x)
    if not training or p == 0.0:
        return x
    return apply(Dropout, (x,), {"p": p})


def dropout2d(x: Tensor, p: float = 0.5, training: bool = True) -> Any:
    """Zero whole channels: each (sample, channel) of x [N, C, ...] with probability `p`, the rest scaled by
    1/(1-p) (PyTorch's F.dropout2d on 4-D input; a 3-D input is [N, C, L], as PyTorch treats it today);
    `x` itself when not training.

    >>> from rtxviz import Tensor, manual_seed
    >>> manual_seed(0)
    >>> y = dropout2d(Tensor.ones([2, 8, 3, 3]), 0.5).numpy()
    >>> sorted({float(v) for v in y.reshape(16, 9).std(axis=1)})  # every channel all kept or all dropped
    [0.0]
    """
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout2d: probability p must be between 0 and 1, got {p}")
    _check_float("dropout2d", x)
    if x.ndim not in (3, 4):
        raise ShapeError(f"dropout2d: input must be [N, C, H, W] (or [N, C, L]), 3 or 4 dims, got shape {x.shape}")
    if not training or p == 0.0:
        return x
    return apply(Dropout, (x,), {"p": p, "channelwise": True})
