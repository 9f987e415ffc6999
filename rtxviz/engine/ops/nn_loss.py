"""Losses: mse_loss, cross_entropy and nll_loss (single ops with their own rules), l1_loss and
binary_cross_entropy_with_logits (composed of elementwise ops, so every derivative comes from those).

Class targets are int64 index tensors. They ride in the op's attrs (as an `IndexArg`) rather than as a
second input, because every tensor input of an op shares one dtype; the forward also accepts them as a
second array input, the layout of the reference files (`args: [logits, target]`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..device import xp_of
from ..dtypes import int64, is_float
from ..errors import DeviceError, DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, constant, first_grad, implements
from .arithmetic import add as _add
from .arithmetic import mul, mul_scalar, neg, rsub_scalar, sub
from .broadcast import sum_to
from .nn_norm import softmax
from .reduction import mean
from .reduction import sum as _sum
from .unary import abs as _abs
from .unary import softplus

_REDUCTIONS = ("mean", "sum", "none")
_T3 = Tensor(np.array([2, 0, 3]))  # class targets of the examples below


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


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


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
        raise ShapeError(f"{op}: input must have shape [N, C] or [N, C, d1, ...], got {logits.shape}")
    want = (logits.shape[0],) + tuple(logits.shape[2:])
    if tuple(t.shape) != want:
        raise ShapeError(f"{op}: target has shape {tuple(t.shape)} but input {logits.shape} needs a target of "
                         f"shape {want} (one class index per row)")


def _target(ctx: Any, target: Any) -> Any:
    return ctx.attrs["target"].array if target is None else target


def _class_state(ctx: Any, x: Any, t: Any) -> tuple[Any, Any, Any]:
    """Per-row validity (ignore_index), the target with ignored rows at class 0, and 1/count or 1."""
    ii = ctx.attrs.get("ignore_index", -100)
    valid = t != ii
    tc = t if bool(valid.all()) else xp_of(t).where(valid, t, 0)
    validf = valid.astype(x.dtype)
    if ctx.attrs.get("reduction", "mean") == "mean":
        count = validf.sum()
        scale = (1.0 / count) if count > 0 else float("nan")  # torch: mean over no rows is nan
    else:
        scale = 1.0
    return tc, validf, scale


def _onehot(tc: Any, num_classes: int, dtype: Any) -> Any:
    xp = xp_of(tc)
    shape = (1, num_classes) + (1,) * (tc.ndim - 1)
    return (xp.arange(num_classes).reshape(shape) == tc[:, None]).astype(dtype)


def _reduce_rows(loss: Any, validf: Any, scale: Any, reduction: str, dtype: Any) -> Any:
    if reduction == "none":
        return (loss * validf).astype(dtype, copy=False)
    total = (loss * validf).sum()
    return xp_of(loss).asarray(total * scale, dtype=dtype)


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


class CrossEntropy(Op):
    name = "cross_entropy"
    kind = "loss"
    rule = "dZ = (softmax(Z) - onehot(T)) · dL / N"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, z: Any, target: Any = None) -> Any:
        t = _target(ctx, target)
        xp = xp_of(z)
        num_classes = z.shape[1]
        logp = z - z.max(axis=1, keepdims=True)
        logp -= xp.log(xp.exp(logp).sum(axis=1, keepdims=True))
        tc, validf, scale = _class_state(ctx, z, t)
        loss = -xp.take_along_axis(logp, tc[:, None], axis=1)[:, 0]
        eps = ctx.attrs.get("label_smoothing", 0.0)
        if eps:
            loss = (1.0 - eps) * loss - (eps / num_classes) * logp.sum(axis=1)
        coef = (validf * scale).astype(z.dtype, copy=False)[:, None]  # per row: 1/N for valid rows, else 0
        ctx.state = (logp, tc, coef)
        return _reduce_rows(loss, validf, scale, ctx.attrs.get("reduction", "mean"), z.dtype)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # One op computes (softmax(Z) - q)·coef·dL from the forward's log-probabilities (no raw array built
        # here, so a graph-cache replay recomputes it); its own backward makes every higher order exact.
        attrs = {"state": SavedState(ctx.state), "reduction": ctx.attrs.get("reduction", "mean"),
                 "label_smoothing": ctx.attrs.get("label_smoothing", 0.0)}
        grad = apply(CrossEntropyGrad, (g, ctx.saved_inputs[0]), attrs)
        return (grad,) if len(ctx.next) == 1 else (grad, None)


class CrossEntropyGrad(Op):
    """The gradient of cross_entropy in its logits, (softmax(Z) - q)·coef·dL, with q the (smoothed) one-hot target
    and coef the per-row 1/N (0 on ignored rows). Inputs (dL, Z); first order reads the forward's log-probabilities
    from attrs["state"], so it costs one pass over [N, C] (exp, subtract at the targets, scale)."""

    name = "cross_entropy_grad"
    kind = "gradient"
    examples = (
        Example(lambda z: first_grad(lambda a: cross_entropy(a, _T3), z), ((3, 4),)),
        Example(lambda z: first_grad(lambda a: cross_entropy(a, _T3, "none", label_smoothing=0.2), z), ((3, 4),)),
    )
    rule = "d(dL) = Σ dZ̃ · (softmax(Z) - q)·coef, dZ = softmax'(Z)ᵀ (dZ̃ · coef · dL)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, g: Any, z: Any) -> Any:
        logp, tc, coef = ctx.attrs["state"].state
        xp = xp_of(logp)
        num_classes = logp.shape[1]
        eps = ctx.attrs["label_smoothing"]
        probs = xp.exp(logp)
        if logp.ndim == 2:
            probs[xp.arange(logp.shape[0]), tc] -= 1.0 - eps
        else:
            probs -= _onehot(tc, num_classes, logp.dtype) * (1.0 - eps)
        if eps:
            probs -= eps / num_classes
        probs *= coef
        probs *= _grad_shape(g, ctx.attrs["reduction"])
        return probs

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        g, z = ctx.saved_inputs
        coef = Tensor._wrap(ctx.attrs["state"].state[2])  # the forward's state: bound by the graph cache
        gz = gg = None
        if ctx.next[1] is not None:
            # the softmax vector-Jacobian product of v = dZ̃ · coef · dL
            s = softmax(z, 1)
            v = mul(mul(h, coef), _grad_shape(g, ctx.attrs["reduction"]))
            gz = mul(s, sub(v, _sum(mul(v, s), 1, keepdim=True)))
        if ctx.next[0] is not None:
            # linear in dL: the same op at dL = 1 is (softmax(Z) - q)·coef, differentiable in Z in turn
            ones = constant(xp_of(g.data).ones(g.shape, dtype=g.data.dtype))
            base = apply(CrossEntropyGrad, (ones, z), ctx.attrs)
            hb = mul(h, base)
            gg = _sum(hb) if g.ndim == 0 else _sum(hb, 1)
        return gg, gz


class NllLoss(Op):
    name = "nll_loss"
    kind = "loss"
    examples = (Example(lambda x: nll_loss(x, _T3), ((3, 4),)), Example(lambda x: nll_loss(x, _T3, "sum"), ((3, 5),)))
    rule = "dX = -onehot(T) · dL / N"

    @staticmethod
    def forward(ctx: Any, x: Any, target: Any = None) -> Any:
        t = _target(ctx, target)
        xp = xp_of(x)
        tc, validf, scale = _class_state(ctx, x, t)
        loss = -xp.take_along_axis(x, tc[:, None], axis=1)[:, 0]
        ctx.state = (tc, validf, scale, x.shape[1], x.dtype, t)
        return _reduce_rows(loss, validf, scale, ctx.attrs.get("reduction", "mean"), x.dtype)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # One op builds -onehot(T)·coef·dL from the forward's state (a graph-cache replay recomputes it).
        attrs = {"state": SavedState(ctx.state), "reduction": ctx.attrs.get("reduction", "mean"),
                 "ignore_index": ctx.attrs.get("ignore_index", -100)}
        grad = apply(NllLossGrad, (g,), attrs)
        return (grad,) if len(ctx.next) == 1 else (grad, None)


class NllLossGrad(Op):
    """The gradient of nll_loss, -onehot(T)·coef·dL (coef: 1/N on valid rows, 0 on ignored ones). It is linear in
    dL and its adjoint is nll_loss itself (a gather at the targets, reduced the same way)."""

    name = "nll_loss_grad"
    kind = "gradient"
    # linear in dL: the upstream gradient carries s, so checking the derivative in s checks this op's backward
    examples = (Example(lambda x, s: first_grad(lambda a: mul(nll_loss(a, _T3, "none"), s), x), ((3, 4), (3,))),)
    rule = "d(dL) = nll_loss(dX̃, T)"

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        tc, validf, scale, num_classes, dtype, _ = ctx.attrs["state"].state
        coef = (validf * (-scale)).astype(dtype, copy=False)[:, None]
        base = _onehot(tc, num_classes, dtype) * coef
        base *= _grad_shape(g, ctx.attrs["reduction"])
        return base

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        a = ctx.attrs
        t = a["state"].state[5]
        return (apply(NllLoss, (h,), {"reduction": a["reduction"], "ignore_index": a["ignore_index"],
                                      "target": IndexArg(t)}),)


def _class_loss(op: type, name: str, x: Tensor, target: Any, reduction: str, ignore_index: int,
                extra: dict) -> Any:
    _check_float(name, "input", x)
    _check_reduction(name, reduction)
    t = index_array(name, "target", target, x)
    _check_target_shape(name, x, t)
    _check_classes(name, t, x.shape[1], ignore_index)
    attrs = {"reduction": reduction, "ignore_index": int(ignore_index), **extra, "target": IndexArg(t)}
    return apply(op, (x,), attrs)


@implements(CrossEntropy)
def cross_entropy(logits: Tensor, target: Any, reduction: str = "mean", ignore_index: int = -100,
                  label_smoothing: float = 0.0) -> Any:
    """Softmax cross-entropy of `logits` [N, C] (or [N, C, d1, ...]) against int64 class indices [N] ([N, d1, ...]).

    `reduction` 'mean' averages over rows whose target is not `ignore_index`; `label_smoothing` mixes the
    one-hot target with the uniform distribution, as PyTorch does.

    >>> from rtxviz import Tensor
    >>> round(cross_entropy(Tensor.zeros([1, 4]), Tensor([2])).item(), 4)  # log 4
    1.3863
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0 and 1, got {label_smoothing}")
    extra = {"label_smoothing": float(label_smoothing)} if label_smoothing else {}
    return _class_loss(CrossEntropy, "cross_entropy", logits, target, reduction, ignore_index, extra)


