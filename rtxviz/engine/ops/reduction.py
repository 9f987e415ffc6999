"""Reductions: sum, mean, var, logsumexp, max, min (values, gradient to the arg-extreme), argmax, argmin.

Reduced dims arrive normalised (non-negative, sorted as given) in ``attrs["dims"]``; None means every dim.
Backward rules re-insert the reduced dims (`_restore_dims`) so the gradient broadcasts against the input.
"""

from __future__ import annotations

from typing import Any

from ..device import xp_of
from ..dtypes import int64
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, first_grad, implements, norm_dim, norm_dims, tensor_method
from .arithmetic import maximum, minimum, mul, mul_scalar, sub
from .broadcast import batched_expand, expand, sum_to
from .unary import exp, sqrt


def _restore_dims(g: Any, in_shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdim: bool) -> Any:
    """Reshape a reduced gradient so it broadcasts against the input (re-insert the reduced dims)."""
    if keepdim or not in_shape:
        return g
    if axes is None:
        axes = tuple(range(len(in_shape)))
    shape = [1 if i in axes else s for i, s in enumerate(in_shape)]
    return g.reshape(tuple(shape))


def _batched_restore(ctx: Any, g: Any) -> Any:
    """A batch of reduced gradients (B, *reduced) broadcast back to (B, *input shape)."""
    in_shape, dims, keepdim = ctx.state, ctx.attrs["dims"], ctx.attrs["keepdim"]
    if not keepdim and in_shape:
        axes = range(len(in_shape)) if dims is None else dims
        g = g.reshape((g.shape[0], *[1 if i in axes else s for i, s in enumerate(in_shape)]))
    return batched_expand(g, in_shape)


