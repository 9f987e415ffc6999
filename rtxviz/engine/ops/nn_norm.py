"""softmax, log_softmax, layer_norm and dropout.

Rules read the saved output (softmax, log_softmax) so backward needs no recomputation. layer_norm keeps its
normalised input and 1/std from forward for a plain backward, and recomputes them with differentiable ops only
when backward itself is being recorded (create_graph), so first-order stays cheap and higher orders stay exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import random as _random
from ..device import device_of, to_device, xp_of
from ..dtypes import is_float
from ..errors import DTypeError, ShapeError
from ..grad_mode import STATE
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, constant, implements, norm_dim, tensor_method
from .arithmetic import add_scalar, mul, pow_scalar, sub
from .broadcast import sum_to
from .reduction import mean
from .reduction import sum as _sum
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



# -- dropout ---------------------------------------------------------------------------------------------------
class Dropout(Op):
    name = "dropout"
    kind = "nn"
    rule = "dX = dY · mask / (1 - p)"
    examples = (Example(lambda x: dropout(x, 0.5), ((4, 6),)),)  # the harness seeds every evaluation alike

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        p = ctx.attrs["p"]
        # Drawn on the CPU from rtxviz's generator: seeded, identical on numpy and cupy, and replayable by
        # restoring the generator state (checkpoint recomputation).
        keep = _random.generator().random(x.shape) >= p
        scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
        mask = keep.astype(x.dtype) * x.dtype.type(scale)
        if type(x).__module__ != "numpy":
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
