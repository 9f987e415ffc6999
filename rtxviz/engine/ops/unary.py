"""Elementwise math and activations, each op's class followed by its public function. Rules use the saved output
where that is cheaper (exp, tanh, sigmoid)."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ...accel import tanh_grad as _tanh_grad  # None: numpy's three operations
from ..backward import grad
from ..device import cupyx_module, xp_of
from ..errors import DTypeError, GraphError
from ..grad_mode import STATE
from ..graph import Op, apply
from ..tensor import Tensor, as_tensor_like
from ._base import Elementwise, Example, floating, implements, tensor_method, unary
from .arithmetic import add, add_scalar, div, mask_mul, mul, mul_scalar, neg, rsub_scalar, sub


def _const(array: Any) -> Tensor:
    """A no-gradient view of an array the op itself produced (its output): masks built from it come from ops."""
    return Tensor._wrap(array)


class Exp(Elementwise):
    name = "exp"
    floating = True
    rule = "dX = dY · exp(X)"
    save_output = True
    ufunc = "exp"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, ctx.output),)


@tensor_method("exp")
@implements(Exp)
def exp(x: Any) -> Any:
    return unary(Exp, x)


class Log(Elementwise):
    name = "log"
    floating = True
    rule = "dX = dY / X"
    save_inputs = True
    ufunc = "log"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (div(g, ctx.saved_inputs[0]),)


@tensor_method("log")
@implements(Log)
def log(x: Any) -> Any:
    return unary(Log, x)


class Sqrt(Elementwise):
    name = "sqrt"
    floating = True
    rule = "dX = dY / (2·sqrt(X))"
    save_output = True
    ufunc = "sqrt"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (div(g, mul_scalar(ctx.output, 2.0)),)


@tensor_method("sqrt")
@implements(Sqrt)
def sqrt(x: Any) -> Any:
    return unary(Sqrt, x)


class Abs(Elementwise):
    name = "abs"
    rule = "dX = dY · sign(X)"
    keeps_finite = True
    save_inputs = True
    ufunc = "abs"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mask_mul(g, ctx.saved_inputs, "sign"),)


@tensor_method("abs")
@implements(Abs)
def abs(x: Any) -> Any:
    return unary(Abs, x)


class Tanh(Elementwise):
    name = "tanh"
    floating = True
    rule = "dX = dY · (1 - tanh²(X))"
    save_output = True
    ufunc = "tanh"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (tanh_grad(g, ctx.output),)


@tensor_method("tanh")
@implements(Tanh)
def tanh(x: Any) -> Any:
    return unary(Tanh, x)


class TanhGrad(Op):
    """tanh's gradient dY · (1 - Y²) from its saved output Y, as one op (PyTorch's tanh_backward): the same
    three IEEE operations as mul(dY, 1 - Y·Y), so the same bits, but one node to record, walk and replay instead
    of three. Its own backward is written in ops, so every higher derivative still flows through Y to X."""

    name = "tanh_grad"
    kind = "gradient"
    rule = "dG = dZ · (1 - Y²), dY = -2 · dZ · G · Y"
    save_inputs = True
    examples = (Example(lambda g, y: tanh_grad(g, y), ((3, 4), (3, 4))),
                Example(lambda g, y: tanh_grad(g, y), ((5,), (5,)), low=-0.9, high=0.9))

    @staticmethod
    def forward(ctx: Any, g: Any, y: Any) -> Any:
        if _tanh_grad is not None and type(g) is np.ndarray and g.ndim and type(y) is np.ndarray:
            return _tanh_grad_numpy(g, y)
        return g * (1.0 - y * y)

    @staticmethod
    def specialize(attrs: Any, g: Any, y: Any) -> Any:
        if _tanh_grad is not None and type(g) is np.ndarray and g.ndim and type(y) is np.ndarray:
            return _tanh_grad_numpy
        return None

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        g, y = ctx.saved_inputs
        nxt = ctx.next
        return (tanh_grad(h, y) if nxt[0] is not None else None,
                mul_scalar(mul(mul(h, g), y), -2.0) if nxt[1] is not None else None)

    @staticmethod
    def batched(ctx: Any, h: Any) -> tuple:
        g, y = (t.data for t in ctx.saved_inputs)
        nxt = ctx.next
        return (h * (1.0 - y * y) if nxt[0] is not None else None,
                (h * g) * y * -2.0 if nxt[1] is not None else None)


def _tanh_grad_numpy(g: Any, y: Any) -> Any:
    # one compiled pass for numpy's three (the same roundings, tests/engine/test_tanh_grad_native.py); it
    # declines other layouts, formats and shapes (and its callers keep a 0-d g on numpy's scalar path)
    out = np.empty(g.shape, g.dtype)
    if _tanh_grad(g, y, out):  # callers test that the kernel is built
        return out
    return g * (1.0 - y * y)


def tanh_grad(g: Any, y: Any) -> Any:
    """g · (1 - y²): the gradient of tanh at an input whose tanh is `y`, for the gradient `g` of its output."""
    return apply(TanhGrad, (g, y))


def _sigmoid_array(x: Any) -> Any:
    xp = xp_of(x)
    # Stable on both tails: exp of a non-positive number never overflows.
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


class Sigmoid(Elementwise):
    name = "sigmoid"
    floating = True
    rule = "dX = dY · σ(X) · (1 - σ(X))"
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return _sigmoid_array(x)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        y = ctx.output
        return (mul(g, mul(y, rsub_scalar(y, 1.0))),)


@tensor_method("sigmoid")
@implements(Sigmoid)
def sigmoid(x: Any) -> Any:
    return unary(Sigmoid, x)


class Relu(Elementwise):
    name = "relu"
    rule = "dX = dY · [X > 0]"
    keeps_finite = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return xp_of(x).maximum(x, 0)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # [Y > 0] equals [X > 0]; the mask is made by an op (mask_mul), never a raw array, so cached replays
        # recompute it from the new values.
        return (mask_mul(g, (_const(ctx.out_data),), "pos"),)


@tensor_method("relu")
@implements(Relu)
def relu(x: Any) -> Any:
    return unary(Relu, x)


class Silu(Elementwise):
    name = "silu"
    floating = True
    rule = "dX = dY · σ(X) · (1 + X · (1 - σ(X)))"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * _sigmoid_array(x)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        s = sigmoid(x)
        return (mul(g, mul(s, add_scalar(mul(x, rsub_scalar(s, 1.0)), 1.0))),)


@tensor_method("silu")
@implements(Silu)
def silu(x: Any) -> Any:
    return unary(Silu, x)


class Softplus(Elementwise):
    name = "softplus"
    floating = True
    rule = "dX = dY · σ(X)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        return xp.logaddexp(x, 0).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, sigmoid(ctx.saved_inputs[0])),)


@tensor_method("softplus")
@implements(Softplus)
def softplus(x: Any) -> Any:
    return unary(Softplus, x)


class Sin(Elementwise):
    name = "sin"
    floating = True
    rule = "dX = dY · cos(X)"
    save_inputs = True
    ufunc = "sin"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, cos(ctx.saved_inputs[0])),)


@tensor_method("sin")
@implements(Sin)
def sin(x: Any) -> Any:
    return unary(Sin, x)


class Cos(Elementwise):
    name = "cos"
    floating = True
    rule = "dX = -dY · sin(X)"
    save_inputs = True
    ufunc = "cos"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (neg(mul(g, sin(ctx.saved_inputs[0]))),)


@tensor_method("cos")
@implements(Cos)
def cos(x: Any) -> Any:
    return unary(Cos, x)


class Square(Elementwise):
    name = "square"
    rule = "dX = 2 · dY · X"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, mul_scalar(ctx.saved_inputs[0], 2.0)),)


@tensor_method("square")
@implements(Square)
def square(x: Any) -> Any:
    return unary(Square, x)


class Reciprocal(Elementwise):
    name = "reciprocal"
    floating = True
    rule = "dX = -dY / X²"
    save_output = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return 1.0 / x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        y = ctx.output
        return (neg(mul(g, mul(y, y))),)


@tensor_method("reciprocal")
@implements(Reciprocal)
def reciprocal(x: Any) -> Any:
    return unary(Reciprocal, x)


# A float32 rational approximation of erf on [-4, 4] (|error| < 5e-7, a few float32 ulps), as in Eigen's fast


# erf: scipy's erf costs ~6x more on large float32 arrays (it computes in double). float64 keeps scipy's.


_ERF_P = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02))


_ERF_Q = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02))


_CHUNK = 65536  # elements: a chunk's temporaries stay in the L2 cache across the polynomial's ~24 passes


def _erf_float32(x: Any) -> Any:
    if x.size <= 2 * _CHUNK:
        return _erf_float32_block(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    for start in range(0, flat.size, _CHUNK):  # ~3x faster than whole-array passes on large activations
        out[start:start + _CHUNK] = _erf_float32_block(flat[start:start + _CHUNK])
    return out.reshape(x.shape)


def _erf_float32_block(x: Any) -> Any:
    x = np.clip(x, np.float32(-4.0), np.float32(4.0))
    x2 = x * x
    p = x2 * _ERF_P[0]
    p += _ERF_P[1]
    for c in _ERF_P[2:]:
        p *= x2
        p += c
    p *= x
    q = x2 * _ERF_Q[0]
    q += _ERF_Q[1]
    for c in _ERF_Q[2:]:
        q *= x2
        q += c
    p /= q
    return p


def _erf(x: Any) -> Any:
    if type(x) is not np.ndarray:  # a device array: cupyx's erf (the backend's, device.cupyx_module)
        erf: Any = cupyx_module().scipy.special.erf
    elif x.dtype == np.float32:
        return _erf_float32(x)
    else:
        import scipy.special

        erf = scipy.special.erf
    return erf(x).astype(x.dtype, copy=False)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class Gelu(Elementwise):
    name = "gelu"
    floating = True
    rule = "dX = dY · (Φ(X) + X · φ(X))"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        if ctx.attrs["approximate"] == "tanh":
            return 0.5 * x * (1.0 + xp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
        cdf = _erf(x * _INV_SQRT_2)
        cdf += 1.0
        cdf *= 0.5
        ctx.state = cdf  # Φ(X), reused by a first-order backward instead of a second erf
        return x * cdf

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        if ctx.state is not None and not STATE.enabled:
            # First order: one fused op from the saved Φ(X); create_graph takes the differentiable path below.
            return (mul(g, apply(GeluDerivative, (x, Tensor._wrap(ctx.state)))),)
        if ctx.attrs["approximate"] == "tanh":
            # y = 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x³)
            u = mul_scalar(add(x, mul_scalar(mul(x, mul(x, x)), 0.044715)), _SQRT_2_OVER_PI)
            t = tanh(u)
            du = mul_scalar(add_scalar(mul_scalar(mul(x, x), 3 * 0.044715), 1.0), _SQRT_2_OVER_PI)
            left = mul_scalar(add_scalar(t, 1.0), 0.5)
            right = mul(mul_scalar(x, 0.5), mul(rsub_scalar(mul(t, t), 1.0), du))
            return (mul(g, add(left, right)),)
        cdf = mul_scalar(add_scalar(erf(mul_scalar(x, _INV_SQRT_2)), 1.0), 0.5)
        pdf = mul_scalar(exp(mul_scalar(mul(x, x), -0.5)), _INV_SQRT_2PI)
        return (mul(g, add(cdf, mul(x, pdf))),)


@tensor_method("gelu")
@implements(Gelu)
def gelu(x: Any, approximate: str = "none") -> Any:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return unary(Gelu, x, {"approximate": approximate})


class GeluDerivative(Op):
    """Φ(X) + X·φ(X) from X and a saved Φ(X): the first-order GELU derivative in one pass. Only used where no
    graph is recorded, so it has no backward of its own."""

    name = "gelu_derivative"
    rule = "(first-order helper of gelu; not differentiated)"
    kind = "gradient"
    differentiable = False
    # a first-order backward of gelu (no create_graph) runs it
    examples = (Example(lambda x: grad(gelu(x).sum(), x)[0], ((3, 4),)),)

    @staticmethod
    def forward(ctx: Any, x: Any, cdf: Any) -> Any:
        xp = xp_of(x)
        pdf = xp.exp(x * x * -0.5)
        pdf *= _INV_SQRT_2PI
        pdf *= x
        pdf += cdf
        return pdf

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError("gelu_derivative: internal first-order helper, not differentiable")


class Erf(Elementwise):
    name = "erf"
    floating = True
    rule = "dX = dY · 2/√π · exp(-X²)"
    examples = (Example(lambda x: erf(x), ((3, 4),), low=-2.0, high=2.0),)
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return _erf(x)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        return (mul(g, mul_scalar(exp(neg(mul(x, x))), 2.0 / math.sqrt(math.pi))),)


@tensor_method("erf")
@implements(Erf)
def erf(x: Any) -> Any:
    """The error function 2/√π ∫₀ˣ exp(-t²) dt, elementwise (torch.erf).

    >>> from rtxviz import Tensor
    >>> [round(v, 4) for v in erf(Tensor.from_slice([0.0, 0.5, -2.0], [3])).tolist()]
    [0.0, 0.5205, -0.9953]
    """
    return unary(Erf, x)


class LeakyRelu(Elementwise):
    name = "leaky_relu"
    floating = True
    rule = "dX = dY · (1 if X > 0 else slope)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        slope = ctx.attrs["negative_slope"]
        return xp_of(x).where(x > 0, x, x * slope)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mask_mul(g, ctx.saved_inputs, "leaky", slope=ctx.attrs["negative_slope"]),)


@tensor_method("leaky_relu")
@implements(LeakyRelu)
def leaky_relu(x: Any, negative_slope: float = 0.01) -> Any:
    return unary(LeakyRelu, x, {"negative_slope": float(negative_slope)})


class Elu(Elementwise):
    name = "elu"
    floating = True
    rule = "dX = dY · (1 if X > 0 else α·exp(X))"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        alpha = ctx.attrs["alpha"]
        return xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, 0))).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        # dY·[X > 0] + dY·α·exp(min(X, 0))·[X ≤ 0]: masks by mask_mul, the exp part stays differentiable.
        neg_part = mul(g, mul_scalar(exp(minimum_scalar(x, 0.0)), ctx.attrs["alpha"]))
        return (add(mask_mul(g, (x,), "pos"), mask_mul(neg_part, (x,), "nonpos")),)


@tensor_method("elu")
@implements(Elu)
def elu(x: Any, alpha: float = 1.0) -> Any:
    return unary(Elu, x, {"alpha": float(alpha)})


class Clamp(Elementwise):
    name = "clamp"
    rule = "dX = dY · [min ≤ X ≤ max]"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        lo, hi = ctx.attrs["min"], ctx.attrs["max"]
        return xp_of(x).clip(x, lo, hi).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mask_mul(g, ctx.saved_inputs, "inside", min=ctx.attrs["min"], max=ctx.attrs["max"]),)


@tensor_method("clamp", "clip")
@implements(Clamp)
def clamp(x: Any, min: Any = None, max: Any = None) -> Any:
    """x limited to [min, max]; either bound may be a number or a tensor (broadcast against x).

    With tensor bounds the gradient goes where the value came from, as in PyTorch: to x where
    min <= x <= max, to min where x < min, to max where x > max (two `where`s).

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([-2.0, 0.5, 3.0], [3]).clamp(min=Tensor.from_slice([-1.0, 0.0, 0.0], [3]), max=2.0).tolist()
    [-1.0, 0.5, 2.0]
    """
    if min is None and max is None:
        raise ValueError("clamp: give at least one of min and max")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        from .index import compare, where  # index imports this module

        # the masks by `compare`, an op: a graph-cache replay recomputes them from the new values
        out = x
        if min is not None:
            out = where(compare(x, min, "__lt__"), min, out)
        if max is not None:
            out = where(compare(out, max, "__gt__"), max, out)
        return out
    if (min.__class__ is float or max.__class__ is float) and isinstance(x, Tensor):
        x = floating(x)  # a float bound makes an int64 tensor's result float32, as torch.clamp(int_tensor, 0.5)
    return unary(Clamp, x, {"min": min, "max": max})


class MinimumScalar(Elementwise):
    name = "minimum_scalar"
    rule = "dX = dY · [X < value]"
    examples = (Example(lambda x: minimum_scalar(x, 0.25), ((6,),)),)
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return xp_of(x).minimum(x, ctx.attrs["value"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mask_mul(g, ctx.saved_inputs, "lt", value=ctx.attrs["value"]),)


@implements(MinimumScalar, reference=None)
def minimum_scalar(x: Any, value: float) -> Any:
    return apply(MinimumScalar, (x,), {"value": value})


# -- vocabulary v2: more math ---------------------------------------------------------------------------------
class Log1p(Elementwise):
    name = "log1p"
    floating = True
    rule = "dX = dY / (1 + X)"
    save_inputs = True
    ufunc = "log1p"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (div(g, add_scalar(ctx.saved_inputs[0], 1.0)),)


@tensor_method("log1p")
@implements(Log1p)
def log1p(x: Any) -> Any:
    """log(1 + x), accurate for small x (torch.log1p).

    >>> from rtxviz import Tensor
    >>> log1p(Tensor.from_slice([0.0, 1e-10], [2])).tolist()[1] > 0
    True
    """
    return unary(Log1p, x)


class Expm1(Elementwise):
    name = "expm1"
    floating = True
    rule = "dX = dY · (Y + 1)"
    save_output = True
    ufunc = "expm1"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, add_scalar(ctx.output, 1.0)),)


@tensor_method("expm1")
@implements(Expm1)
def expm1(x: Any) -> Any:
    """exp(x) - 1, accurate for small x (torch.expm1).

    >>> from rtxviz import Tensor
    >>> expm1(Tensor.from_slice([0.0], [1])).tolist()
    [0.0]
    """
    return unary(Expm1, x)


class Tan(Elementwise):
    name = "tan"
    floating = True
    rule = "dX = dY · (1 + Y²)"
    save_output = True
    ufunc = "tan"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        y = ctx.output
        return (mul(g, add_scalar(mul(y, y), 1.0)),)


@tensor_method("tan")
@implements(Tan)
def tan(x: Any) -> Any:
    """The tangent, elementwise (torch.tan).

    >>> from rtxviz import Tensor
    >>> round(tan(Tensor.from_slice([0.25], [1])).item(), 4)
    0.2553
    """
    return unary(Tan, x)


class Atan(Elementwise):
    name = "atan"
    floating = True
    rule = "dX = dY / (1 + X²)"
    save_inputs = True
    ufunc = "arctan"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        return (div(g, add_scalar(mul(x, x), 1.0)),)


@tensor_method("atan", "arctan")
@implements(Atan)
def atan(x: Any) -> Any:
    """The inverse tangent, elementwise, in (-π/2, π/2) (torch.atan).

    >>> from rtxviz import Tensor
    >>> round(atan(Tensor.from_slice([1.0], [1])).item(), 4)  # π/4
    0.7854
    """
    return unary(Atan, x)


class Sinh(Elementwise):
    name = "sinh"
    floating = True
    rule = "dX = dY · cosh(X)"
    save_inputs = True
    ufunc = "sinh"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, cosh(ctx.saved_inputs[0])),)


@tensor_method("sinh")
@implements(Sinh)
def sinh(x: Any) -> Any:
    """The hyperbolic sine, elementwise (torch.sinh).

    >>> from rtxviz import Tensor
    >>> round(sinh(Tensor.from_slice([1.0], [1])).item(), 4)
    1.1752
    """
    return unary(Sinh, x)


class Cosh(Elementwise):
    name = "cosh"
    floating = True
    rule = "dX = dY · sinh(X)"
    save_inputs = True
    ufunc = "cosh"

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, sinh(ctx.saved_inputs[0])),)


@tensor_method("cosh")
@implements(Cosh)
def cosh(x: Any) -> Any:
    """The hyperbolic cosine, elementwise (torch.cosh).

    >>> from rtxviz import Tensor
    >>> round(cosh(Tensor.from_slice([1.0], [1])).item(), 4)
    1.5431
    """
    return unary(Cosh, x)


# -- vocabulary v2: more activations ----------------------------------------------------------------------------
class LogSigmoid(Elementwise):
    name = "logsigmoid"
    floating = True
    rule = "dX = dY · σ(-X)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        # log σ(x) = min(x, 0) - log(1 + exp(-|x|)): exp of a non-positive number never overflows.
        return xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (mul(g, sigmoid(neg(ctx.saved_inputs[0]))),)


@implements(LogSigmoid)
def logsigmoid(x: Any) -> Any:
    """log σ(x), elementwise and stable on both tails (torch.nn.functional.logsigmoid).

    >>> from rtxviz import Tensor
    >>> [round(v, 4) for v in logsigmoid(Tensor.from_slice([0.0, -100.0], [2])).tolist()]
    [-0.6931, -100.0]
    """
    return unary(LogSigmoid, x)


class Mish(Elementwise):
    name = "mish"
    floating = True
    rule = "dX = dY · (tanh(softplus(X)) + X · σ(X) · (1 - tanh²(softplus(X))))"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        return x * xp.tanh(xp.logaddexp(x, 0).astype(x.dtype, copy=False))

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        t = tanh(softplus(x))
        return (mul(g, add(t, mul(mul(x, sigmoid(x)), rsub_scalar(mul(t, t), 1.0)))),)


@implements(Mish)
def mish(x: Any) -> Any:
    """x · tanh(softplus(x)), elementwise (torch.nn.functional.mish).

    >>> from rtxviz import Tensor
    >>> round(mish(Tensor.from_slice([1.0], [1])).item(), 4)
    0.8651
    """
    return unary(Mish, x)


class Hardswish(Elementwise):
    name = "hardswish"
    floating = True
    rule = "dX = dY · (0 if X < -3, X/3 + 1/2 if -3 ≤ X ≤ 3, 1 if X > 3)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * xp_of(x).clip(x + 3.0, 0.0, 6.0) / 6.0

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # PyTorch's pieces: 0 below -3, X/3 + 1/2 on [-3, 3], 1 above 3; each mask made by the mask_mul op.
        x = ctx.saved_inputs[0]
        middle = mask_mul(mul(g, add_scalar(mul_scalar(x, 1.0 / 3.0), 0.5)), (x,), "inside", min=-3.0, max=3.0)
        return (add(middle, mask_mul(g, (x,), "gt", value=3.0)),)


@implements(Hardswish)
def hardswish(x: Any) -> Any:
    """x · min(max(x + 3, 0), 6) / 6, elementwise (torch.nn.functional.hardswish).

    >>> from rtxviz import Tensor
    >>> hardswish(Tensor.from_slice([-4.0, 0.0, 1.5, 4.0], [4])).tolist()
    [-0.0, 0.0, 1.125, 4.0]
    """
    return unary(Hardswish, x)


#: PyTorch's SELU constants (Klambauer et al. 2017).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class Selu(Elementwise):
    name = "selu"
    floating = True
    rule = "dX = dY · scale · (1 if X > 0 else α·exp(X))"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        neg_part = xp.expm1(xp.minimum(x, 0)) * (SELU_ALPHA * SELU_SCALE)
        return xp.where(x > 0, x * SELU_SCALE, neg_part).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        neg_part = mul(g, mul_scalar(exp(minimum_scalar(x, 0.0)), SELU_ALPHA * SELU_SCALE))
        return (add(mask_mul(mul_scalar(g, SELU_SCALE), (x,), "pos"), mask_mul(neg_part, (x,), "nonpos")),)


@implements(Selu)
def selu(x: Any) -> Any:
    """scale · (x if x > 0 else α · (exp(x) - 1)), elementwise (torch.nn.functional.selu).

    α and scale are PyTorch's constants, `SELU_ALPHA` ≈ 1.6733 and `SELU_SCALE` ≈ 1.0507.

    >>> from rtxviz import Tensor
    >>> [round(v, 4) for v in selu(Tensor.from_slice([1.0, -1.0], [2])).tolist()]
    [1.0507, -1.1113]
    """
    return unary(Selu, x)


class Celu(Elementwise):
    name = "celu"
    floating = True
    rule = "dX = dY · (1 if X > 0 else exp(X/α))"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        alpha = ctx.attrs["alpha"]
        neg_part = xp.expm1(xp.minimum(x, 0) * (1.0 / alpha)) * alpha
        return xp.where(x > 0, x, neg_part).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x = ctx.saved_inputs[0]
        neg_part = mul(g, exp(mul_scalar(minimum_scalar(x, 0.0), 1.0 / ctx.attrs["alpha"])))
        return (add(mask_mul(g, (x,), "pos"), mask_mul(neg_part, (x,), "nonpos")),)


@implements(Celu)
def celu(x: Any, alpha: float = 1.0) -> Any:
    """x if x > 0 else α · (exp(x/α) - 1), elementwise (torch.nn.functional.celu).

    >>> from rtxviz import Tensor
    >>> [round(v, 4) for v in celu(Tensor.from_slice([2.0, -1.0], [2]), alpha=0.5).tolist()]
    [2.0, -0.4323]
    """
    alpha = float(alpha)
    if alpha == 0.0:
        raise ValueError("celu: alpha must not be 0 (it divides x), got 0.0")
    return unary(Celu, x, {"alpha": alpha})


class Hardtanh(Elementwise):
    name = "hardtanh"
    rule = "dX = dY · [min_val < X < max_val]"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return xp_of(x).clip(x, ctx.attrs["min_val"], ctx.attrs["max_val"]).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # As PyTorch: no gradient at the bounds themselves (clamp passes it there).
        attrs = ctx.attrs
        return (mask_mul(g, ctx.saved_inputs, "strictly_inside", min=attrs["min_val"], max=attrs["max_val"]),)


@implements(Hardtanh)
def hardtanh(x: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:
    """x clipped to [min_val, max_val], elementwise (torch.nn.functional.hardtanh).

    >>> from rtxviz import Tensor
    >>> hardtanh(Tensor.from_slice([-2.0, 0.5, 3.0], [3])).tolist()
    [-1.0, 0.5, 1.0]
    """
    min_val, max_val = float(min_val), float(max_val)
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} is greater than max_val {max_val}")
    return unary(Hardtanh, x, {"min_val": min_val, "max_val": max_val})


class Softsign(Elementwise):
    name = "softsign"
    floating = True
    rule = "dX = dY / (1 + |X|)²"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x / (xp_of(x).abs(x) + 1.0)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (div(g, square(add_scalar(abs(ctx.saved_inputs[0]), 1.0))),)


@implements(Softsign)
def softsign(x: Any) -> Any:
    """x / (1 + |x|), elementwise (torch.nn.functional.softsign).

    >>> from rtxviz import Tensor
    >>> softsign(Tensor.from_slice([1.0, -3.0], [2])).tolist()
    [0.5, -0.75]
    """
    return unary(Softsign, x)


# -- rounding and the other piecewise-constant functions (torch's zero gradients) -------------------------------
def _zero_grad(g: Any) -> Any:
    """The gradient of a piecewise-constant function: zeros (torch's), as an op so create_graph records it."""
    return mul_scalar(g, 0.0)


def _same_if_integer(x: Any) -> Any:
    """`x` as a Tensor; None when it is float (the op runs), else a copy of it: torch.floor(int_tensor) and its
    kin return their integer (or bool) input's values unchanged, in its dtype."""
    if not isinstance(x, Tensor):
        x = as_tensor_like(x, None)
    return None if x.data.dtype.kind == "f" else x.clone()


class Sign(Elementwise):
    name = "sign"
    rule = "dX = 0  (sign is piecewise constant)"
    keeps_finite = True
    ufunc = "sign"
    examples = (Example(lambda x: sign(x), ((3, 4),)),)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (_zero_grad(g),)


@tensor_method("sign")
@implements(Sign, reference=None)
def sign(x: Any) -> Any:
    """-1, 0 or 1 by the sign of each element, in x's dtype (torch.sign); zero gradient.

    >>> from rtxviz import Tensor
    >>> sign(Tensor.from_slice([-2.0, 0.0, 3.0], [3])).tolist()
    [-1.0, 0.0, 1.0]
    """
    if not isinstance(x, Tensor):
        x = as_tensor_like(x, None)
    if x.data.dtype.kind == "b":  # numpy has no sign of bool; torch's is the value itself
        return x.clone()
    return unary(Sign, x)


class Floor(Elementwise):
    name = "floor"
    rule = "dX = 0  (floor is piecewise constant)"
    keeps_finite = True
    ufunc = "floor"
    examples = (Example(lambda x: floor(x), ((3, 4),), low=-3.0, high=3.0),)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (_zero_grad(g),)


@tensor_method("floor")
@implements(Floor, reference=None)
def floor(x: Any) -> Any:
    """Each element rounded toward -inf (torch.floor); an integer tensor is returned as it is. Zero gradient.

    >>> from rtxviz import Tensor
    >>> floor(Tensor.from_slice([-1.5, 0.5, 2.0], [3])).tolist()
    [-2.0, 0.0, 2.0]
    """
    same = _same_if_integer(x)
    return same if same is not None else unary(Floor, x)


class Ceil(Elementwise):
    name = "ceil"
    rule = "dX = 0  (ceil is piecewise constant)"
    keeps_finite = True
    ufunc = "ceil"
    examples = (Example(lambda x: ceil(x), ((3, 4),), low=-3.0, high=3.0),)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (_zero_grad(g),)


@tensor_method("ceil")
@implements(Ceil, reference=None)
def ceil(x: Any) -> Any:
    """Each element rounded toward +inf (torch.ceil); an integer tensor is returned as it is. Zero gradient.

    >>> from rtxviz import Tensor
    >>> ceil(Tensor.from_slice([-1.5, 0.5, 2.0], [3])).tolist()
    [-1.0, 1.0, 2.0]
    """
    same = _same_if_integer(x)
    return same if same is not None else unary(Ceil, x)


class Trunc(Elementwise):
    name = "trunc"
    rule = "dX = 0  (trunc is piecewise constant)"
    keeps_finite = True
    ufunc = "trunc"
    examples = (Example(lambda x: trunc(x), ((3, 4),), low=-3.0, high=3.0),)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (_zero_grad(g),)


@tensor_method("trunc", "fix")
@implements(Trunc, reference=None)
def trunc(x: Any) -> Any:
    """Each element rounded toward 0 (torch.trunc, torch.fix); an integer tensor is returned as it is. Zero
    gradient.

    >>> from rtxviz import Tensor
    >>> trunc(Tensor.from_slice([-1.5, 0.5, 2.7], [3])).tolist()
    [-1.0, 0.0, 2.0]
    """
    same = _same_if_integer(x)
    return same if same is not None else unary(Trunc, x)


class Round(Elementwise):
    name = "round"
    rule = "dX = 0  (round is piecewise constant)"
    keeps_finite = True
    examples = (Example(lambda x: round_elementwise(x), ((3, 4),), low=-3.0, high=3.0),
                Example(lambda x: round_elementwise(x, decimals=2), ((5,),)),
                Example(lambda x: round_elementwise(x, decimals=-1), ((5,),), low=-40.0, high=40.0))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        decimals = ctx.attrs["decimals"]
        if decimals == 0:
            return xp.rint(x)  # half to even, as torch.round
        # torch's scaling, to give its bits: x·10^d rounded then divided (d > 0), or x/10^-d rounded then
        # multiplied (d < 0); numpy.round differs from it in the last bit on some values
        ten = x.dtype.type(10.0 ** builtins.abs(decimals))
        return xp.rint(x * ten) / ten if decimals > 0 else xp.rint(x / ten) * ten

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (_zero_grad(g),)


# named so that the doctests here keep Python's round(v, 4); rtxviz.round and Tensor.round are this function
@tensor_method("round")
@implements(Round, reference=None)
def round_elementwise(x: Any, *, decimals: int = 0) -> Any:
    """Each element rounded to `decimals` decimal places, halves to even (torch.round); an integer tensor is
    returned as it is. Zero gradient.

    >>> from rtxviz import Tensor
    >>> Tensor.from_slice([0.5, 1.5, 2.5, -0.5], [4]).round().tolist()
    [0.0, 2.0, 2.0, -0.0]
    >>> Tensor.from_slice([1.2345, 1250.0], [2], dtype="float64").round(decimals=2).tolist()
    [1.23, 1250.0]
    """
    if decimals.__class__ is not int:
        raise TypeError(f"round: decimals must be an int, got {decimals!r} ({type(decimals).__name__})")
    same = _same_if_integer(x)
    if same is not None:
        if decimals != 0:  # torch: "round_cpu" with decimals is not implemented for integer tensors
            raise DTypeError(f"round: decimals={decimals} needs a float tensor, got {same.dtype}")
        return same
    return unary(Round, x, {"decimals": decimals})


@tensor_method("frac")
def frac(x: Any) -> Any:
    """The fractional part x - trunc(x), with x's sign (torch.frac); gradient 1, as torch's.

    >>> from rtxviz import Tensor
    >>> frac(Tensor.from_slice([-1.5, 2.25], [2])).tolist()
    [-0.5, 0.25]
    """
    if not isinstance(x, Tensor):
        x = as_tensor_like(x, None)
    if x.data.dtype.kind != "f":  # torch: "frac_cpu" not implemented for 'Long'
        raise DTypeError(f"frac: needs a float tensor, got {x.dtype}")
    return sub(x, trunc(x))


@tensor_method("rsqrt")
def rsqrt(x: Any) -> Any:
    """1 / sqrt(x), elementwise (torch.rsqrt): reciprocal(sqrt(x)), torch's values and its gradient
    -dY · Y³ / 2; an integer tensor gives the default float dtype.

    >>> from rtxviz import Tensor
    >>> rsqrt(Tensor.from_slice([4.0, 0.25], [2])).tolist()
    [0.5, 2.0]
    """
    return reciprocal(sqrt(x))


class NanToNum(Elementwise):
    name = "nan_to_num"
    rule = "dX = dY · [X is finite]"
    keeps_finite = True
    save_inputs = True
    examples = (Example(lambda x: nan_to_num(x, nan=0.5), ((3, 4),)),
                Example(lambda x: nan_to_num(x), (np.array([1.0, np.nan, np.inf, -np.inf, -2.0]),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        a, t = ctx.attrs, x.dtype.type
        out = xp.where(xp.isnan(x), t(a["nan"]), x)
        out = xp.where(out == t(math.inf), t(a["posinf"]), out)
        return xp.where(out == t(-math.inf), t(a["neginf"]), out)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # torch's: the gradient passes where x was finite, none reaches a replaced NaN or infinity
        return (mask_mul(g, ctx.saved_inputs, "sel_finite"),)


@tensor_method("nan_to_num")
@implements(NanToNum, reference=None)
def nan_to_num(x: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Any:
    """x with NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (None: the dtype's largest and lowest
    finite values), as torch.nan_to_num; an integer tensor is returned as it is. The gradient passes where x is
    finite.

    >>> from rtxviz import Tensor
    >>> nan_to_num(Tensor.from_slice([float("nan"), float("inf"), 1.0], [3]), posinf=9.0).tolist()
    [0.0, 9.0, 1.0]
    """
    same = _same_if_integer(x)
    if same is not None:
        return same
    info = np.finfo(x.data.dtype)
    attrs = {"nan": float(nan), "posinf": float(info.max) if posinf is None else float(posinf),
             "neginf": float(info.min) if neginf is None else float(neginf)}
    return unary(NanToNum, x, attrs)


@tensor_method("clamp_min")
def clamp_min(x: Any, min: Any) -> Any:
    """x limited from below by `min`, a number or a tensor (torch.clamp_min): ``clamp(x, min=min)``.

    >>> from rtxviz import Tensor
    >>> clamp_min(Tensor.from_slice([-2.0, 0.5], [2]), 0.0).tolist()
    [0.0, 0.5]
    """
    if min is None:
        raise ValueError("clamp_min: min must be a number or a tensor, got None")
    return clamp(x, min=min)


@tensor_method("clamp_max")
def clamp_max(x: Any, max: Any) -> Any:
    """x limited from above by `max`, a number or a tensor (torch.clamp_max): ``clamp(x, max=max)``.

    >>> from rtxviz import Tensor
    >>> clamp_max(Tensor.from_slice([-2.0, 0.5], [2]), 0.0).tolist()
    [-2.0, 0.0]
    """
    if max is None:
        raise ValueError("clamp_max: max must be a number or a tensor, got None")
    return clamp(x, max=max)


@tensor_method("lerp")
def lerp(input: Any, end: Any, weight: Any) -> Any:
    """input + weight · (end - input), with broadcasting; `weight` a number or a tensor (torch.lerp).

    As torch computes it, for its bits: ``input + w·(end - input)`` where w < 0.5, else
    ``end - (end - input)·(1 - w)``; the gradients are torch's, (1 - w)·dY, w·dY and (end - input)·dY.

    >>> from rtxviz import Tensor
    >>> lerp(Tensor.from_slice([1.0, 2.0], [2]), Tensor.from_slice([3.0, 5.0], [2]), 0.25).tolist()
    [1.5, 2.75]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"lerp: input must be a Tensor, got {type(input).__name__}")
    if isinstance(input, Tensor) and input.data.dtype.kind != "f":
        raise DTypeError(f"lerp: needs a float input, got {input.dtype}")
    diff = sub(end, input)
    if not isinstance(weight, Tensor):
        w = float(weight)
        return add(input, mul_scalar(diff, w)) if w < 0.5 else sub(end, mul_scalar(diff, 1.0 - w))
    from .index import compare, where  # index imports this module

    low = add(input, mul(weight, diff))
    high = sub(end, mul(diff, rsub_scalar(weight, 1.0)))
    return where(compare(weight, 0.5, "__lt__"), low, high)
