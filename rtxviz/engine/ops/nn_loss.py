"""Losses, with PyTorch's semantics and reductions ("mean", "sum", "none"; kl_div also "batchmean").

Single ops with their own rules: cross_entropy (class targets), nll_loss, mse_loss, binary_cross_entropy,
smooth_l1_loss, huber_loss and kl_div. Composed of other ops, so every derivative comes from those:
cross_entropy with class-probability targets (reference name cross_entropy_soft), l1_loss,
binary_cross_entropy_with_logits and cosine_embedding_loss.

Class targets are int64 index tensors. They ride in the op's attrs (as an `IndexArg`) rather than as a
second input, because every tensor input of an op shares one dtype; the forward also accepts them as a
second array input, the layout of the reference files (`args: [logits, target]`). Class weights (`weight=`) and
pos_weight are constants, never differentiated; float targets are inputs like any other and get gradients.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..device import xp_of
from ..dtypes import int64, is_float
from ..errors import DeviceError, DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor, as_tensor_like
from ._base import Example, constant, first_grad, implements
from .arithmetic import add as _add
from .arithmetic import add_scalar, div, mask_mul, mul, mul_scalar, neg, rsub_scalar, sub
from .broadcast import batched_sum_to, expand, sum_to
from .nn_norm import log_softmax, softmax
from .reduction import mean
from .reduction import sum as _sum
from .shape import reshape
from .unary import abs as _abs
from .unary import clamp, exp, log, softplus, sqrt

_REDUCTIONS = ("mean", "sum", "none")
_T3 = Tensor(np.array([2, 0, 3]))  # class targets of the examples below
_T3I = Tensor(np.array([2, -100, 3]))  # the same with an ignored row
_W4 = [0.5, 1.0, 2.0, 1.5]  # class weights of the examples below


class IndexArg:
    """An integer array carried in an op's attrs (class targets, embedding ids, pooling argmax positions).

    Prints as its shape, not its values, so error messages and graph views stay short.
    """

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> Any:
        return self.array.dtype

    def __repr__(self) -> str:
        return f"<{self.array.dtype} indices {tuple(self.array.shape)}>"


class ConstArg:
    """A float array carried in an op's attrs: a constant the op reads and never differentiates (class weights).

    Prints as its dtype and shape, not its values.
    """

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def __repr__(self) -> str:
        return f"<{self.array.dtype} weight {tuple(self.array.shape)}>"


def _check_reduction(op: str, reduction: str, allowed: tuple[str, ...] = _REDUCTIONS) -> None:
    if reduction not in allowed:
        names = ", ".join(repr(r) for r in allowed[:-1]) + f" or {allowed[-1]!r}"
        raise ValueError(f"{op}: reduction must be {names}, got {reduction!r}")


def _check_float(op: str, label: str, x: Any) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {label} must be a Tensor or Variable, got {type(x).__name__}")
    if not is_float(x.data.dtype):
        raise DTypeError(f"{op}: {label} must be float32 or float64, got dtype {x.data.dtype} (shape {x.shape})")


def index_array(op: str, label: str, idx: Any, like: Tensor) -> Any:
    """The raw int64 array of an index argument, on `like`'s device; clear errors for anything else."""
    if isinstance(idx, Tensor):
        arr = idx.data
    elif hasattr(idx, "dtype") and hasattr(idx, "shape"):
        arr = idx
    else:
        raise TypeError(f"{op}: {label} must be an int64 Tensor, got {type(idx).__name__}")
    if arr.dtype != int64:
        raise DTypeError(f"{op}: {label} must have dtype int64 (class/row indices), got {arr.dtype} "
                         f"(shape {tuple(arr.shape)}); convert it with .long()")
    if type(arr) is not type(like.data):
        raise DeviceError(f"{op}: {label} is on {Tensor._wrap(arr).device} but the input is on {like.device}")
    return arr


def _constant_like(op: str, label: str, value: Any, like: Tensor) -> Tensor:
    """A constant argument (class weights, pos_weight: a Tensor, array or list of floats) as a float Tensor of
    `like`'s dtype and device (a Tensor passes as it is, and is checked)."""
    if isinstance(value, Tensor):
        t = value
    else:
        t = as_tensor_like(value if hasattr(value, "dtype") else [float(v) for v in value], like)
    if not is_float(t.data.dtype):
        raise DTypeError(f"{op}: {label} must be float32 or float64, got dtype {t.data.dtype} (shape {t.shape})")
    if type(t.data) is not type(like.data):
        raise DeviceError(f"{op}: {label} is on {t.device} but the input is on {like.device}")
    return t


def _class_weight(op: str, weight: Any, like: Tensor, num_classes: int) -> ConstArg | None:
    if weight is None:
        return None
    w = _constant_like(op, "weight", weight, like)
    if w.shape != (num_classes,):
        raise ShapeError(f"{op}: weight has shape {w.shape} but the input {like.shape} has {num_classes} classes "
                         f"(expected one weight per class, shape ({num_classes},))")
    return ConstArg(w.data)


def _check_classes(op: str, t: Any, num_classes: int, ignore_index: int) -> None:
    xp = xp_of(t)
    bad = (t < 0) | (t >= num_classes)
    if ignore_index is not None:
        bad &= t != ignore_index
    if bool(bad.any()):
        pos = int(xp.argmax(bad.reshape(-1)))
        value = int(t.reshape(-1)[pos])
        where = tuple(int(i) for i in xp.unravel_index(pos, t.shape)) if t.ndim != 1 else pos
        raise ShapeError(f"{op}: target contains class index {value} at position {where}, but there are "
                         f"{num_classes} classes (expected 0..{num_classes - 1}"
                         + (f" or ignore_index {ignore_index})" if ignore_index is not None else ")"))


