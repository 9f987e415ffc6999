"""Scans: cumulative ops along one dim, cumsum, cumprod and logcumsumexp (torch's, same names and dims).

Each op takes ``attrs["dim"]`` normalised (non-negative); cumsum and logcumsumexp also take ``reverse`` (a scan
from the end of the dim), which their backward rules use: the gradient of a scan is the reverse scan of the
gradient. A 0-d tensor is a line of one element.
"""

from __future__ import annotations

from typing import Any

from ..device import xp_of
from ..errors import DTypeError
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import implements, norm_dim, tensor_method
from .arithmetic import add, div, mul, neg, sub
from .convert import to_device_dtype
from .shape import compare, where
from .unary import exp, log


def _scan(a: Any, d: int, reverse: bool, line: Any) -> Any:
    """`line(a, d)` (a scan along axis d of a raw array) from the start of the dim, or from its end."""
    if a.ndim == d:  # a 0-d tensor (or a batch of them): a line of one element
        return _scan(a[..., None], d, reverse, line)[..., 0]
    if not reverse:
        return line(a, d)
    xp = xp_of(a)
    return xp.flip(line(xp.flip(a, axis=d), d), axis=d)


def _cumsum_line(a: Any, d: int) -> Any:
    return a.cumsum(axis=d)


def _cumprod_line(a: Any, d: int) -> Any:
    return a.cumprod(axis=d)


def _logcumsumexp_line(a: Any, d: int) -> Any:
    """log(cumsum(exp(a))) along d by log-add-exp steps, so no element under- or overflows: numpy's sequential
    logaddexp.accumulate, elsewhere (cupy has no logaddexp.accumulate) a log2(n)-step Hillis-Steele scan."""
    xp = xp_of(a)
    with _quiet(xp):
        if xp.__name__ == "numpy":
            return xp.logaddexp.accumulate(a, axis=d)
        out = a.copy()
        n, step = a.shape[d], 1
        lead = (slice(None),) * d
        while step < n:
            # the right side is computed whole before the write, so reading the old values is safe
            out[lead + (slice(step, None),)] = xp.logaddexp(out[lead + (slice(step, None),)],
                                                            out[lead + (slice(None, n - step),)])
            step *= 2
        return out


class _NoErrState:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _quiet(xp: Any) -> Any:
    """numpy warns on -inf - -inf in logaddexp; the nan it returns is the answer."""
    return xp.errstate(invalid="ignore", over="ignore") if xp.__name__ == "numpy" else _NoErrState()


def _scan_attrs(name: str, x: Any, dim: Any, **more: Any) -> dict:
    return {"dim": norm_dim(name, dim, x.ndim), **more}


# -- cumsum ------------------------------------------------------------------------------------------------
class Cumsum(Op):
    name = "cumsum"
    kind = "scan"
    rule = "dX = reverse cumsum of dY along dim (dXᵢ = Σ_{k ≥ i} dYₖ)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return _scan(x, ctx.attrs["dim"], ctx.attrs["reverse"], _cumsum_line)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (_cumsum(g, ctx.attrs["dim"], not ctx.attrs["reverse"]),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (_scan(g, ctx.attrs["dim"] + 1, not ctx.attrs["reverse"], _cumsum_line),)


def _cumsum(x: Any, dim: int, reverse: bool) -> Any:
    return apply(Cumsum, (x,), {"dim": dim, "reverse": reverse})


@tensor_method("cumsum")
@implements(Cumsum)
def cumsum(x: Any, dim: int, *, dtype: Any = None) -> Any:
    """The cumulative sum along `dim`, as torch.cumsum (`dtype`: cast first).

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2]).cumsum(dim=1).tolist()
    [[1.0, 3.0], [3.0, 7.0]]
    """
    if dtype is not None:
        x = to_device_dtype(x, None, dtype)
    return apply(Cumsum, (x,), _scan_attrs("cumsum", x, dim, reverse=False))