class Sum(Op):
    name = "sum"
    kind = "reduction"
    rule = "dX = expand(dY, shape(X))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.sum(axis=ctx.attrs["dims"], keepdims=ctx.attrs["keepdim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        in_shape = ctx.state
        g = _restore_dims(g, in_shape, ctx.attrs["dims"], ctx.attrs["keepdim"])
        return (expand(g, in_shape),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (_batched_restore(ctx, g),)


_ALL_DIMS = {"dims": None, "keepdim": False}


@tensor_method("sum")
@implements(Sum, rename={"dims": "dim"})
def sum(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Sum over `dim` (an int, a list of ints, or None for all).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([2, 3]).sum(dim=1).tolist()
    [3.0, 3.0]
    """
    if dim is None and not keepdim:
        return apply(Sum, (x,), _ALL_DIMS)
    return apply(Sum, (x,), {"dims": _dims("sum", dim, x.ndim), "keepdim": bool(keepdim)})


class Mean(Op):
    name = "mean"
    kind = "reduction"
    rule = "dX = expand(dY, shape(X)) / N"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.mean(axis=ctx.attrs["dims"], keepdims=ctx.attrs["keepdim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        in_shape = ctx.state
        dims = ctx.attrs["dims"]
        count = 1
        for i, s in enumerate(in_shape):
            if dims is None or i in dims:
                count *= s
        g = _restore_dims(g, in_shape, dims, ctx.attrs["keepdim"])
        return (expand(g.mul_scalar(1.0 / count), in_shape),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (_batched_restore(ctx, g * (1.0 / _count(ctx.state, ctx.attrs["dims"]))),)


@tensor_method("mean")
@implements(Mean, rename={"dims": "dim"})
def mean(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Mean over `dim` (an int, a list of ints, or None for all)."""
    return apply(Mean, (x,), {"dims": _dims("mean", dim, x.ndim), "keepdim": bool(keepdim)})


def _dims(op: str, dim: Any, ndim: int) -> tuple[int, ...] | None:
    """Checked dims; on a 0-d tensor a valid dim (0 or -1) means "all", as numpy has no axis 0 there."""
    dims = norm_dims(op, dim, ndim)
    return None if ndim == 0 else dims


def _count(in_shape: tuple[int, ...], dims: tuple[int, ...] | None) -> int:
    n = 1
    for i, s in enumerate(in_shape):
        if dims is None or i in dims:
            n *= s
    return n


# -- var ---------------------------------------------------------------------------------------------------
class Var(Op):
    name = "var"
    kind = "reduction"
    rule = "dX = dY · 2(X − mean(X)) / (N − correction)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        a = ctx.attrs
        ctx.state = x.shape
        n = _count(x.shape, a["dims"])
        if n - a["correction"] <= 0:
            # PyTorch divides by max(0, N - correction): nan (0/0) or inf, quietly; numpy would warn.
            xp = xp_of(x)
            ssq = ((x - x.mean(axis=a["dims"], keepdims=True)) ** 2).sum(axis=a["dims"], keepdims=a["keepdim"])
            with _quiet(xp):
                return ssq / 0
        return x.var(axis=a["dims"], ddof=a["correction"], keepdims=a["keepdim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        a = ctx.attrs
        in_shape = ctx.state
        denom = _count(in_shape, a["dims"]) - a["correction"]
        scale = 2.0 / denom if denom > 0 else float("nan")
        centred = sub(x, apply(Mean, (x,), {"dims": a["dims"], "keepdim": True}))
        g = _restore_dims(g, in_shape, a["dims"], a["keepdim"])
        return (mul(mul_scalar(centred, scale), g),)


@tensor_method("var")
@implements(Var, rename={"dims": "dim"})
def var(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | None = None) -> Any:
    """Variance over `dim` with Bessel's `correction` (1 by default, as PyTorch; `unbiased=False` is 0).

    >>> from rtxviz import Tensor
    >>> round(Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [4]).var().item(), 4)
    1.6667
    """
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif unbiased is not None:
        raise ValueError("var: give either unbiased or correction, not both")
    return apply(Var, (x,), {"dims": _dims("var", dim, x.ndim), "keepdim": bool(keepdim),
                             "correction": int(correction)})


@tensor_method("std")
def std(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | None = None) -> Any:
    """Standard deviation: sqrt(var) (recorded as var then sqrt)."""
    return sqrt(var(x, dim, unbiased, keepdim, correction=correction))


# -- logsumexp ---------------------------------------------------------------------------------------------
class LogSumExp(Op):
    name = "logsumexp"
    kind = "reduction"
    rule = "dX = dY · exp(X − Y)  (= dY · softmax(X))"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
        ctx.state = x.shape
        if x.size == 0:
            m = xp.zeros((1,) * x.ndim if dims is None else
                         tuple(1 if i in dims else s for i, s in enumerate(x.shape)), dtype=x.dtype)
        else:
            # Shift by the max so exp never overflows; an infinite max (all -inf, or +inf) shifts by 0.
            m = x.max(axis=dims, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0).astype(x.dtype, copy=False)
        with _quiet(xp):
            out = xp.log(xp.exp(x - m).sum(axis=dims, keepdims=True)) + m
        if not keepdim:
            out = out.reshape(_reduced_shape(x.shape, dims))
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        in_shape, dims, keepdim = ctx.state, ctx.attrs["dims"], ctx.attrs["keepdim"]
        y = _restore_dims(ctx.output, in_shape, dims, keepdim)
        g = _restore_dims(g, in_shape, dims, keepdim)
        return (mul(g, exp(sub(x, y))),)


class _NoErrState:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _quiet(xp: Any) -> Any:
    """numpy warns on log(0) and 0/0; the -inf / nan it returns is the right answer here."""
    return xp.errstate(divide="ignore", invalid="ignore") if xp.__name__ == "numpy" else _NoErrState()


def _reduced_shape(shape: tuple[int, ...], dims: tuple[int, ...] | None) -> tuple[int, ...]:
    if dims is None:
        return ()
    return tuple(s for i, s in enumerate(shape) if i not in dims)


@tensor_method("logsumexp")
@implements(LogSumExp, rename={"dims": "dim"})
def logsumexp(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """log(sum(exp(x))) over `dim`, computed without overflow.

    >>> from rtxviz import Tensor
    >>> round(Tensor.from_slice([1000.0, 1000.0], [2]).logsumexp(0).item(), 3)
    1000.693
    """
    return apply(LogSumExp, (x,), {"dims": _dims("logsumexp", dim, x.ndim), "keepdim": bool(keepdim)})


# -- max / min ---------------------------------------------------------------------------------------------
class _Extreme(Op):
    """max/min values over one dim (the gradient goes to the first arg-extreme element, as PyTorch's
    max(dim)) or over everything (dim None: the gradient is split evenly among tied extremes, as max())."""

    kind = "reduction"
    keeps_finite = True
    save_inputs = True
    save_output = True
    _reduce = "max"
    _arg = "argmax"

    @classmethod
    def forward(cls, ctx: Any, x: Any) -> Any:
        dim = ctx.attrs["dim"]
        if x.size == 0:
            raise ShapeError(f"{cls.name}: cannot reduce an empty tensor of shape {x.shape} (no identity)")
        return getattr(x, cls._reduce)(axis=dim, keepdims=ctx.attrs["keepdim"])

    @classmethod
    def backward(cls, ctx: Any, g: Any) -> tuple:
        # The arg-extreme weights are built by the extreme_grad op from X and Y (not as a raw array here), so a
        # graph-cache replay recomputes them from the new values.
        xd = ctx.saved_inputs[0].data
        dim, keepdim = ctx.attrs["dim"], ctx.attrs["keepdim"]
        g = _restore_dims(g, xd.shape, None if dim is None else (dim,), keepdim)
        attrs = {"kind": cls._reduce, "dim": dim}
        return (apply(ExtremeGrad, (g, Tensor._wrap(xd), Tensor._wrap(ctx.out_data)), attrs),)


class ExtremeGrad(Op):
    """dY · w(X, Y): the gradient of max/min routed to the arg-extreme (over one dim: the first one; over
    everything: split evenly among ties). The weights w are piecewise constant in X, so the derivative in X and
    Y is zero; in dY it is this same weighting, summed back to dY's shape."""

    name = "extreme_grad"
    kind = "gradient"
    rule = "dG = Σ dZ · w(X), dX = 0  (w: 1 at the arg-extreme, ties split over everything)"
    save_inputs = True
    # the upstream gradient carries s, so the derivative in s checks this op's backward
    examples = (Example(lambda x, s: first_grad(lambda a: mul(max(a, 1), s), x), ((3, 4), (3,))),
                Example(lambda x, s: first_grad(lambda a: mul(min(a), s), x), ((2, 3), ())))

    @staticmethod
    def forward(ctx: Any, g: Any, x: Any, y: Any) -> Any:
        xp = xp_of(x)
        dim = ctx.attrs["dim"]
        if dim is None:
            hit = x == y.reshape((1,) * x.ndim)
            weight = hit.astype(x.dtype)
            weight /= x.dtype.type(hit.sum())  # in x's dtype: 1/count is exact for the usual tie counts
        else:
            idx = getattr(x, "argmax" if ctx.attrs["kind"] == "max" else "argmin")(axis=dim)
            idx = xp.expand_dims(idx, dim)
            pos = xp.arange(x.shape[dim]).reshape((-1,) + (1,) * (x.ndim - dim - 1))
            weight = (pos == idx).astype(x.dtype)
        ctx.state = weight  # for this op's own backward (create_graph): the weights it applied
        return g * weight

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        g = ctx.saved_inputs[0]
        gg = sum_to(mul(h, Tensor._wrap(ctx.state)), g.shape) if ctx.next[0] is not None else None
        return gg, None, None


class Max(_Extreme):
    name = "max"
    rule = "dX = dY at the position of the max (0 elsewhere)"


class Min(_Extreme):
    name = "min"
    rule = "dX = dY at the position of the min (0 elsewhere)"
    _reduce = "min"
    _arg = "argmin"


def _extreme(op: type, x: Any, dim: Any, keepdim: bool) -> Any:
    if dim is not None:
        dim = norm_dim(op.name, dim, x.ndim)  # any integral (numpy.int64 too); raises TypeError otherwise
        if x.ndim == 0:
            dim = None
    return apply(op, (x,), {"dim": dim, "keepdim": bool(keepdim)})


def _values(result: Any) -> Any:
    return result[0] if isinstance(result, tuple) else result


@tensor_method("max")
@implements(Max, call=lambda x, dim=None, keepdim=False: _values(max(x, dim, keepdim)))
def max(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The largest value over `dim` (values only), or over everything when dim is None.

    `x.max(other_tensor)` is the elementwise `maximum`, as in PyTorch.

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([1.0, 5.0, 2.0, 0.0], [2, 2]).max(dim=1).tolist()
    [5.0, 2.0]
    """
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    return _extreme(Max, x, dim, keepdim)


@tensor_method("min")
@implements(Min, call=lambda x, dim=None, keepdim=False: _values(min(x, dim, keepdim)))
def min(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The smallest value over `dim` (values only), or over everything when dim is None."""
    if isinstance(dim, Tensor):
        return minimum(x, dim)
    return _extreme(Min, x, dim, keepdim)


def _arg_extreme(name: str, x: Any, dim: Any, keepdim: bool) -> Tensor:
    data = x.data
    if data.size == 0:
        raise ShapeError(f"{name}: cannot take the {name} of an empty tensor of shape {x.shape}")
    if data.dtype.kind == "b":
        raise DTypeError(f"{name}: not defined for bool tensors")
    if dim is None or data.ndim == 0:
        if dim is not None:
            norm_dim(name, dim, data.ndim)
        out = getattr(data, name)()
        if keepdim:
            out = out.reshape((1,) * data.ndim)
    else:
        d = norm_dim(name, dim, data.ndim)
        out = getattr(data, name)(axis=d)
        if keepdim:
            out = xp_of(data).expand_dims(out, d)
    xp = xp_of(data)
    return Tensor._wrap(xp.asarray(out).astype(int64, copy=False))


@tensor_method("argmax")
def argmax(x: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the (first) largest value over `dim`, or into the flattened tensor; an int64 Tensor with
    no gradient.

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([1.0, 5.0, 7.0, 0.0], [2, 2]).argmax(dim=1).tolist()
    [1, 0]
    """
    return _arg_extreme("argmax", x, dim, keepdim)


@tensor_method("argmin")
def argmin(x: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the (first) smallest value over `dim`, or into the flattened tensor; int64, no gradient."""
    return _arg_extreme("argmin", x, dim, keepdim)