def _check_target_shape(op: str, logits: Tensor, t: Any) -> None:
    if logits.ndim < 2:
        raise ShapeError(f"{op}: input must have shape [C] (with a 0-d target), [N, C] or [N, C, d1, ...], got "
                         f"{logits.shape} with a target of shape {tuple(t.shape)}")
    want = (logits.shape[0],) + tuple(logits.shape[2:])
    if tuple(t.shape) != want:
        raise ShapeError(f"{op}: target has shape {tuple(t.shape)} but input {logits.shape} needs a target of "
                         f"shape {want} (one class index per row)")


def _target(ctx: Any, target: Any) -> Any:
    return ctx.attrs["target"].array if target is None else target


def _weight(ctx: Any, x: Any) -> Any:
    """The op's class weights as an array of x's dtype, or None."""
    w = ctx.attrs.get("weight")
    if w is None:
        return None
    w = w.array
    return w if w.dtype == x.dtype else w.astype(x.dtype)


def _class_state(ctx: Any, x: Any, t: Any) -> tuple[Any, Any, Any, Any, Any]:
    """Per row (sample) of a class loss: the target with ignored rows at class 0, whether the row counts (its
    target is not ignore_index; None when every row does), w[target] (None without class weights), the factor of
    the summed loss in the output (1 / Σ w[target] over the rows that count for "mean", else 1) and that factor
    per row (0 on ignored rows)."""
    xp = xp_of(x)
    dtype = x.dtype
    valid = t != ctx.attrs.get("ignore_index", -100)
    if bool(valid.all()):
        valid, tc = None, t
    else:
        tc = xp.where(valid, t, 0)
    w = _weight(ctx, x)
    wt = None if w is None else w[tc]
    if ctx.attrs.get("reduction", "mean") != "mean":
        return tc, valid, wt, 1.0, (xp.ones(t.shape, dtype=dtype) if valid is None else valid.astype(dtype))
    if valid is None and wt is None:
        scale = 1.0 / t.size if t.size else math.nan
        return tc, valid, wt, scale, xp.full(t.shape, scale, dtype=dtype)
    if valid is None:
        assert wt is not None  # both None returned above
        total = wt.sum()
    else:
        total = valid.sum(dtype=dtype) if wt is None else xp.where(valid, wt, 0).sum()
    with np.errstate(divide="ignore"):
        scale = xp.reciprocal(total.astype(dtype, copy=False))  # torch: a mean over no rows (no weight) is nan
    coef = xp.full(t.shape, scale, dtype=dtype) if valid is None else \
        xp.where(valid, scale, dtype.type(0)).astype(dtype, copy=False)
    return tc, valid, wt, scale, coef


def _onehot(tc: Any, num_classes: int, dtype: Any) -> Any:
    xp = xp_of(tc)
    shape = (1, num_classes) + (1,) * (tc.ndim - 1)
    return (xp.arange(num_classes).reshape(shape) == tc[:, None]).astype(dtype)


def _reduce_rows(loss: Any, valid: Any, scale: Any, reduction: str, dtype: Any) -> Any:
    xp = xp_of(loss)
    if valid is not None:
        loss = xp.where(valid, loss, dtype.type(0))
    if reduction == "none":
        return loss.astype(dtype, copy=False)
    if scale.__class__ is float:
        return xp.asarray(loss.sum() * scale, dtype=dtype)
    with np.errstate(invalid="ignore"):  # 0 · inf: the mean over no rows
        return xp.asarray(loss.sum() * scale, dtype=dtype)


class SavedState:
    """A forward's ctx.state handed to its gradient op inside attrs (the graph cache binds it to that forward's
    fresh state on replay). Prints as a name, not as arrays, in errors and graph views."""

    __slots__ = ("state",)

    def __init__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return "<forward state>"


def _grad_shape(g: Any, reduction: str) -> Any:
    """dL as a factor against [N, C, d...]: 0-d (mean/sum) as is, per-row [N, d...] with a class axis added."""
    return g.reshape((g.shape[0], 1) + tuple(g.shape[1:])) if reduction == "none" else g


def _batched_grad_shape(g: Any, reduction: str, ndim: int) -> Any:
    """A batch of dL (leading dim B) as a factor against [B, N, C, d...] (`ndim` = the input's rank)."""
    if reduction == "none":
        return g.reshape((g.shape[0], g.shape[1], 1) + tuple(g.shape[2:]))
    return g.reshape((g.shape[0],) + (1,) * ndim)


# -- cross_entropy: one fused op (class targets) -----------------------------------------------------------------
def _ce_base(state: tuple, eps: float) -> Any:
    """(A·softmax(Z) - a)·coef from the forward's state: the gradient of cross_entropy in its logits at dL = 1.

    Per row i, a_c = (1 - ε)·w[t_i]·[c = t_i] + (ε/C)·w_c is the weight of -log p_c in the row's loss, A its sum,
    coef the row's factor in the output (w = 1 without class weights, and then A = 1)."""
    logp, tc, coef, ca, w, wt = state
    xp = xp_of(logp)
    num_classes = logp.shape[1]
    probs = xp.exp(logp)
    if w is None:
        if logp.ndim == 2:
            probs[xp.arange(logp.shape[0]), tc] -= 1.0 - eps
        else:
            probs -= _onehot(tc, num_classes, logp.dtype) * (1.0 - eps)
        if eps:
            probs -= eps / num_classes
        probs *= coef
        return probs
    probs *= ca
    hit = ((1.0 - eps) * wt)[:, None] * coef  # [N, 1, d...]
    if logp.ndim == 2:
        probs[xp.arange(logp.shape[0]), tc] -= hit[:, 0]
    else:
        probs -= _onehot(tc, num_classes, logp.dtype) * hit
    if eps:
        probs -= (w * (eps / num_classes)).reshape((1, num_classes) + (1,) * (logp.ndim - 2)) * coef
    return probs


