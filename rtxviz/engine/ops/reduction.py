"""Reductions: sum, mean, var, logsumexp, max, min (values, gradient to the arg-extreme), argmax, argmin.

Reduced dims arrive normalised (non-negative, sorted as given) in ``attrs["dims"]``; None means every dim.
Backward rules re-insert the reduced dims (`_restore_dims`) so the gradient broadcasts against the input.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from ...accel import sum_rows as _sum_rows  # None: numpy's add.reduce
from ..device import xp_of
from ..dtypes import int64
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, first_grad, implements, norm_dim, norm_dims, tensor_method
from .arithmetic import add, div, mask_mul, maximum, minimum, mul, mul_scalar, pow_scalar, sub
from .broadcast import batched_expand, expand, expand_to, sum_to
from .index import compare
from .unary import abs as _abs
from .unary import exp


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
        if type(x) is np.ndarray:  # what ndarray.sum calls, without numpy's Python wrapper in between
            attrs = ctx.attrs
            if _sum_rows is not None and x.ndim == 2 and attrs["dims"] == (0,) and not attrs["keepdim"] \
                    and x.shape[1] > 1:
                # a bias gradient: the rows added in numpy's order for this layout, in one compiled call (it
                # declines one column, where numpy sums pairwise, and other formats and layouts)
                return _bias_grad(x)
            return _add_reduce(x, attrs["dims"], keepdims=attrs["keepdim"])
        return x.sum(axis=ctx.attrs["dims"], keepdims=ctx.attrs["keepdim"])

    @staticmethod
    def specialize(attrs: Any, x: Any) -> Any:
        if type(x) is not np.ndarray:
            return None
        dims, keepdim = attrs["dims"], attrs["keepdim"]
        if _sum_rows is not None and x.ndim == 2 and dims == (0,) and not keepdim and x.shape[1] > 1:
            return _bias_grad
        return functools.partial(_add_reduce, axis=dims, keepdims=keepdim)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        in_shape = ctx.state
        attrs = ctx.attrs
        if attrs["dims"] is not None or attrs["keepdim"]:
            g = _restore_dims(g, in_shape, attrs["dims"], attrs["keepdim"])
        # else the gradient of a sum over everything is 0-d and broadcasts to the input's shape as it is: one op
        # (expand) instead of a reshape to all-ones dims and an expand
        return (expand_to(g, in_shape),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (_batched_restore(ctx, g),)


_ALL_DIMS = {"dims": None, "keepdim": False}
_add_reduce = np.add.reduce


def _bias_grad(x: Any) -> Any:
    """The rows of a 2-D numpy array (two columns or more) added by the compiled kernel, else by numpy."""
    out = np.empty(x.shape[1], x.dtype)
    if _sum_rows(x, out):  # callers test that the kernel is built
        return out
    return _add_reduce(x, (0,), keepdims=False)


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
        return (expand_to(g.mul_scalar(1.0 / count), in_shape),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (_batched_restore(ctx, g * (1.0 / _count(ctx.state, ctx.attrs["dims"]))),)


@tensor_method("mean")
@implements(Mean, rename={"dims": "dim"})
def mean(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Mean over `dim` (an int, a list of ints, or None for all). Of a float tensor only, as PyTorch's: the mean
    of int64 or bool values has no dtype to infer (numpy would answer float64, unasked); `.float()` first."""
    dtype = x.data.dtype if isinstance(x, Tensor) else None
    if dtype is not None and dtype.kind not in "fc":
        raise DTypeError(f"mean: the input must be a float tensor, got {dtype} (shape {x.shape}); convert it first, "
                         "e.g. x.float().mean()")
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