# -- cumprod -----------------------------------------------------------------------------------------------
class Cumprod(Op):
    """The cumulative product. Its gradient, Σ_{k ≥ i} dYₖ · Yₖ / Xᵢ, is computed without 0 / 0: Yₖ is 0 from a
    line's first zero on, so every factor but that first zero gets the quotient with X's zeros replaced by 1,
    and the first zero gets Σ_{k ≥ i} dYₖ · Y'ₖ, Y' the cumprod with that zero replaced by 1. The zero masks
    are kept by forward."""

    name = "cumprod"
    kind = "scan"
    rule = "dX = reverse cumsum(dY · Y) / X along dim  (zeros: from the nonzero factors)"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        d = ctx.attrs["dim"]
        zero = x == 0
        first = zero & (_scan(zero, d, False, _cumsum_line) == 1)  # the first zero of each line
        ctx.state = (zero.astype(x.dtype), first.astype(x.dtype))
        return _scan(x, d, False, _cumprod_line)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        y = ctx.output
        zero, first = (Tensor._wrap(s) for s in ctx.state)
        d = ctx.attrs["dim"]
        below = div(_cumsum(mul(g, y), d, True), add(x, zero))  # every factor but a first zero: X's zeros as 1
        y1 = apply(Cumprod, (add(x, first),), ctx.attrs)  # Y with the first zero of each line as 1
        at_zero = mul(_cumsum(mul(g, y1), d, True), first)  # the first zero's (below is 0 there: Y is 0)
        return (add(below, at_zero),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0].data
        zero, first = ctx.state
        d = ctx.attrs["dim"]
        below = _scan(g * ctx.out_data, d + 1, True, _cumsum_line) / (x + zero)
        y1 = _scan(x + first, d, False, _cumprod_line)
        return (below + _scan(g * y1, d + 1, True, _cumsum_line) * first,)


@tensor_method("cumprod")
@implements(Cumprod)
def cumprod(x: Any, dim: int, *, dtype: Any = None) -> Any:
    """The cumulative product along `dim`, as torch.cumprod (`dtype`: cast first).

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2]).cumprod(dim=0).tolist()
    [[1.0, 2.0], [3.0, 8.0]]
    """
    if dtype is not None:
        x = to_device_dtype(x, None, dtype)
    return apply(Cumprod, (x,), _scan_attrs("cumprod", x, dim))


# -- logcumsumexp ------------------------------------------------------------------------------------------
class LogCumSumExp(Op):
    """log Σ_{j ≤ k} exp(Xⱼ), computed by log-add-exp steps (no overflow, no underflow to -inf). Its gradient
    Σ_{k ≥ i} dYₖ · exp(Xᵢ − Yₖ) is computed in log space too, as PyTorch's: exp(X + reverse
    logcumsumexp(log dY⁺ − Y)) − the same for dY⁻, so no exp(−Y) overflows."""

    name = "logcumsumexp"
    kind = "scan"
    rule = "dXᵢ = Σ_{k ≥ i} dYₖ · exp(Xᵢ − Yₖ)  (in log space, for dY > 0 and dY < 0 apart)"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return _scan(x, ctx.attrs["dim"], ctx.attrs["reverse"], _logcumsumexp_line)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        y = ctx.output
        attrs = {"dim": ctx.attrs["dim"], "reverse": not ctx.attrs["reverse"]}
        # log 0 as a huge finite negative value, not -inf (as PyTorch's lowest): a reverse scan of -inf - Y could
        # give -inf, and its own backward (second order) then -inf - -inf = nan, which would swamp Y's other
        # gradients. A 16th of the lowest: sums of a few such terms in higher orders stay finite (no overflow).
        lowest = float(xp_of(g.data).finfo(g.data.dtype).min) / 16

        def part(sign_name: str, magnitude: Any) -> Any:
            # exp(X + rev-logcumsumexp(log |dY| − Y)) over the positions where dY has this sign (log 0 elsewhere)
            sel = compare(g, 0.0, sign_name)
            log_g = where(sel, log(where(sel, magnitude, 1.0)), lowest)
            return exp(add(apply(LogCumSumExp, (sub(log_g, y),), attrs), x))

        return (sub(part("__gt__", g), part("__lt__", neg(g))),)


@tensor_method("logcumsumexp")
@implements(LogCumSumExp)
def logcumsumexp(x: Any, dim: int) -> Any:
    """log(cumsum(exp(x))) along `dim`, as torch.logcumsumexp, without overflow.

    >>> from rtxviz import Tensor
    >>> [round(v, 3) for v in Tensor.from_slice([1000.0, 1000.0, -1000.0], [3]).logcumsumexp(0).tolist()]
    [1000.0, 1000.693, 1000.693]
    """
    if x.dtype.kind != "f":
        raise DTypeError(f"logcumsumexp: expected a floating-point tensor, got dtype {x.dtype}")
    return apply(LogCumSumExp, (x,), _scan_attrs("logcumsumexp", x, dim, reverse=False))