class CrossEntropy(Op):
    """Softmax cross-entropy against class indices, with class weights, ignore_index and label smoothing: one op
    whose gradient is one pass over [N, C] (its gradient op `cross_entropy_grad` carries every higher order)."""

    name = "cross_entropy"
    kind = "loss"
    rule = "dZ = (A·softmax(Z) - a)·dL / Σw  (a: the smoothed one-hot target times the class weights, A = Σ a)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, z: Any, target: Any = None) -> Any:
        t = _target(ctx, target)
        xp = xp_of(z)
        num_classes = z.shape[1]
        logp = z - z.max(axis=1, keepdims=True)
        logp -= xp.log(xp.exp(logp).sum(axis=1, keepdims=True))
        tc, valid, wt, scale, coef = _class_state(ctx, z, t)
        w = _weight(ctx, z)
        eps = ctx.attrs.get("label_smoothing", 0.0)
        loss = -xp.take_along_axis(logp, tc[:, None], axis=1)[:, 0]
        if w is None:
            if eps:
                loss = (1.0 - eps) * loss - (eps / num_classes) * logp.sum(axis=1)
        else:
            loss *= wt
            if eps:
                wb = w.reshape((1, num_classes) + (1,) * (z.ndim - 2))
                loss = (1.0 - eps) * loss - (eps / num_classes) * (logp * wb).sum(axis=1)
            ca = coef * ((1.0 - eps) * wt + (eps / num_classes) * w.sum())  # coef · A per row
        coef = coef[:, None]
        ca = coef if w is None else ca[:, None]
        ctx.state = (logp, tc, coef, ca, w, wt)
        return _reduce_rows(loss, valid, scale, ctx.attrs.get("reduction", "mean"), z.dtype)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # One op computes (A·softmax(Z) - a)·coef·dL from the forward's log-probabilities (no raw array built
        # here, so a graph-cache replay recomputes it); its own backward makes every higher order exact.
        attrs = {"state": SavedState(ctx.state), "reduction": ctx.attrs.get("reduction", "mean"),
                 "label_smoothing": ctx.attrs.get("label_smoothing", 0.0)}
        grad = apply(CrossEntropyGrad, (g, ctx.saved_inputs[0]), attrs)
        return (grad,) if len(ctx.next) == 1 else (grad, None)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        base = _ce_base(ctx.state, ctx.attrs.get("label_smoothing", 0.0))
        out = base[None] * _batched_grad_shape(g, ctx.attrs.get("reduction", "mean"), base.ndim)
        return (out,) if len(ctx.next) == 1 else (out, None)


class CrossEntropyGrad(Op):
    """The gradient of cross_entropy in its logits, (A·softmax(Z) - a)·coef·dL (a: the smoothed one-hot target
    times the class weights, A = Σ_c a, coef the per-row factor: 1/Σw for mean, 0 on ignored rows). Inputs
    (dL, Z); first order reads the forward's log-probabilities from attrs["state"], so it costs one pass over
    [N, C] (exp, subtract at the targets, scale)."""

    name = "cross_entropy_grad"
    kind = "gradient"
    examples = (
        Example(lambda z: first_grad(lambda a: cross_entropy(a, _T3), z), ((3, 4),)),
        Example(lambda z: first_grad(lambda a: cross_entropy(a, _T3, "none", label_smoothing=0.2), z), ((3, 4),)),
        Example(lambda z: first_grad(lambda a: cross_entropy(a, _T3I, label_smoothing=0.1, weight=_W4), z),
                ((3, 4),)),
        Example(lambda z: first_grad(lambda a: cross_entropy(a, _T3I, "none", weight=_W4), z), ((3, 4),)),
    )
    rule = "d(dL) = Σ dZ̃ · (A·softmax(Z) - a)·coef, dZ = softmax'(Z)ᵀ (dZ̃ · A · coef · dL)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, g: Any, z: Any) -> Any:
        probs = _ce_base(ctx.attrs["state"].state, ctx.attrs["label_smoothing"])
        probs *= _grad_shape(g, ctx.attrs["reduction"])
        return probs

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        g, z = ctx.saved_inputs
        ca = Tensor._wrap(ctx.attrs["state"].state[3])  # the forward's state: bound by the graph cache
        gz = gg = None
        if ctx.next[1] is not None:
            # the softmax vector-Jacobian product of v = dZ̃ · A · coef · dL
            s = softmax(z, 1)
            v = mul(mul(h, ca), _grad_shape(g, ctx.attrs["reduction"]))
            gz = mul(s, sub(v, _sum(mul(v, s), 1, keepdim=True)))
        if ctx.next[0] is not None:
            # linear in dL: the same op at dL = 1 is (A·softmax(Z) - a)·coef, differentiable in Z in turn
            ones = constant(xp_of(g.data).ones(g.shape, dtype=g.data.dtype))
            base = apply(CrossEntropyGrad, (ones, z), ctx.attrs)
            hb = mul(h, base)
            gg = _sum(hb) if g.ndim == 0 else _sum(hb, 1)
        return gg, gz

    @staticmethod
    def batched(ctx: Any, h: Any) -> tuple:
        g, _ = ctx.saved_inputs
        state = ctx.attrs["state"].state
        xp = xp_of(h)
        gz = gg = None
        if ctx.next[1] is not None:
            s = xp.exp(state[0])
            v = h * (state[3] * _grad_shape(g.data, ctx.attrs["reduction"]))
            gz = s * (v - (v * s).sum(axis=2, keepdims=True))
        if ctx.next[0] is not None:
            hb = h * _ce_base(state, ctx.attrs["label_smoothing"])
            gg = hb.reshape(h.shape[0], -1).sum(axis=1) if g.ndim == 0 else hb.sum(axis=2)
        return gg, gz