class Std(Op):
    """The standard deviation sqrt(var): one op, so that its gradient is 0 (not 0 · ∞) where the deviation is 0,
    as PyTorch's."""

    name = "std"
    kind = "reduction"
    rule = "dX = dY · (X − mean(X)) / ((N − correction) · Y)  (0 where Y = 0)"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        a = ctx.attrs
        if _count(x.shape, a["dims"]) - a["correction"] <= 0:
            xp = xp_of(x)
            ssq = ((x - x.mean(axis=a["dims"], keepdims=True)) ** 2).sum(axis=a["dims"], keepdims=a["keepdim"])
            with _quiet(xp):
                out = xp.sqrt(ssq / 0)  # nan (0/0) or inf, as PyTorch
        else:
            out = x.std(axis=a["dims"], ddof=a["correction"], keepdims=a["keepdim"])
        ctx.state = (x.shape, _zeros_of(out, x.shape, a["dims"], a["keepdim"]))
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        a = ctx.attrs
        (in_shape, y_zero), dims, keepdim = ctx.state, a["dims"], a["keepdim"]
        y = _restore_dims(ctx.output, in_shape, dims, keepdim)
        g = _restore_dims(g, in_shape, dims, keepdim)
        centred = sub(x, apply(Mean, (x,), {"dims": dims, "keepdim": True}))
        # divided by Y with its zeros as 1 (no divide-by-zero warning), then 0 there
        scale = mask_mul(div(mul_scalar(g, _std_scale(ctx)), add(y, Tensor._wrap(y_zero))), (y,), "sel_nonzero")
        return (mul(centred, scale),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0].data
        a = ctx.attrs
        xp = xp_of(x)
        y = _restore_dims(ctx.out_data, x.shape, a["dims"], a["keepdim"])
        centred = x - x.mean(axis=a["dims"], keepdims=True)
        g = _batched_reshape(ctx, g, x.shape)
        scale = xp.where(y != 0, (g * _std_scale(ctx)) / (y + ctx.state[1]), x.dtype.type(0))
        return (centred * scale,)


def _std_scale(ctx: Any) -> float:
    denom = _count(ctx.state[0], ctx.attrs["dims"]) - ctx.attrs["correction"]
    return 1.0 / denom if denom > 0 else float("nan")


def _zeros_of(out: Any, in_shape: tuple[int, ...], dims: tuple[int, ...] | None, keepdim: bool) -> Any:
    """[Y = 0] in Y's dtype, shaped to broadcast against the input (the reduced dims kept as 1): a rule divides
    by Y + [Y = 0], so that no 0 is divided by, and then selects 0 there."""
    return _restore_dims(out == 0, in_shape, dims, keepdim).astype(out.dtype)


def _batched_reshape(ctx: Any, g: Any, in_shape: tuple[int, ...]) -> Any:
    """A batch of reduced gradients (B, *reduced) reshaped to broadcast against (B, *input shape)."""
    dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
    if keepdim or not in_shape:
        return g
    axes = range(len(in_shape)) if dims is None else dims
    return g.reshape((g.shape[0], *[1 if i in axes else s for i, s in enumerate(in_shape)]))


@tensor_method("std")
@implements(Std, rename={"dims": "dim"})
def std(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | None = None) -> Any:
    """Standard deviation over `dim` with Bessel's `correction` (1 by default, as PyTorch; `unbiased=False` is 0).

    >>> from rtxviz import Tensor
    >>> round(Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [4]).std().item(), 4)
    1.291
    >>> Tensor.from_slice([1.0, 3.0, 2.0, 2.0], [2, 2]).std(dim=1, correction=0).tolist()
    [1.0, 0.0]
    """
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif unbiased is not None:
        raise ValueError("std: give either unbiased or correction, not both")
    return apply(Std, (x,), {"dims": _dims("std", dim, x.ndim), "keepdim": bool(keepdim),
                             "correction": int(correction)})


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


# -- prod --------------------------------------------------------------------------------------------------
class Prod(Op):
    """The product over dims. Its gradient, the product of the other factors, is Y / X where no factor of the
    group is 0; where one is, it comes from the product of the nonzero factors (no 0 / 0): that factor gets it,
    the others 0, and every factor of a group with two zeros gets 0. The zero masks are kept by forward."""

    name = "prod"
    kind = "reduction"
    rule = "dX = dY · Π(the other factors) = dY · Y / X  (a group with zeros: from its nonzero factors)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
        zero = x == 0
        zeros = zero.sum(axis=dims, keepdims=True)
        # the factors whose gradient is not 0: all when the group has no zero, only the zero when it has one
        gets = (zeros == 0) | ((zeros == 1) & zero)
        ctx.state = (x.shape, zero.astype(x.dtype), gets.astype(x.dtype))
        return x.prod(axis=dims, keepdims=keepdim)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        in_shape, zero, gets = ctx.state
        dims = ctx.attrs["dims"]
        g = _restore_dims(g, in_shape, dims, ctx.attrs["keepdim"])
        safe = add(x, Tensor._wrap(zero))  # X with its zeros replaced by 1
        others = div(apply(Prod, (safe,), {"dims": dims, "keepdim": True}), safe)
        return (mul(mul(g, Tensor._wrap(gets)), others),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0].data
        in_shape, zero, gets = ctx.state
        safe = x + zero
        others = safe.prod(axis=ctx.attrs["dims"], keepdims=True) / safe
        return ((_batched_reshape(ctx, g, in_shape) * gets) * others,)


