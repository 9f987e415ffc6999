"""Broadcasting arithmetic (add, sub, mul, div, pow, maximum, minimum, atan2, hypot, xlogy, floor_divide, remainder,
fmod), the tensor-scalar forms, and mask_mul, the op that backward rules multiply by a piecewise-constant mask with.

Each class is one op, its public function right after it. The broadcasting ones declare `compute` and `grads`
(`BroadcastBinary` sums their gradients back to each input's shape).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..device import xp_of
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Elementwise, Example, binary, floating, implements, tensor_method, unary
from .broadcast import BroadcastBinary

_SCALARS = (int, float)


def _is_scalar(v: Any) -> bool:
    return type(v) in _SCALARS


def _with_number(x: Tensor, value: Any) -> Tensor:
    """`x` ready to meet the Python number `value`: an int64 or bool tensor meeting a float becomes the default float
    dtype first, as torch's ``int_tensor + 1.5`` is float32 (numpy would give float64)."""
    if value.__class__ is float and x.data.dtype.kind != "f":
        return floating(x)
    return x


class Add(BroadcastBinary):
    name = "add"
    rule = "dA = dC, dB = dC (summed over broadcast dims)"
    compute = staticmethod(operator.add)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        return g, g


@tensor_method("add")
@implements(Add)
def add(a: Any, b: Any, alpha: Any = 1) -> Any:
    """a + alpha·b with broadcasting (a Python number b records `add_scalar`; `alpha` as PyTorch's).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([2]).add(1.0).tolist(), Tensor.ones([2]).add(Tensor.ones([2]), alpha=3).tolist()
    ([2.0, 2.0], [4.0, 4.0])
    """
    if alpha != 1:
        b = b * alpha if _is_scalar(b) else mul(b, alpha)
    if _is_scalar(b) and isinstance(a, Tensor):
        return apply(AddScalar, (_with_number(a, b),), {"value": b})
    return binary(Add, a, b)


class Sub(BroadcastBinary):
    name = "sub"
    rule = "dA = dC, dB = -dC"
    compute = staticmethod(operator.sub)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        return (g if ctx.next[0] is not None else None, neg(g) if ctx.next[1] is not None else None)


@tensor_method("sub", "subtract")
@implements(Sub)
def sub(a: Any, b: Any, alpha: Any = 1) -> Any:
    """a - alpha·b with broadcasting (`alpha` as PyTorch's)."""
    if alpha != 1:
        b = b * alpha if _is_scalar(b) else mul(b, alpha)
    if _is_scalar(b) and isinstance(a, Tensor):
        return apply(AddScalar, (_with_number(a, b),), {"value": -b})
    if _is_scalar(a) and isinstance(b, Tensor):
        return apply(RSubScalar, (_with_number(b, a),), {"value": a})
    return binary(Sub, a, b)


class Mul(BroadcastBinary):
    name = "mul"
    rule = "dA = dC · B, dB = dC · A"
    save_inputs = True
    compute = staticmethod(operator.mul)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        return (mul(g, b) if ctx.next[0] is not None else None, mul(g, a) if ctx.next[1] is not None else None)


@tensor_method("mul", "multiply")
@implements(Mul)
def mul(a: Any, b: Any) -> Any:
    """a * b with broadcasting."""
    if _is_scalar(b) and isinstance(a, Tensor):
        return apply(MulScalar, (_with_number(a, b),), {"value": b})
    return binary(Mul, a, b)


class Div(BroadcastBinary):
    name = "div"
    floating = True  # int64 / int64 is float32, as torch's true division
    rule = "dA = dC / B, dB = -dC · A / B²"
    save_inputs = True
    compute = staticmethod(operator.truediv)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        ga = div(g, b) if ctx.next[0] is not None else None
        gb = neg(div(mul(g, a), mul(b, b))) if ctx.next[1] is not None else None
        return ga, gb