class NllLoss(Op):
    name = "nll_loss"
    kind = "loss"
    examples = (Example(lambda x: nll_loss(x, _T3), ((3, 4),)), Example(lambda x: nll_loss(x, _T3, "sum"), ((3, 5),)))
    rule = "dX = -onehot(T) · w[T] · dL / Σw"

    @staticmethod
    def forward(ctx: Any, x: Any, target: Any = None) -> Any:
        t = _target(ctx, target)
        xp = xp_of(x)
        tc, valid, wt, scale, coef = _class_state(ctx, x, t)
        loss = -xp.take_along_axis(x, tc[:, None], axis=1)[:, 0]
        if wt is not None:
            loss *= wt
            coef = coef * wt
        ctx.state = (tc, -coef[:, None], x.shape[1])  # dOut/dX[i, t_i] per row, with the class axis
        return _reduce_rows(loss, valid, scale, ctx.attrs.get("reduction", "mean"), x.dtype)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # One op builds -onehot(T)·coef·dL from the forward's state (a graph-cache replay recomputes it).
        grad = apply(NllLossGrad, (g,), {**ctx.attrs, "state": SavedState(ctx.state)})
        return (grad,) if len(ctx.next) == 1 else (grad, None)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        tc, ncoef, num_classes = ctx.state
        base = _onehot(tc, num_classes, ncoef.dtype) * ncoef
        out = base[None] * _batched_grad_shape(g, ctx.attrs.get("reduction", "mean"), base.ndim)
        return (out,) if len(ctx.next) == 1 else (out, None)


class NllLossGrad(Op):
    """The gradient of nll_loss, -onehot(T)·w[T]·coef·dL (coef: 1/Σw on counted rows for mean, 0 on ignored
    ones). It is linear in dL and its adjoint is nll_loss itself (a gather at the targets, reduced the same
    way)."""

    name = "nll_loss_grad"
    kind = "gradient"
    # linear in dL: the upstream gradient carries s, so checking the derivative in s checks this op's backward
    examples = (Example(lambda x, s: first_grad(lambda a: mul(nll_loss(a, _T3, "none"), s), x), ((3, 4), (3,))),
                Example(lambda x, s: first_grad(lambda a: mul(nll_loss(a, _T3I, weight=_W4), s), x), ((3, 4), ())))
    rule = "d(dL) = nll_loss(dX̃, T)"

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        tc, ncoef, num_classes = ctx.attrs["state"].state
        base = _onehot(tc, num_classes, ncoef.dtype) * ncoef
        base *= _grad_shape(g, ctx.attrs["reduction"])
        return base

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        attrs = {k: v for k, v in ctx.attrs.items() if k != "state"}
        return (apply(NllLoss, (h,), attrs),)

    @staticmethod
    def batched(ctx: Any, h: Any) -> tuple:
        tc, ncoef, _ = ctx.attrs["state"].state
        xp = xp_of(h)
        picked = xp.take_along_axis(h, xp.broadcast_to(tc[None, :, None], (h.shape[0], *ncoef.shape)), axis=2)
        rows = (picked * ncoef[None])[:, :, 0]
        if ctx.attrs["reduction"] == "none":
            return (rows,)
        return (rows.reshape(h.shape[0], -1).sum(axis=1),)


def _class_loss(op: type, name: str, x: Tensor, target: Any, reduction: str, ignore_index: int, weight: Any,
                extra: dict) -> Any:
    _check_float(name, "input", x)
    _check_reduction(name, reduction)
    t = index_array(name, "target", target, x)
    if x.ndim == 1 and t.ndim == 0:
        # one sample without its batch dim ([C] and a 0-d class index), as PyTorch takes it: a batch of one,
        # through recorded ops, so its graph and gradients are the batched ones
        out = _class_loss(op, name, reshape(x, (1, x.shape[0])), t.reshape(1), reduction, ignore_index, weight,
                          extra)
        return reshape(out, ()) if reduction == "none" else out
    _check_target_shape(name, x, t)
    _check_classes(name, t, x.shape[1], ignore_index)
    attrs = {"reduction": reduction, "ignore_index": int(ignore_index), **extra, "target": IndexArg(t)}
    w = _class_weight(name, weight, x, x.shape[1])
    if w is not None:
        attrs["weight"] = w
    return apply(op, (x,), attrs)


def _soft_cross_entropy(logits: Tensor, target: Tensor, reduction: str, label_smoothing: float,
                        weight: Any) -> Any:
    """cross_entropy against class probabilities of the logits' shape, composed of log_softmax, mul and sums."""
    name = "cross_entropy"
    _check_float(name, "input", logits)
    _check_reduction(name, reduction)
    if logits.ndim == 0:
        raise ShapeError(f"{name}: input must have shape [C], [N, C] or [N, C, d1, ...], got {logits.shape}")
    cdim = 1 if logits.ndim >= 2 else 0
    num_classes = logits.shape[cdim]
    logp = log_softmax(logits, cdim)
    q = target
    if label_smoothing:
        q = add_scalar(mul_scalar(target, 1.0 - label_smoothing), label_smoothing / num_classes)
    if weight is not None:
        w = _constant_like(name, "weight", weight, logits)
        if w.shape != (num_classes,):
            raise ShapeError(f"{name}: weight has shape {w.shape} but the input {logits.shape} has {num_classes} "
                             f"classes (expected one weight per class, shape ({num_classes},))")
        q = mul(q, reshape(w, (num_classes,) + (1,) * (logits.ndim - cdim - 1)))
    per_row = neg(_sum(mul(logp, q), cdim))
    return _reduce(per_row, reduction)


def _soft_reference(logits: Tensor, target: Tensor, reduction: str = "mean", label_smoothing: float = 0.0,
                    weight: Any = None) -> Any:
    return cross_entropy(logits, target, reduction, label_smoothing=label_smoothing, weight=weight)