@implements(NllLoss, reference=None)
def nll_loss(log_probs: Tensor, target: Any, reduction: str = "mean", ignore_index: int = -100) -> Any:
    """Negative log-likelihood of log-probabilities [N, C] (e.g. from log_softmax) at int64 targets [N].

    >>> from rtxviz import Tensor
    >>> nll_loss(Tensor.from_slice([-1.0, -2.0], [1, 2]), Tensor([1])).item()
    2.0
    """
    return _class_loss(NllLoss, "nll_loss", log_probs, target, reduction, ignore_index, {})


# -- regression losses --------------------------------------------------------------------------------------------
def _broadcast_check(op: str, a: Tensor, b: Tensor) -> None:
    try:
        np.broadcast_shapes(a.shape, b.shape)
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
        return d.mean() if red == "mean" else d.sum()

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


def binary_cross_entropy_with_logits(logits: Tensor, target: Tensor, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Any:
    """Sigmoid + binary cross-entropy in one stable expression: softplus(z) - z·y, or with `pos_weight` p,
    (1 - y)·z + (1 + (p - 1)·y)·softplus(-z). Composed of elementwise ops (softplus never overflows).

    >>> from rtxviz import Tensor
    >>> round(binary_cross_entropy_with_logits(Tensor.zeros([2]), Tensor.ones([2])).item(), 4)  # log 2
    0.6931
    """
    op = "binary_cross_entropy_with_logits"
    _check_float(op, "input", logits)
    _check_float(op, "target", target)
    _check_reduction(op, reduction)
    _broadcast_check(op, logits, target)
    if pos_weight is None:
        loss = sub(softplus(logits), mul(logits, target))
    else:
        _check_float(op, "pos_weight", pos_weight)
        weight = _add(mul(sub(pos_weight, 1.0), target), 1.0)
        loss = _add(mul(rsub_scalar(target, 1.0), logits), mul(weight, softplus(neg(logits))))
    return _reduce(loss, reduction)