@tensor_method("prod")
@implements(Prod, rename={"dims": "dim"})
def prod(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The product over `dim` (an int, a list of ints, or None for all), as torch.prod.

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2]).prod(dim=1).tolist()
    [2.0, 12.0]
    """
    return apply(Prod, (x,), {"dims": _dims("prod", dim, x.ndim), "keepdim": bool(keepdim)})


# -- amax / amin -------------------------------------------------------------------------------------------
class TiesGrad(Op):
    """dY · w(X, Y), w = [X = Y] / (the number of ties in X's reduced group): the gradient of amax, amin and the
    inf-norms (with |X|), split evenly among tied extremes as PyTorch's amax. Built by this op from X and Y (not
    as a raw array in a rule) so that a graph-cache replay recomputes it; w is piecewise constant in X and Y, so
    the derivative in them is zero, and in dY it is this same weighting summed back to dY's shape."""

    name = "ties_grad"
    kind = "gradient"
    rule = "dG = Σ dZ · w(X, Y), dX = dY = 0  (w = [X = Y] / the number of ties of the group)"
    # the upstream gradient carries s, so the derivative in s checks this op's backward
    examples = (Example(lambda x, s: first_grad(lambda a: mul(amax(a, 1), s), x), ((3, 4), (3,))),
                Example(lambda x, s: first_grad(lambda a: mul(amin(a, (0, 2), keepdim=True), s), x),
                        ((2, 3, 4), (1, 3, 1))),
                Example(lambda x, s: first_grad(lambda a: mul(vector_norm(a, "inf", -1), s), x), ((2, 5), (2,))))

    @staticmethod
    def forward(ctx: Any, g: Any, x: Any, y: Any) -> Any:
        weight = _ties_weight(x, y, ctx.attrs["dims"], ctx.attrs["abs"])
        ctx.state = (weight, g.shape)  # for this op's own backward (create_graph): the weights it applied
        return g * weight

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        weight, g_shape = ctx.state
        gg = sum_to(mul(h, Tensor._wrap(weight)), g_shape) if ctx.next[0] is not None else None
        return gg, None, None


def _ties_weight(x: Any, y: Any, dims: tuple[int, ...] | None, absolute: bool) -> Any:
    """[X = Y] / the number of ties of X's group, in X's dtype (|X| for the inf-norms)."""
    hit = (xp_of(x).abs(x) if absolute else x) == y
    with _quiet(xp_of(x)):  # a group holding a nan has no hit: 0/0, a nan gradient as PyTorch's
        return hit.astype(x.dtype) / hit.sum(axis=dims, keepdims=True).astype(x.dtype)


def _ties_grad(g: Any, x: Any, y: Any, dims: tuple[int, ...] | None, absolute: bool = False) -> Any:
    """The gradient dY of an extreme Y (both of X's rank) split among X's tied extremes (by TiesGrad)."""
    return apply(TiesGrad, (g, Tensor._wrap(x.data), Tensor._wrap(y.data)), {"dims": dims, "abs": absolute})