@implements("cross_entropy_soft", call=_soft_reference)
@implements(CrossEntropy)
def cross_entropy(logits: Tensor, target: Any, reduction: str = "mean", ignore_index: int = -100,
                  label_smoothing: float = 0.0, weight: Any = None) -> Any:
    """Softmax cross-entropy of `logits` [N, C] (or [N, C, d1, ...]) against int64 class indices [N]
    ([N, d1, ...]), or against class probabilities: a float target of the logits' shape (differentiated).

    `weight` (C floats: a Tensor, array or list; a constant) weighs each class; with class indices, 'mean'
    divides by the summed weights of the rows whose target is not `ignore_index` (those rows count 0).
    `label_smoothing` mixes the target with the uniform distribution. As PyTorch's F.cross_entropy.

    >>> from rtxviz import Tensor
    >>> round(cross_entropy(Tensor.zeros([1, 4]), Tensor([2])).item(), 4)  # log 4
    1.3863
    >>> round(cross_entropy(Tensor.zeros([2, 4]), Tensor([2, 0]), weight=[1.0, 1.0, 3.0, 1.0]).item(), 4)
    1.3863
    >>> round(cross_entropy(Tensor.zeros([1, 2]), Tensor.from_slice([0.25, 0.75], [1, 2])).item(), 4)  # log 2
    0.6931
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0 and 1, got {label_smoothing}")
    if isinstance(target, Tensor) and is_float(target.data.dtype) and isinstance(logits, Tensor) \
            and target.shape == logits.shape:
        if ignore_index >= 0:
            raise ValueError(f"cross_entropy: ignore_index ({ignore_index}) is not supported for class-probability "
                             "(float) targets")
        return _soft_cross_entropy(logits, target, reduction, float(label_smoothing), weight)
    extra = {"label_smoothing": float(label_smoothing)} if label_smoothing else {}
    return _class_loss(CrossEntropy, "cross_entropy", logits, target, reduction, ignore_index, weight, extra)


@implements(NllLoss)
def nll_loss(log_probs: Tensor, target: Any, reduction: str = "mean", ignore_index: int = -100,
             weight: Any = None) -> Any:
    """Negative log-likelihood of log-probabilities [N, C] (or [N, C, d1, ...], e.g. from log_softmax) at int64
    targets [N] ([N, d1, ...]): -w[t]·input[i, t] per row, as PyTorch's F.nll_loss.

    `weight` (C floats, a constant) weighs each class; 'mean' divides by the summed weights of the rows whose
    target is not `ignore_index`.

    >>> from rtxviz import Tensor
    >>> nll_loss(Tensor.from_slice([-1.0, -2.0], [1, 2]), Tensor([1])).item()
    2.0
    >>> nll_loss(Tensor.from_slice([-1.0, -2.0, -4.0, -3.0], [2, 2]), Tensor([1, 0]), "sum", weight=[0.5, 2.0]).item()
    6.0
    """
    return _class_loss(NllLoss, "nll_loss", log_probs, target, reduction, ignore_index, weight, {})


# -- regression losses --------------------------------------------------------------------------------------------
def _broadcast_check(op: str, a: Tensor, b: Tensor) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise ShapeError(f"{op}: input shape {a.shape} and target shape {b.shape} do not broadcast") from None


class MseLoss(Op):
    name = "mse_loss"
    kind = "loss"
    rule = "dX = 2·(X - T)·dL / N, dT = -dX"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, t: Any) -> Any:
        d = x - t
        d *= d
        red = ctx.attrs["reduction"]
        if red == "none":
            return d
        if red == "sum":
            return d.sum()
        if type(d) is np.ndarray and d.dtype.kind == "f" and d.dtype.itemsize >= 4 and 0 < d.size < 1 << 24:
            # numpy's mean() without its Python wrapper (a few µs, a tenth of a small model's loss): the same
            # pairwise sum, divided by the count, exact in float32 below 2^24, so the same correctly rounded bits
            return d.sum() / d.size
        return d.mean()

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x, t = ctx.saved_inputs
        diff = sub(x, t)
        k = 2.0 / diff.data.size if ctx.attrs["reduction"] == "mean" else 2.0
        gd = mul(diff, mul_scalar(g, k))
        gx = sum_to(gd, x.shape) if ctx.next[0] is not None else None
        gt = sum_to(neg(gd), t.shape) if ctx.next[1] is not None else None
        return gx, gt


@implements(MseLoss)
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Any:
    """Mean (or sum, or per-element) squared error; both arguments are differentiated.

    >>> from rtxviz import Tensor
    >>> mse_loss(Tensor.from_slice([1.0, 3.0], [2]), Tensor.zeros([2])).item()
    5.0
    """
    _check_float("mse_loss", "input", input)
    _check_float("mse_loss", "target", target)
    _check_reduction("mse_loss", reduction)
    _broadcast_check("mse_loss", input, target)
    return apply(MseLoss, (input, target), {"reduction": reduction})


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return _sum(loss)
    return loss


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Any:
    """Mean (or sum, or per-element) absolute error, composed of sub, abs and mean.

    >>> from rtxviz import Tensor
    >>> l1_loss(Tensor.from_slice([1.0, -3.0], [2]), Tensor.zeros([2])).item()
    2.0
    """
    _check_float("l1_loss", "input", input)
    _check_float("l1_loss", "target", target)
    _check_reduction("l1_loss", reduction)
    _broadcast_check("l1_loss", input, target)
    return _reduce(_abs(sub(input, target)), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                          reduction: str = "mean") -> Any:
    """1 - cos(x1, x2) where the target is 1, max(0, cos(x1, x2) - margin) where it is -1, for rows x1, x2 of
    [N, D] (or [D] with a 0-d target); cos = Σ x1·x2 / sqrt((Σ x1² + ε)(Σ x2² + ε)), ε = 1e-12, as PyTorch's
    F.cosine_embedding_loss. Composed of elementwise ops, sums and a `where` on the target (not differentiated).

    >>> from rtxviz import Tensor
    >>> a, b = Tensor.from_slice([1.0, 0.0, 1.0, 1.0], [2, 2]), Tensor.from_slice([0.0, 1.0, 1.0, 1.0], [2, 2])
    >>> [round(v, 4) for v in cosine_embedding_loss(a, b, Tensor([1, -1]), reduction="none").tolist()]
    [1.0, 1.0]
    """
    from .index import compare, where  # the index ops sit beside the losses; imported where used

    op = "cosine_embedding_loss"
    _check_float(op, "input1", input1)
    _check_float(op, "input2", input2)
    _check_reduction(op, reduction)
    if input1.shape != input2.shape or input1.ndim not in (1, 2):
        raise ShapeError(f"{op}: input1 and input2 must both be [N, D] or [D], got {input1.shape} and "
                         f"{input2.shape}")
    t = target if isinstance(target, Tensor) else Tensor(np.asarray(target))
    want = input1.shape[:-1]
    if tuple(t.shape) != tuple(want):
        raise ShapeError(f"{op}: target must have shape {tuple(want)} (one ±1 per row of {input1.shape}), got "
                         f"{tuple(t.shape)}")
    values = t.data
    if values.size and not bool(((values == 1) | (values == -1)).all()):
        found = sorted({float(v) for v in values.reshape(-1)})
        raise ValueError(f"{op}: every target must be 1 or -1, got values {found}")
    eps = 1e-12
    dot = _sum(mul(input1, input2), -1)
    mag = mul(add_scalar(_sum(mul(input1, input1), -1), eps), add_scalar(_sum(mul(input2, input2), -1), eps))
    cos = div(dot, sqrt(mag))
    zero = constant(xp_of(cos.data).zeros(cos.shape, dtype=cos.data.dtype))
    pos = where(compare(t, 1, "__eq__"), rsub_scalar(cos, 1.0), zero)
    negative = where(compare(t, -1, "__eq__"), clamp(add_scalar(cos, -float(margin)), min=0.0), zero)
    return _reduce(_add(pos, negative), reduction)


# -- pointwise losses of an input and a target ------------------------------------------------------------------
def _factor(reduction: str, x_shape: tuple[int, ...], t_shape: tuple[int, ...]) -> float:
    """The factor of each element's loss in the output: 1/numel for mean, 1/N for batchmean, else 1."""
    if reduction == "mean":
        n = math.prod(np.broadcast_shapes(x_shape, t_shape))
        return 1.0 / n if n else math.nan
    if reduction == "batchmean" and x_shape:
        return 1.0 / x_shape[0] if x_shape[0] else math.nan
    return 1.0