@tensor_method("div", "divide")
@implements(Div)
def div(a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
    """a / b with broadcasting; `rounding_mode` "trunc" or "floor" rounds the quotient (toward 0, toward -inf)
    as torch.div's, with zero gradients.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([7.0, -7.0], [2])
    >>> x.div(2).tolist(), x.div(2, rounding_mode="trunc").tolist(), x.div(2, rounding_mode="floor").tolist()
    ([3.5, -3.5], [3.0, -3.0], [3.0, -4.0])
    """
    if rounding_mode is not None:
        if rounding_mode == "floor":
            return floor_divide(a, b)
        if rounding_mode == "trunc":
            return trunc_divide(a, b)
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    return true_divide(a, b)


@tensor_method("true_divide", "__truediv__")
def true_divide(a: Any, b: Any) -> Any:
    """a / b with broadcasting (Python's /, torch.true_divide): `div` without its rounding_mode, whose keyword the
    in-place ``/=`` does not take (Python's operators need the two signatures to agree)."""
    if _is_scalar(b) and isinstance(a, Tensor):
        return apply(MulScalar, (floating(a),), {"value": 1.0 / b})  # true division: an int64 tensor's is float
    return binary(Div, a, b)


class Pow(BroadcastBinary):
    name = "pow"
    rule = "dA = dC · B · A^(B-1), dB = dC · A^B · ln A"
    save_inputs = True
    save_output = True
    compute = staticmethod(operator.pow)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        # As PyTorch: where B == 0 the dA term is 0 (not 0 · A^-1 = nan at A = 0), and where A == 0 and B >= 0
        # the dB term is 0 (not 0 · ln 0 = nan, or 1 · ln 0 = -inf). The masks are selections made by the
        # mask_mul op from A and B, so they survive nan/inf factors, create_graph and graph-cache replays.
        # `a.log()` is the log op attached to Tensor by ops/unary.py (which imports this module).
        a, b = ctx.saved_inputs
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore"):  # the 0^-1, ln 0 and 0·inf masked away below
            if ctx.next[0] is not None:
                ga = mask_mul(mul(g, mul(b, pow(a, add_scalar(b, -1.0)))), (b,), "sel_nonzero")
            if ctx.next[1] is not None:
                gb = mask_mul(mul(g, mul(ctx.output, a.log())), (a, b), "sel_pow_exponent")
        return ga, gb


@tensor_method("pow")
@implements(Pow)
def pow(a: Any, b: Any) -> Any:
    """a ** b: a scalar exponent records `pow_scalar`, a tensor exponent `pow`."""
    if _is_scalar(b) and isinstance(a, Tensor):
        return apply(PowScalar, (_with_number(a, b),), {"exponent": b})
    if _is_scalar(a) and isinstance(b, Tensor):
        return rpow_scalar(_with_number(b, a), a)
    return binary(Pow, a, b)


class _Extremum(BroadcastBinary):
    """maximum/minimum: the gradient goes to the chosen input; ties split it half and half (as PyTorch)."""

    save_inputs = True
    keeps_finite = True
    _mask_kinds = ("", "")

    @classmethod
    def grads(cls, ctx: Any, g: Any) -> tuple:
        # The 0 / ½ / 1 weights are computed by the mask_mul op from A and B (not as a raw array here), so a
        # graph-cache replay recomputes them from the new values.
        a, b = ctx.saved_inputs
        kind = cls._mask_kinds
        return (mask_mul(g, (a, b), kind[0]) if ctx.next[0] is not None else None,
                mask_mul(g, (a, b), kind[1]) if ctx.next[1] is not None else None)


class Maximum(_Extremum):
    name = "maximum"
    rule = "dA = dC · [A > B], dB = dC · [B > A] (ties split)"
    _mask_kinds = ("max_a", "max_b")

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        return xp_of(a).maximum(a, b)


@tensor_method("maximum")
@implements(Maximum)
def maximum(a: Any, b: Any) -> Any:
    """The elementwise maximum, with broadcasting."""
    return binary(Maximum, a, b)


class Minimum(_Extremum):
    name = "minimum"
    rule = "dA = dC · [A < B], dB = dC · [B < A] (ties split)"
    _mask_kinds = ("min_a", "min_b")

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        return xp_of(a).minimum(a, b)


@tensor_method("minimum")
@implements(Minimum)
def minimum(a: Any, b: Any) -> Any:
    """The elementwise minimum, with broadcasting."""
    return binary(Minimum, a, b)


class Atan2(BroadcastBinary):
    """atan2(a, b): the angle of the point (b, a), in (-π, π]."""

    name = "atan2"
    floating = True
    rule = "dA = dC · B / (A² + B²), dB = -dC · A / (A² + B²)"
    save_inputs = True

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        return xp_of(a).arctan2(a, b)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        r = add(mul(a, a), mul(b, b))
        ga = div(mul(g, b), r) if ctx.next[0] is not None else None
        gb = neg(div(mul(g, a), r)) if ctx.next[1] is not None else None
        return ga, gb


@tensor_method("atan2", "arctan2")
@implements(Atan2)
def atan2(a: Any, b: Any) -> Any:
    """The elementwise angle of the point (b, a), with broadcasting (torch.atan2).

    >>> from rtxviz import Tensor
    >>> round(atan2(Tensor.from_slice([1.0], [1]), Tensor.from_slice([-1.0], [1])).item(), 4)  # 3π/4
    2.3562
    """
    return binary(Atan2, a, b)


class Hypot(BroadcastBinary):
    """hypot(a, b) = √(a² + b²), computed without overflow in the squares."""

    name = "hypot"
    floating = True
    rule = "dA = dC · A / C, dB = dC · B / C"
    save_inputs = True
    save_output = True

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        return xp_of(a).hypot(a, b)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        c = ctx.output
        ga = div(mul(g, a), c) if ctx.next[0] is not None else None
        gb = div(mul(g, b), c) if ctx.next[1] is not None else None
        return ga, gb


@tensor_method("hypot")
@implements(Hypot)
def hypot(a: Any, b: Any) -> Any:
    """The elementwise length √(a² + b²) of the point (a, b), with broadcasting (torch.hypot).

    >>> from rtxviz import Tensor
    >>> hypot(Tensor.from_slice([3.0, 6.0], [2]), Tensor.from_slice([4.0, 8.0], [2])).tolist()
    [5.0, 10.0]
    """
    return binary(Hypot, a, b)


class Xlogy(BroadcastBinary):
    """xlogy(a, b) = a · log b, and 0 where a = 0 (unless b is nan), as torch.xlogy."""

    name = "xlogy"
    floating = True
    rule = "dA = dC · log B (0 where A = 0 and B ≤ 0), dB = dC · A / B"
    save_inputs = True

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        xp = xp_of(a)
        with np.errstate(divide="ignore", invalid="ignore"):  # log of b <= 0 where a = 0: replaced by 0 below
            out = a * xp.log(b)
        return xp.where((a == 0) & ~xp.isnan(b), out.dtype.type(0), out)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        # As PyTorch: dA = xlogy(dC, B), set to 0 where A = 0 and B <= 0 (a selection by the mask_mul op, so it
        # survives the nan/-inf of log B there, create_graph and graph-cache replays); dB = dC · A / B.
        a, b = ctx.saved_inputs
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if ctx.next[0] is not None:
                ga = mask_mul(xlogy(g, b), (a, b), "sel_xlogy")
            if ctx.next[1] is not None:
                gb = div(mul(g, a), b)
        return ga, gb


@tensor_method("xlogy")
@implements(Xlogy)
def xlogy(a: Any, b: Any) -> Any:
    """a · log(b) elementwise, with broadcasting, and 0 where a is 0 (torch.xlogy).

    >>> from rtxviz import Tensor
    >>> xlogy(Tensor.from_slice([0.0, 2.0], [2]), Tensor.from_slice([0.0, 1.0], [2])).tolist()
    [0.0, 0.0]
    """
    return binary(Xlogy, a, b)


# -- rounding division ------------------------------------------------------------------------------------------
def _refuse_integer_zero(name: str, b: Any) -> None:
    """Integer division by zero raises, as in PyTorch (numpy would give 0 with a warning): a float divisor gives
    inf or nan instead, as both do."""
    if b.dtype.kind != "f" and bool((b == 0).any()):
        raise ZeroDivisionError(f"{name}: {b.dtype} division by zero (the divisor holds a 0)")


def _zero_grad(ctx: Any, g: Any, i: int) -> Any:
    """The gradient of a piecewise-constant result: zeros, as torch.div(..., rounding_mode=...) gives."""
    return mul_scalar(g, 0.0) if ctx.next[i] is not None else None


class FloorDivide(BroadcastBinary):
    """floor(a / b): Python's // and torch.floor_divide; int64 for int64 inputs."""

    name = "floor_divide"
    rule = "dA = 0, dB = 0  (C = floor(A / B) is piecewise constant)"

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        _refuse_integer_zero("floor_divide", b)
        return xp_of(a).floor_divide(a, b)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        # torch.floor_divide has no derivative (its backward raises); torch.div(a, b, rounding_mode="floor"), the
        # same values, gives these zeros, the derivative wherever it exists
        return _zero_grad(ctx, g, 0), _zero_grad(ctx, g, 1)


@tensor_method("floor_divide")
@implements(FloorDivide)
def floor_divide(a: Any, b: Any) -> Any:
    """a // b: the quotient rounded toward -inf, with broadcasting (torch.floor_divide); zero gradients.

    >>> from rtxviz import Tensor
    >>> floor_divide(Tensor.from_slice([7.0, -7.0], [2]), 2).tolist()
    [3.0, -4.0]
    """
    return binary(FloorDivide, a, b)


class TruncDivide(BroadcastBinary):
    """trunc(a / b), the quotient rounded toward 0: torch.div(a, b, rounding_mode="trunc")."""

    name = "trunc_divide"
    rule = "dA = 0, dB = 0  (C = trunc(A / B) is piecewise constant)"
    examples = (Example(lambda a, b: trunc_divide(a, b), ((2, 3), (3,)), low=0.5, high=3.0),
                Example(lambda a, b: trunc_divide(a, b), ((4,), (4,)), low=-3.0, high=-0.5))

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        xp = xp_of(a)
        if a.dtype.kind != "f":
            _refuse_integer_zero("div(rounding_mode='trunc')", b)
            return (a - xp.fmod(a, b)) // b  # exact for integers, as C's integer division
        return xp.trunc(a / b)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        return _zero_grad(ctx, g, 0), _zero_grad(ctx, g, 1)


@implements(TruncDivide, reference=None)
def trunc_divide(a: Any, b: Any) -> Any:
    """a / b rounded toward 0, with broadcasting (what ``div(a, b, rounding_mode="trunc")`` records)."""
    return binary(TruncDivide, a, b)


class Remainder(BroadcastBinary):
    """a - b·floor(a / b), with the sign of b: Python's % and torch.remainder."""

    name = "remainder"
    rule = "dA = dC, dB = -dC · floor(A / B)"
    save_inputs = True

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        _refuse_integer_zero("remainder", b)
        return xp_of(a).remainder(a, b)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        gb = neg(mul(g, floor_divide(a, b))) if ctx.next[1] is not None else None
        return (g if ctx.next[0] is not None else None), gb


@tensor_method("remainder")
@implements(Remainder)
def remainder(a: Any, b: Any) -> Any:
    """a % b with the sign of b (Python's and torch.remainder's), with broadcasting.

    >>> from rtxviz import Tensor
    >>> remainder(Tensor.from_slice([7.0, -7.0], [2]), 3).tolist()
    [1.0, 2.0]
    """
    return binary(Remainder, a, b)


class Fmod(BroadcastBinary):
    """a - b·trunc(a / b), with the sign of a: C's fmod and torch.fmod."""

    name = "fmod"
    rule = "dA = dC, dB = -dC · trunc(A / B)"
    save_inputs = True

    @staticmethod
    def compute(a: Any, b: Any) -> Any:
        _refuse_integer_zero("fmod", b)
        return xp_of(a).fmod(a, b)

    @staticmethod
    def grads(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        gb = neg(mul(g, trunc_divide(a, b))) if ctx.next[1] is not None else None
        return (g if ctx.next[0] is not None else None), gb


@tensor_method("fmod")
@implements(Fmod)
def fmod(a: Any, b: Any) -> Any:
    """The remainder of a / b with the sign of a (C's fmod, torch.fmod), with broadcasting.

    >>> from rtxviz import Tensor
    >>> fmod(Tensor.from_slice([7.0, -7.0], [2]), 3).tolist()
    [1.0, -1.0]
    """
    return binary(Fmod, a, b)


# -- masks ------------------------------------------------------------------------------------------------------
def _mask(kind: str, attrs: dict, xs: tuple) -> Any:
    """The piecewise-constant factor m(X) of a derivative, as bool or float array (never a new dtype)."""
    x = xs[0]
    if kind == "pos":
        return x > 0
    if kind == "nonpos":
        return x <= 0
    if kind == "lt":
        return x < attrs["value"]
    if kind == "sign":
        return xp_of(x).sign(x)
    if kind == "leaky":
        one = x.dtype.type(1.0)
        return xp_of(x).where(x > 0, one, x.dtype.type(attrs["slope"]))
    if kind == "sel_nonzero":
        return x != 0
    if kind == "sel_finite":
        return xp_of(x).isfinite(x)
    if kind == "sel_gt1":
        return x > 1
    if kind == "sel_pow_exponent":
        return (x != 0) | (xs[1] < 0)
    if kind == "gt":
        return x > attrs["value"]
    if kind == "sel_xlogy":
        return ~((x == 0) & (xs[1] <= 0))  # not "a = 0 and b <= 0" (a nan b keeps its nan, as PyTorch)
    if kind == "strictly_inside":
        return (x > attrs["min"]) & (x < attrs["max"])
    if kind == "inside":
        lo, hi = attrs["min"], attrs["max"]
        if lo is None:
            return x <= hi
        if hi is None:
            return x >= lo
        return (x >= lo) & (x <= hi)
    a, b = xs
    dt = a.dtype.type
    w_a = (a > b if kind[:3] == "max" else a < b).astype(a.dtype)
    w_a += (a == b) * dt(0.5)  # ties split half and half, as PyTorch (0, ½, 1 are exact in any float)
    return w_a if kind[-1] == "a" else dt(1.0) - w_a


class MaskMul(Op):
    """dY · m(X) for a factor m that is piecewise constant in X: the masks of relu, abs, clamp, leaky_relu,
    maximum... Built by this op rather than as a raw array inside the rule, so that it is recomputed from X
    wherever the rule's ops are replayed (the graph cache); its derivative in X is zero almost everywhere."""

    name = "mask_mul"
    kind = "gradient"
    rule = "dG = dZ · m(X), dX = 0  (m piecewise constant: [X > 0], sign(X), ...)"
    save_inputs = True
    examples = (
        Example(lambda g, x: mask_mul(g, (x,), "pos"), ((3, 4), (3, 4))),
        Example(lambda g, x: mask_mul(g, (x,), "leaky", slope=0.1), ((5,), (5,))),
        Example(lambda g, a, b: mask_mul(g, (a, b), "max_a"), ((2, 3), (2, 3), (2, 3))),
        Example(lambda g, x: mask_mul(g, (x,), "sel_nonzero"), ((4,), (4,))),
        Example(lambda g, x: mask_mul(g, (x,), "gt", value=0.25), ((6,), (6,))),
        Example(lambda g, x: mask_mul(g, (x,), "strictly_inside", min=-0.5, max=0.5), ((2, 4), (2, 4))),
    )

    @staticmethod
    def forward(ctx: Any, g: Any, *xs: Any) -> Any:
        kind = ctx.attrs["kind"]
        if kind[:4] == "sel_":  # a selection, not a product: a nan/inf in dY where m is 0 still gives 0
            return xp_of(g).where(_mask(kind, ctx.attrs, xs), g, g.dtype.type(0))
        return g * _mask(kind, ctx.attrs, xs)

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        ins = ctx.saved_inputs
        gh = apply(MaskMul, (h, *ins[1:]), ctx.attrs) if ctx.next[0] is not None else None
        return (gh,) + (None,) * (len(ins) - 1)


def mask_mul(g: Any, xs: tuple, kind: str, **params: Any) -> Any:
    """g · m(xs) with m one of the masks of `_mask` ("pos", "nonpos", "lt", "gt", "sign", "leaky", "inside",
    "strictly_inside", "max_a"/"max_b"/"min_a"/"min_b"); `params` are its constants (value, slope, min, max). The
    "sel_" kinds ("sel_nonzero", "sel_gt1", "sel_pow_exponent", "sel_xlogy", "sel_finite") select instead: g where m
    else 0, even where g is nan."""
    return apply(MaskMul, (g, *xs), {"kind": kind, **params} if params else _KIND_ATTRS[kind])


_KIND_ATTRS = {k: {"kind": k} for k in ("pos", "nonpos", "sign", "max_a", "max_b", "min_a", "min_b", "sel_nonzero",
                                         "sel_gt1", "sel_pow_exponent", "sel_xlogy", "sel_finite")}


# -- one input ----------------------------------------------------------------------------------------------------
class Neg(Elementwise):
    name = "neg"
    rule = "dX = -dY"
    keeps_finite = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return -x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (neg(g),)


@tensor_method("neg", "negative")
@implements(Neg)
def neg(x: Any) -> Any:
    """-x."""
    return unary(Neg, x)


class AddScalar(Elementwise):
    name = "add_scalar"
    rule = "dX = dY"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x + ctx.attrs["value"]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (g,)


@tensor_method("add_scalar")
@implements(AddScalar)
def add_scalar(x: Tensor, value: float) -> Any:
    """x + value, for a Python number."""
    return apply(AddScalar, (x,), {"value": value})


class RSubScalar(Elementwise):
    name = "rsub_scalar"
    rule = "dX = -dY  (Y = value - X)"
    examples = (Example(lambda x: rsub_scalar(x, 2.5), ((3, 2),)),)

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return ctx.attrs["value"] - x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (neg(g),)


@tensor_method("rsub_scalar")
@implements(RSubScalar, reference=None)
def rsub_scalar(x: Tensor, value: float) -> Any:
    """value - x."""
    return apply(RSubScalar, (x,), {"value": value})


class MulScalar(Elementwise):
    name = "mul_scalar"
    rule = "dX = dY · value"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * ctx.attrs["value"]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul_scalar(g, ctx.attrs["value"]),)


@tensor_method("mul_scalar")
@implements(MulScalar)
def mul_scalar(x: Tensor, value: float) -> Any:
    """x * value, for a Python number."""
    return apply(MulScalar, (x,), {"value": value})


class PowScalar(Elementwise):
    name = "pow_scalar"
    rule = "dX = dY · p · X^(p-1)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        p = ctx.attrs["exponent"]
        if p == 2:
            return x * x
        return x**p

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (x,) = ctx.saved_inputs
        p = ctx.attrs["exponent"]
        if p == 0:
            return (mul_scalar(g, 0.0),)  # PyTorch: zeros (p · X^-1 would be 0 · inf = nan at X = 0)
        if p == 1:
            return (g,)
        if p == 2:
            return (mul(g, mul_scalar(x, 2.0)),)
        return (mul(g, mul_scalar(pow_scalar(x, p - 1), p)),)


@tensor_method("pow_scalar")
@implements(PowScalar)
def pow_scalar(x: Tensor, exponent: float) -> Any:
    """x ** exponent, for a Python number."""
    return apply(PowScalar, (x,), {"exponent": exponent})


class RPowScalar(Elementwise):
    name = "rpow_scalar"
    rule = "dX = dY · value^X · ln(value)"
    save_output = True
    examples = (Example(lambda x: pow(2.0, x), ((3,),)), Example(lambda x: pow(0.5, x), ((2, 2),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return ctx.attrs["value"] ** x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        value = ctx.attrs["value"]
        if value == 0:
            # 0^X · ln 0: as PyTorch, 0 where X >= 0, i.e. where Y = 0^X is 0 or 1 (not 0 · -inf = nan).
            y = ctx.output
            with np.errstate(invalid="ignore"):
                return (mask_mul(mul_scalar(mul(g, y), -math.inf), (y,), "sel_gt1"),)
        return (mul(g, mul_scalar(ctx.output, math.log(value))),)


@implements(RPowScalar, reference=None)
def rpow_scalar(x: Tensor, value: float) -> Any:
    """value ** x, for a Python number (what `value ** x` records)."""
    return apply(RPowScalar, (x,), {"value": value})