class _AExtreme(Op):
    """amax/amin over dims (every dim when None); the gradient is split evenly among tied extremes."""

    kind = "reduction"
    keeps_finite = True
    save_inputs = True
    save_output = True
    _reduce = "max"

    @classmethod
    def forward(cls, ctx: Any, x: Any) -> Any:
        dims = ctx.attrs["dims"]
        if _count(x.shape, dims) == 0:
            raise ShapeError(f"{cls.name}: cannot reduce over an empty dim of a tensor of shape {x.shape} "
                             f"(dim {None if dims is None else list(dims)}; the reduction has no identity)")
        return getattr(x, cls._reduce)(axis=dims, keepdims=ctx.attrs["keepdim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
        y = _restore_dims(ctx.output, x.shape, dims, keepdim)
        return (_ties_grad(_restore_dims(g, x.shape, dims, keepdim), x, y, dims),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0].data
        dims = ctx.attrs["dims"]
        y = _restore_dims(ctx.out_data, x.shape, dims, ctx.attrs["keepdim"])
        return (_batched_reshape(ctx, g, x.shape) * _ties_weight(x, y, dims, False),)


class Amax(_AExtreme):
    name = "amax"
    rule = "dX = dY at the max, split evenly among ties (0 elsewhere)"


class Amin(_AExtreme):
    name = "amin"
    rule = "dX = dY at the min, split evenly among ties (0 elsewhere)"
    _reduce = "min"


def _amdims(name: str, dim: Any, ndim: int) -> tuple[int, ...] | None:
    """amax/amin's dims: as PyTorch, an empty list means every dim."""
    if isinstance(dim, list | tuple) and len(dim) == 0:
        dim = None
    return _dims(name, dim, ndim)


@tensor_method("amax")
@implements(Amax, rename={"dims": "dim"})
def amax(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The largest value over `dim` (an int, a list of ints; None or [] for all), as torch.amax: the gradient is
    split evenly among tied maxima.

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([1.0, 5.0, 2.0, 0.0], [2, 2]).amax(dim=1).tolist()
    [5.0, 2.0]
    """
    return apply(Amax, (x,), {"dims": _amdims("amax", dim, x.ndim), "keepdim": bool(keepdim)})


@tensor_method("amin")
@implements(Amin, rename={"dims": "dim"})
def amin(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The smallest value over `dim` (an int, a list of ints; None or [] for all), as torch.amin: the gradient
    is split evenly among tied minima.

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([1.0, 5.0, 2.0, 0.0], [2, 2]).amin(dim=0).tolist()
    [1.0, 0.0]
    """
    return apply(Amin, (x,), {"dims": _amdims("amin", dim, x.ndim), "keepdim": bool(keepdim)})


# -- norm --------------------------------------------------------------------------------------------------
class Norm(Op):
    """The vector p-norm over dims, torch.linalg.vector_norm: (Σ|X|^p)^(1/p), max |X| for p = inf, min |X| for
    -inf, the number of nonzeros for p = 0. Its gradient is 0 where the norm is 0, as PyTorch's."""

    name = "norm"
    kind = "reduction"
    rule = "dX = dY · sign(X) · |X|^(p−1) / Y^(p−1)  (p = 2: dY · X / Y; inf: dY · sign(X) at the max |X|)"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        p, dims, keepdim = ctx.attrs["p"], ctx.attrs["dims"], ctx.attrs["keepdim"]
        if p == 2:
            out = xp.sqrt((x * x).sum(axis=dims, keepdims=keepdim))
            ctx.state = (_zeros_of(out, x.shape, dims, keepdim), None)
            return out
        a = xp.abs(x)
        if p == 1:
            return a.sum(axis=dims, keepdims=keepdim)
        if math.isinf(p):
            if _count(x.shape, dims) == 0:
                raise ShapeError(f"norm: the {p}-norm over an empty dim of a tensor of shape {x.shape} is not "
                                 f"defined (dim {None if dims is None else list(dims)})")
            return (a.max if p > 0 else a.min)(axis=dims, keepdims=keepdim)
        if p == 0:
            return (x != 0).sum(axis=dims, keepdims=keepdim).astype(x.dtype)
        with _quiet(xp):  # a negative p at a zero: inf, then 0, as PyTorch
            out = (a**p).sum(axis=dims, keepdims=keepdim) ** (1.0 / p)
        # what the rule divides by, with its zeros as 1 (no divide-by-zero warnings): Y, and |X| when p < 1
        ctx.state = (_zeros_of(out, x.shape, dims, keepdim), (x == 0).astype(x.dtype) if p < 1 else None)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        p, dims, keepdim = ctx.attrs["p"], ctx.attrs["dims"], ctx.attrs["keepdim"]
        y = _restore_dims(ctx.output, x.shape, dims, keepdim)
        g = _restore_dims(g, x.shape, dims, keepdim)
        if p == 2:
            return (mul(x, mask_mul(div(g, add(y, Tensor._wrap(ctx.state[0]))), (y,), "sel_nonzero")),)
        if p == 1:  # mask_mul wants dY of X's shape (its own backward does not sum a broadcast back)
            return (mask_mul(expand(g, x.shape), (x,), "sign"),)
        if math.isinf(p):
            return (mask_mul(_ties_grad(g, x, y, dims, absolute=True), (x,), "sign"),)
        if p == 0:
            return (mul_scalar(x, 0.0),)
        y_zero, x_zero = ctx.state
        scale = mask_mul(div(g, pow_scalar(add(y, Tensor._wrap(y_zero)), p - 1)), (y,), "sel_nonzero")
        if p < 1:  # |X|^(p-1) is inf at a zero, where the gradient is 0 (as PyTorch's)
            power = mask_mul(pow_scalar(add(_abs(x), Tensor._wrap(x_zero)), p - 1), (x,), "sel_nonzero")
        else:
            power = pow_scalar(_abs(x), p - 1)
        return (mask_mul(mul(power, scale), (x,), "sign"),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0].data
        xp = xp_of(x)
        zero = x.dtype.type(0)
        p, dims = ctx.attrs["p"], ctx.attrs["dims"]
        y = _restore_dims(ctx.out_data, x.shape, dims, ctx.attrs["keepdim"])
        g = _batched_reshape(ctx, g, x.shape)
        if p == 2:
            return (x * xp.where(y != 0, g / (y + ctx.state[0]), zero),)
        if p == 1:
            return (g * xp.sign(x),)
        if math.isinf(p):
            return ((g * _ties_weight(x, y, dims, True)) * xp.sign(x),)
        if p == 0:
            return (xp.broadcast_to(x * 0.0, (g.shape[0], *x.shape)),)
        y_zero, x_zero = ctx.state
        scale = xp.where(y != 0, g / (y + y_zero) ** (p - 1), zero)
        if p < 1:
            power = xp.where(x != 0, (xp.abs(x) + x_zero) ** (p - 1), zero)
        else:
            power = xp.abs(x) ** (p - 1)
        return ((power * scale) * xp.sign(x),)


def _norm_order(name: str, p: Any, dims: tuple[int, ...] | None) -> float:
    if isinstance(p, str):
        text = p.strip().lower()
        if text in ("inf", "+inf", "-inf"):
            return -math.inf if text[0] == "-" else math.inf
        if text == "fro" and (dims is None or len(dims) <= 2):
            return 2.0  # over one or two dims the Frobenius norm is the 2-norm of the entries
        raise ValueError(f"{name}: p must be a number, 'inf', '-inf' or 'fro' (over at most 2 dims), got {p!r}")
    if isinstance(p, bool) or not isinstance(p, int | float | np.number):
        raise TypeError(f"{name}: p must be a number or 'inf', got {p!r} ({type(p).__name__})")
    value = float(p)
    if math.isnan(value):
        raise ValueError(f"{name}: p must not be nan")
    return value


@implements(Norm, call=lambda x, p=2.0, dims=None, keepdim=False: vector_norm(x, p, dims, keepdim))
def vector_norm(x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False) -> Any:
    """The vector `ord`-norm over `dim` (an int, a list of ints, or None for every element), as
    torch.linalg.vector_norm: (Σ|x|^ord)^(1/ord); ord may be inf ("inf"), -inf or 0 (the count of nonzeros).

    >>> from rtxviz import Tensor
    >>> vector_norm(Tensor.from_slice([3.0, -4.0], [2])).item()
    5.0
    >>> vector_norm(Tensor.from_slice([3.0, -4.0, 1.0, 0.0], [2, 2]), "inf", dim=1).tolist()
    [4.0, 1.0]
    """
    dims = _dims("norm", dim, x.ndim)
    if x.dtype.kind != "f":
        raise DTypeError(f"norm: expected a floating-point tensor, got dtype {x.dtype}")
    return apply(Norm, (x,), {"p": _norm_order("norm", ord, dims), "dims": dims, "keepdim": bool(keepdim)})


@tensor_method("norm")
def norm(x: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False) -> Any:
    """The `p`-norm of `x` over `dim` (every element when None), as Tensor.norm: "fro" (the default) is the
    2-norm of the entries; p may be a number, "inf" or "-inf" (see `vector_norm`).

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([3.0, -4.0, 1.0, 0.0], [2, 2]).norm(p=1, dim=1).tolist()
    [7.0, 1.0]
    """
    return vector_norm(x, p, dim, keepdim)


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
    examples = (Example(lambda x, s: first_grad(lambda a: mul(max(a, 1).values, s), x), ((3, 4), (3,))),
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


def _extreme(op: type[Op], x: Any, dim: Any, keepdim: bool) -> Any:
    if dim is not None:
        dim = norm_dim(op.name, dim, x.ndim)  # any integral (numpy.int64 too); raises TypeError otherwise
        if x.ndim == 0:
            dim = None
    return apply(op, (x,), {"dim": dim, "keepdim": bool(keepdim)})


def _values(result: Any) -> Any:
    return result[0] if isinstance(result, tuple) else result


class MinMax(NamedTuple):
    """What max/min over a dim return, as PyTorch's torch.return_types.max: ``values, indices = x.max(1)``."""

    values: Any
    indices: Any


@tensor_method("max")
@implements(Max, call=lambda x, dim=None, keepdim=False: _values(max(x, dim, keepdim)))
def max(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The largest value: over everything (a 0-d tensor) when dim is None, else over `dim` as the pair
    ``(values, indices)`` (`MinMax`), as in PyTorch. `x.max(other_tensor)` is the elementwise `maximum`.

    >>> from rtxviz import Tensor
    >>> values, indices = Tensor.from_slice([1.0, 5.0, 2.0, 0.0], [2, 2]).max(dim=1)
    >>> values.tolist(), indices.tolist()
    ([5.0, 2.0], [1, 0])
    """
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    values = _extreme(Max, x, dim, keepdim)
    return values if dim is None else MinMax(values, argmax(x, dim, keepdim))


@tensor_method("min")
@implements(Min, call=lambda x, dim=None, keepdim=False: _values(min(x, dim, keepdim)))
def min(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """The smallest value: over everything when dim is None, else ``(values, indices)`` over `dim`."""
    if isinstance(dim, Tensor):
        return minimum(x, dim)
    values = _extreme(Min, x, dim, keepdim)
    return values if dim is None else MinMax(values, argmin(x, dim, keepdim))


class ArgExtreme(Op):
    """The position of the largest (argmax) or smallest (argmin) value: an int64 result, no gradient. An op (as
    comparisons are), so that a graph-cache replay recomputes it from the new values."""

    name = "arg_extreme"
    kind = "index"
    differentiable = False
    rule = "no gradient (an index)"
    examples = (Example(lambda x: argmax(x, 1), ((3, 4),)), Example(lambda x: argmin(x, None, True), ((2, 3),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        a = ctx.attrs
        out = getattr(x, a["which"])(axis=a["dim"])
        if a["keepdim"]:
            out = out.reshape((1,) * x.ndim) if a["dim"] is None else xp_of(x).expand_dims(out, a["dim"])
        return xp_of(x).asarray(out).astype(int64, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:  # pragma: no cover - never recorded: its input is a plain Tensor
        return (None,)


def _arg_extreme(name: str, x: Any, dim: Any, keepdim: bool) -> Tensor:
    data = x.data
    if data.size == 0:
        raise ShapeError(f"{name}: cannot take the {name} of an empty tensor of shape {x.shape}")
    if data.dtype.kind == "b":
        raise DTypeError(f"{name}: not defined for bool tensors")
    d = None
    if dim is not None:
        d = norm_dim(name, dim, data.ndim)
        if data.ndim == 0:
            d = None
    return apply(ArgExtreme, (Tensor._wrap(data),), {"which": name, "dim": d, "keepdim": bool(keepdim)})


@tensor_method("argmax")
@implements(ArgExtreme, reference=None)
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


@tensor_method("count_nonzero")
def count_nonzero(x: Any, dim: Any = None) -> Tensor:
    """How many elements of `x` (along `dim`: an int, a sequence of ints or None for all) are nonzero: int64, no
    gradient (torch.count_nonzero).

    >>> from rtxviz import Tensor
    >>> count_nonzero(Tensor.from_slice([0.0, 1.0, 2.0, 0.0], [2, 2]), dim=0).tolist()
    [1, 1]
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"count_nonzero: expected a Tensor, got {type(x).__name__}")
    mask = x if x.dtype == np.bool_ else compare(x, 0, "__ne__")  # by an op: a graph-cache replay recomputes it
    return sum(mask, dim=dim)