def _to_shape(r: Any, full: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    """A gradient term of the broadcast shape `full` (or smaller, broadcasting to it) summed to an input's shape."""
    if r.shape == shape:
        return r
    if r.shape != full:
        r = expand(r, full)
    return sum_to(r, shape)


class _PointwiseLoss(Op):
    """A loss f(X, T) computed element by element on an input and a target that broadcast, then reduced (mean,
    sum or none; kl_div's batchmean). A subclass declares

    - ``pointwise(attrs, x, t)``: the per-element loss on raw arrays, and
    - ``partials(attrs, x, t, need_x, need_t) -> (∂f/∂X, ∂f/∂T)``: in engine ops on the saved Tensors (None for
      one not needed), so that backward records a graph and every higher order is exact;

    this base class builds forward (the reduction), backward (the partials times dL and the reduction's factor,
    summed back to each input's shape) and the batch rule (the partials computed once for every row)."""

    kind = "loss"
    save_inputs = True

    @staticmethod
    def pointwise(attrs: dict, x: Any, t: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def partials(attrs: dict, x: Tensor, t: Tensor, need_x: bool, need_t: bool) -> tuple:  # pragma: no cover
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx: Any, x: Any, t: Any) -> Any:
        loss = cls.pointwise(ctx.attrs, x, t)
        red = ctx.attrs["reduction"]
        if red == "none":
            return loss
        k = _factor(red, x.shape, t.shape)
        total = loss.sum()
        return xp_of(loss).asarray(total if k == 1.0 else total * k, dtype=loss.dtype)

    @classmethod
    def backward(cls, ctx: Any, g: Any) -> tuple:
        x, t = ctx.saved_inputs
        need_x, need_t = ctx.next[0] is not None, ctx.next[1] is not None
        dx, dt = cls.partials(ctx.attrs, x, t, need_x, need_t)
        k = _factor(ctx.attrs["reduction"], x.shape, t.shape)
        gk = g if k == 1.0 else mul_scalar(g, k)
        full = tuple(np.broadcast_shapes(x.shape, t.shape))
        gx = _to_shape(mul(gk, dx), full, x.shape) if need_x else None
        gt = _to_shape(mul(gk, dt), full, t.shape) if need_t else None
        return gx, gt

    @classmethod
    def batched(cls, ctx: Any, g: Any) -> tuple:
        x, t = ctx.saved_inputs
        need_x, need_t = ctx.next[0] is not None, ctx.next[1] is not None
        dx, dt = cls.partials(ctx.attrs, x, t, need_x, need_t)  # grad mode is off: values only
        red = ctx.attrs["reduction"]
        k = _factor(red, x.shape, t.shape)
        full = (g.shape[0], *np.broadcast_shapes(x.shape, t.shape))
        gk = g if k == 1.0 else g * k
        if red != "none":
            gk = gk.reshape((g.shape[0],) + (1,) * (len(full) - 1))
        xp = xp_of(g)

        def term(d: Any, shape: tuple[int, ...]) -> Any:
            return batched_sum_to(xp.broadcast_to(gk * d.data, full), shape)

        return (term(dx, x.shape) if need_x else None, term(dt, t.shape) if need_t else None)


def _pointwise_loss(op: type, name: str, input: Tensor, target: Tensor, reduction: str,
                    attrs: dict, same_shape: bool = False,
                    reductions: tuple[str, ...] = _REDUCTIONS) -> Any:
    _check_float(name, "input", input)
    _check_float(name, "target", target)
    _check_reduction(name, reduction, reductions)
    if same_shape and input.shape != target.shape:
        raise ShapeError(f"{name}: target has shape {target.shape} but input has shape {input.shape} (they must "
                         "be the same)")
    _broadcast_check(name, input, target)
    return apply(op, (input, target), {"reduction": reduction, **attrs})


class BinaryCrossEntropy(_PointwiseLoss):
    """-(T·log X + (1 - T)·log(1 - X)) on probabilities X, each log clamped below at -100 as PyTorch does."""

    name = "binary_cross_entropy"
    rule = "dX = dL · (X - T) / (X·(1 - X)), dT = dL · log((1 - X) / X)"

    @staticmethod
    def pointwise(attrs: dict, x: Any, t: Any) -> Any:
        xp = xp_of(x)
        with np.errstate(divide="ignore"):
            log_x = xp.maximum(xp.log(x), -100.0)
            log_1mx = xp.maximum(xp.log1p(-x), -100.0)
        return (t - 1.0) * log_1mx - t * log_x

    @staticmethod
    def partials(attrs: dict, x: Tensor, t: Tensor, need_x: bool, need_t: bool) -> tuple:
        one_minus = rsub_scalar(x, 1.0)
        # PyTorch's dX divides by max(X·(1 - X), 1e-12); dT is -logit(X)
        dx = div(sub(x, t), clamp(mul(x, one_minus), min=1e-12)) if need_x else None
        dt = sub(log(one_minus), log(x)) if need_t else None
        return dx, dt


def _check_probabilities(op: str, x: Tensor) -> None:
    data = x.data
    bad = ~((data >= 0) & (data <= 1))
    if bool(bad.any()):
        xp = xp_of(data)
        pos = int(xp.argmax(bad.reshape(-1)))
        where = tuple(int(i) for i in xp.unravel_index(pos, data.shape))
        raise ValueError(f"{op}: every element of the input must lie in [0, 1] (probabilities; for logits use "
                         f"binary_cross_entropy_with_logits), got {float(data.reshape(-1)[pos])} at {where}")


@implements(BinaryCrossEntropy)
def binary_cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean",
                         weight: Any = None) -> Any:
    """Binary cross-entropy of probabilities `input` (in [0, 1]) against `target` of the same shape (both
    differentiated): -(t·log x + (1 - t)·log(1 - x)), each log clamped at -100 as PyTorch's
    F.binary_cross_entropy. `weight` (broadcasting to the input, a constant) rescales each element's loss.

    >>> from rtxviz import Tensor
    >>> round(binary_cross_entropy(Tensor.from_slice([0.5, 0.5], [2]), Tensor.ones([2])).item(), 4)  # log 2
    0.6931
    """
    op = "binary_cross_entropy"
    _check_float(op, "input", input)
    _check_probabilities(op, input)
    if weight is None:
        return _pointwise_loss(BinaryCrossEntropy, op, input, target, reduction, {}, same_shape=True)
    _check_reduction(op, reduction)
    loss = _pointwise_loss(BinaryCrossEntropy, op, input, target, "none", {}, same_shape=True)
    return _reduce(mul(loss, _constant_like(op, "weight", weight, input)), reduction)


def _bce_with_logits_reference(input: Tensor, target: Tensor, reduction: str = "mean",
                               pos_weight: Any = None) -> Any:
    return binary_cross_entropy_with_logits(input, target, reduction, pos_weight)


@implements("binary_cross_entropy_with_logits", call=_bce_with_logits_reference)
def binary_cross_entropy_with_logits(logits: Tensor, target: Tensor, reduction: str = "mean",
                                     pos_weight: Any = None, weight: Any = None) -> Any:
    """Sigmoid + binary cross-entropy in one stable expression: softplus(z) - z·y, or with `pos_weight` p,
    (1 - y)·z + (1 + (p - 1)·y)·softplus(-z). Composed of elementwise ops (softplus never overflows); both
    arguments are differentiated. `pos_weight` (a constant: one weight per element of the last dim, broadcast)
    weighs the positive term and `weight` (broadcasting, a constant) each element, as PyTorch's
    F.binary_cross_entropy_with_logits.

    >>> from rtxviz import Tensor
    >>> round(binary_cross_entropy_with_logits(Tensor.zeros([2]), Tensor.ones([2])).item(), 4)  # log 2
    0.6931
    >>> round(binary_cross_entropy_with_logits(Tensor.zeros([2]), Tensor.ones([2]), pos_weight=[2.0]).item(), 4)
    1.3863
    """
    op = "binary_cross_entropy_with_logits"
    _check_float(op, "input", logits)
    _check_float(op, "target", target)
    _check_reduction(op, reduction)
    shape = _broadcast_check(op, logits, target)
    if pos_weight is None:
        loss = sub(softplus(logits), mul(logits, target))
    else:
        pw = _constant_like(op, "pos_weight", pos_weight, logits)
        try:
            np.broadcast_shapes(pw.shape, shape)
        except ValueError:
            raise ShapeError(f"{op}: pos_weight has shape {pw.shape}, which does not broadcast with the input "
                             f"{shape} (one weight per element of the last dim: shape ({shape[-1] if shape else 1},))"
                             ) from None
        factor = add_scalar(mul(sub(pw, 1.0), target), 1.0)
        loss = _add(mul(rsub_scalar(target, 1.0), logits), mul(factor, softplus(neg(logits))))
    if weight is not None:
        loss = mul(loss, _constant_like(op, "weight", weight, logits))
    return _reduce(loss, reduction)


class SmoothL1Loss(_PointwiseLoss):
    """0.5·D²/β where |D| < β, else |D| - 0.5·β (D = X - T)."""

    name = "smooth_l1_loss"
    rule = "dX = dL · clamp(D / β, -1, 1), dT = -dX  (D = X - T)"

    @staticmethod
    def pointwise(attrs: dict, x: Any, t: Any) -> Any:
        beta = attrs["beta"]
        d = x - t
        ad = xp_of(d).abs(d)
        return xp_of(d).where(ad < beta, (0.5 / beta) * d * d, ad - 0.5 * beta)

    @staticmethod
    def partials(attrs: dict, x: Tensor, t: Tensor, need_x: bool, need_t: bool) -> tuple:
        c = clamp(mul_scalar(sub(x, t), 1.0 / attrs["beta"]), -1.0, 1.0)
        return (c if need_x else None), (neg(c) if need_t else None)


@implements(SmoothL1Loss)
def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Any:
    """Smooth L1 loss: 0.5·d²/β where |d| < β, else |d| - 0.5·β (d = input - target; both differentiated);
    β = 0 is the L1 loss, as PyTorch's F.smooth_l1_loss.

    >>> from rtxviz import Tensor
    >>> smooth_l1_loss(Tensor.from_slice([0.5, 3.0], [2]), Tensor.zeros([2]), "none").tolist()
    [0.125, 2.5]
    """
    beta = float(beta)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    if beta == 0.0:
        return l1_loss(input, target, reduction)
    return _pointwise_loss(SmoothL1Loss, "smooth_l1_loss", input, target, reduction, {"beta": beta})


class HuberLoss(_PointwiseLoss):
    """0.5·D² where |D| < δ, else δ·(|D| - 0.5·δ) (D = X - T)."""

    name = "huber_loss"
    rule = "dX = dL · clamp(D, -δ, δ), dT = -dX  (D = X - T)"

    @staticmethod
    def pointwise(attrs: dict, x: Any, t: Any) -> Any:
        delta = attrs["delta"]
        d = x - t
        ad = xp_of(d).abs(d)
        return xp_of(d).where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))

    @staticmethod
    def partials(attrs: dict, x: Tensor, t: Tensor, need_x: bool, need_t: bool) -> tuple:
        delta = attrs["delta"]
        c = clamp(sub(x, t), -delta, delta)
        return (c if need_x else None), (neg(c) if need_t else None)


@implements(HuberLoss)
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Any:
    """Huber loss: 0.5·d² where |d| < δ, else δ·(|d| - 0.5·δ) (d = input - target; both differentiated), as
    PyTorch's F.huber_loss.

    >>> from rtxviz import Tensor
    >>> huber_loss(Tensor.from_slice([0.5, 3.0], [2]), Tensor.zeros([2]), "none", delta=2.0).tolist()
    [0.125, 4.0]
    """
    delta = float(delta)
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    return _pointwise_loss(HuberLoss, "huber_loss", input, target, reduction, {"delta": delta})


class KlDiv(_PointwiseLoss):
    """T·(log T - X) (0 where T = 0), or e^T·(T - X) with log_target: X holds log-probabilities."""

    name = "kl_div"
    rule = "dX = -dL · T, dT = dL · (log T + 1 - X)  (log_target: dX = -dL · e^T, dT = dL · e^T · (T - X + 1))"

    @staticmethod
    def pointwise(attrs: dict, x: Any, t: Any) -> Any:
        xp = xp_of(x)
        if attrs["log_target"]:
            return xp.exp(t) * (t - x)
        with np.errstate(divide="ignore", invalid="ignore"):
            xlogx = xp.where(t == 0, t.dtype.type(0), t * xp.log(t))  # xlogy(t, t): 0 at t = 0, nan below
        return xlogx - t * x

    @staticmethod
    def partials(attrs: dict, x: Tensor, t: Tensor, need_x: bool, need_t: bool) -> tuple:
        if attrs["log_target"]:
            e = exp(t)
            return (neg(e) if need_x else None), (mul(e, add_scalar(sub(t, x), 1.0)) if need_t else None)
        dx = neg(t) if need_x else None
        dt = None
        if need_t:
            with np.errstate(divide="ignore", invalid="ignore"):
                # 0 where T = 0, as PyTorch (a selection: log 0 = -inf there does not leak)
                dt = mask_mul(sub(add_scalar(log(t), 1.0), x), (t,), "sel_nonzero")
        return dx, dt


@implements(KlDiv)
def kl_div(input: Tensor, target: Tensor, reduction: str = "mean", log_target: bool = False) -> Any:
    """Kullback-Leibler divergence of log-probabilities `input` from `target` (probabilities, or
    log-probabilities with `log_target`), pointwise target·(log target - input), as PyTorch's F.kl_div; both
    arguments are differentiated. reduction "batchmean" (the mathematical KL divergence of each row's
    distribution) divides the sum by input.shape[0]; "mean" divides by the number of elements.

    >>> import math
    >>> from rtxviz import Tensor
    >>> p = Tensor.from_slice([0.5, 0.5], [1, 2], dtype="float64")
    >>> q = Tensor.from_slice([math.log(0.25), math.log(0.75)], [1, 2], dtype="float64")
    >>> round(kl_div(q, p, "batchmean").item(), 4)  # 0.5·log 2 + 0.5·log(2/3)
    0.1438
    """
    return _pointwise_loss(KlDiv, "kl_div", input, target, reduction, {"log_target": bool(log_target)},
                           reductions=("batchmean", "sum", "mean", "none"))
