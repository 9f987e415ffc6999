"""Linear algebra: matrix products (matmul, bmm, outer, linear), trace, and torch.linalg's inv, det, slogdet,
solve and cholesky, each with a backward written in differentiable ops (so second order works).

The torch.linalg names are here too: `inv`, `det`, `slogdet`, `solve`, `cholesky`.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

import numpy as np

from ...accel import add_row as _add_row  # None: numpy's +=
from ..device import xp_of
from ..errors import DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor, as_tensor_like
from ._base import Example, binary, constant, implements, tensor_method
from .arithmetic import add, mul, mul_scalar, neg
from .broadcast import batched_sum_to, sum_to
from .reduction import Sum


class MatMul(Op):
    name = "matmul"
    kind = "linalg"
    rule = "dA = dC @ Bᵀ, dB = Aᵀ @ dC"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any) -> Any:
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} and {b.shape}")
        ka = a.shape[-1]
        kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
        if ka != kb:
            raise ShapeError(
                f"matmul: inner dimensions differ: {a.shape} @ {b.shape} ({ka} != {kb})"
            )
        if a.ndim > 2 and b.ndim == 2:
            # (..., M, K) @ (K, N) as one 2-D product: one big GEMM instead of a loop of small ones.
            return (a.reshape(-1, ka) @ b).reshape(a.shape[:-1] + (b.shape[1],))
        return a @ b

    @staticmethod
    def specialize(attrs: Any, a: Any, b: Any) -> Any:
        if a.ndim == 0 or b.ndim == 0 or (a.ndim > 2 and b.ndim == 2):
            return None  # forward raises, or folds the leading dims
        return operator.matmul if a.shape[-1] == (b.shape[0] if b.ndim == 1 else b.shape[-2]) else None

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        need_a, need_b = ctx.next[0] is not None, ctx.next[1] is not None
        a_nd, b_nd = a.ndim, b.ndim
        if a_nd > 2 and b_nd == 2:
            return _folded_backward(a, b, g, need_a, need_b)
        if a_nd == 2 and b_nd == 1:
            # (M, K) @ (K,): dA = dC ⊗ B, dB = Aᵀ @ dC straight from the vector, without promoting it to a
            # matrix and back (two ops fewer, which a Hessian's row loop pays in every row)
            ga = matmul(g.unsqueeze(-1), b.reshape((1, b.shape[0]))) if need_a else None
            return ga, (matmul(_mT(a), g) if need_b else None)
        # Promote 1-D operands to matrices as matmul does, then undo the promotion on the gradients.
        a2 = a.reshape((1, a.shape[0])) if a_nd == 1 else a
        b2 = b.reshape((b.shape[0], 1)) if b_nd == 1 else b
        g2 = g
        if a_nd == 1 and b_nd == 1:
            g2 = g.reshape((1, 1))
        elif a_nd == 1:
            g2 = g.unsqueeze(-2)
        elif b_nd == 1:
            g2 = g.unsqueeze(-1)
        ga = gb = None
        if need_a:
            ga = matmul(g2, _mT(b2))
            ga = sum_to(ga, a2.shape) if ga.shape != a2.shape else ga
            if a_nd == 1:
                ga = ga.reshape(a.shape)
        if need_b:
            gb = matmul(_mT(a2), g2)
            gb = sum_to(gb, b2.shape) if gb.shape != b2.shape else gb
            if b_nd == 1:
                gb = gb.reshape(b.shape)
        return ga, gb

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        a, b = (t.data for t in ctx.saved_inputs)
        bsz = g.shape[0]
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        if a.ndim == 1 and b.ndim == 1:
            g2 = g.reshape((bsz, 1, 1))
        elif a.ndim == 1:
            g2 = g[..., None, :]
        elif b.ndim == 1:
            g2 = g[..., None]
        else:
            g2 = g
        ga = gb = None
        if ctx.next[0] is not None:
            ga = batched_sum_to(g2 @ b2.swapaxes(-1, -2), a2.shape).reshape((bsz, *a.shape))
        if ctx.next[1] is not None:
            gb = batched_sum_to(a2.swapaxes(-1, -2) @ g2, b2.shape).reshape((bsz, *b.shape))
        return ga, gb


def _folded_backward(a: Any, b: Any, g: Any, need_a: bool, need_b: bool) -> tuple:
    """Gradients of (..., M, K) @ (K, N) with the leading dims folded into rows: dA = dC @ Bᵀ,
    dB = A₂ᵀ @ dC₂ where A₂, dC₂ are A and dC as (rows, K) and (rows, N) matrices (no batched sum)."""
    k, n = b.shape
    g2 = g.reshape((-1, n))
    ga = matmul(g2, b.transpose(0, 1)).reshape(a.shape) if need_a else None
    gb = matmul(a.reshape((-1, k)).transpose(0, 1), g2) if need_b else None
    return ga, gb


def _mT(x: Any) -> Any:
    return x.transpose(-1, -2)


@tensor_method("matmul")
@implements(MatMul)
def matmul(a: Any, b: Any) -> Any:
    """Matrix product with numpy's rules (1-D operands promoted, batch dims broadcast).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([2, 3]).matmul(Tensor.ones([3, 4])).shape
    (2, 4)
    """
    return binary(MatMul, a, b)


class Linear(Op):
    """y = x @ Wᵀ + b, W laid out [out, in] as PyTorch's: one node instead of transpose + matmul + add, and a
    weight gradient that comes out C-contiguous in W's own layout."""

    name = "linear"
    kind = "nn"
    rule = "dX = dY @ W, dW = dYᵀ @ X, db = Σ dY"
    examples = (Example(lambda x, w, b: linear(x, w, b), ((3, 4), (2, 4), (2,))),
                Example(lambda x, w: linear(x, w), ((2, 3, 4), (5, 4))))
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any = None) -> Any:
        if x.ndim <= 2:
            return _linear_rows(x, w, b) if b is not None else x @ w.T
        out = (x.reshape(-1, x.shape[-1]) @ w.T).reshape(x.shape[:-1] + (w.shape[0],))  # one GEMM for all rows
        if b is not None:
            _add_bias(out, b)
        return out

    @staticmethod
    def specialize(attrs: Any, x: Any, w: Any, b: Any = None) -> Any:
        if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
            return None
        return _linear_rows if b is not None else _linear_nobias

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x, w = ctx.saved_inputs[0], ctx.saved_inputs[1]
        nxt = ctx.next
        gx = apply(MatMul, (g, w)) if nxt[0] is not None else None
        gw = gb = None
        need_b = len(nxt) > 2 and nxt[2] is not None
        if nxt[1] is not None or need_b:
            g2 = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
            if nxt[1] is not None:
                x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
                gw = apply(LinearWeightGrad, (g2, x2))
            if need_b:
                gb = apply(Sum, (g2,), _ROWS)
        return (gx, gw, gb)[: len(nxt)]

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        x, w = ctx.saved_inputs[0].data, ctx.saved_inputs[1].data
        nxt = ctx.next
        bsz, n_out = g.shape[0], w.shape[0]
        gx = g @ w if nxt[0] is not None else None
        g3 = g.reshape((bsz, -1, n_out))  # (B, rows, out)
        gw = g3.swapaxes(1, 2) @ x.reshape((-1, x.shape[-1])) if nxt[1] is not None else None
        gb = g3.sum(axis=1) if len(nxt) > 2 and nxt[2] is not None else None
        return (gx, gw, gb)[: len(nxt)]


_ROWS = {"dims": (0,), "keepdim": False}  # the bias gradient: a sum over the rows of dY


class LinearWeightGrad(Op):
    """Linear's weight gradient dW = dYᵀ @ X (dY [n, out], X [n, in]) as one op: the same product numpy runs for
    transpose + matmul (a GEMM reading dY transposed), one node fewer per layer. Its own backward is written in
    ops (linear and matmul), so higher derivatives flow through both operands."""

    name = "linear_weight_grad"
    kind = "gradient"
    rule = "dG = X @ dZᵀ, dX = G @ dZ  (Z = Gᵀ @ X)"
    save_inputs = True
    examples = (Example(lambda g, x: apply(LinearWeightGrad, (g, x)), ((3, 2), (3, 4))),
                Example(lambda g, x: apply(LinearWeightGrad, (g, x)), ((1, 5), (1, 1))))

    @staticmethod
    def forward(ctx: Any, g: Any, x: Any) -> Any:
        if g.ndim != 2 or x.ndim != 2 or g.shape[0] != x.shape[0]:
            raise ShapeError(f"linear_weight_grad: expected dY [n, out] and X [n, in], got shapes {g.shape} and "
                             f"{x.shape}")
        return g.T @ x  # _weight_grad, inline: eager pays no extra call

    @staticmethod
    def specialize(attrs: Any, g: Any, x: Any) -> Any:
        return _weight_grad if g.ndim == 2 and x.ndim == 2 and g.shape[0] == x.shape[0] else None

    @staticmethod
    def backward(ctx: Any, h: Any) -> tuple:
        g, x = ctx.saved_inputs
        nxt = ctx.next
        return (apply(Linear, (x, h)) if nxt[0] is not None else None,
                apply(MatMul, (g, h)) if nxt[1] is not None else None)

    @staticmethod
    def batched(ctx: Any, h: Any) -> tuple:
        g, x = (t.data for t in ctx.saved_inputs)
        nxt = ctx.next
        return (x @ h.swapaxes(-1, -2) if nxt[0] is not None else None,
                g @ h if nxt[1] is not None else None)


def _weight_grad(g: Any, x: Any) -> Any:
    return g.T @ x


def _linear_rows(x: Any, w: Any, b: Any) -> Any:
    """x @ wᵀ + b for a 2-D x."""
    out = x @ w.T
    _add_bias(out, b)
    return out


def _linear_nobias(x: Any, w: Any) -> Any:
    return x @ w.T


def _add_bias(out: Any, b: Any) -> None:
    if not (_add_row is not None and type(out) is np.ndarray and _add_row(out, b)):
        out += b  # what the compiled row kernel does in one call (the same single addition per element)


@tensor_method("linear")
@implements(Linear)
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Any:
    """x @ weightᵀ + bias for x [..., in], weight [out, in], bias [out] (PyTorch's F.linear).

    >>> from rtxviz import Tensor
    >>> linear(Tensor.ones([2, 3]), Tensor.ones([4, 3]), Tensor.ones([4])).tolist()[0]
    [4.0, 4.0, 4.0, 4.0]
    """
    if x.ndim == 0 or weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(f"linear: input {tuple(x.shape)} does not fit weight {tuple(weight.shape)} "
                         "(expected input [..., in] and weight [out, in])")
    if bias is None:
        return apply(Linear, (x, weight))
    if bias.shape != (weight.shape[0],):
        raise ShapeError(f"linear: bias has shape {tuple(bias.shape)}, expected ({weight.shape[0]},)")
    return apply(Linear, (x, weight, bias))


# -- trace, bmm, outer ----------------------------------------------------------------------------------------
def _operand(x: Any, like: Any = None) -> Tensor:
    return x if isinstance(x, Tensor) else as_tensor_like(x, like)


class Trace(Op):
    """The sum of the main diagonal x[i, i] of a matrix (not necessarily square)."""

    name = "trace"
    kind = "linalg"
    rule = "dX = dY · I (the identity of X's shape)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return xp_of(x).trace(x)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        n, m = ctx.state
        return (mul(g, constant(xp_of(g.data).eye(n, m, dtype=g.data.dtype))),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        n, m = ctx.state
        return (g[:, None, None] * xp_of(g).eye(n, m, dtype=g.dtype),)


@tensor_method("trace")
@implements(Trace)
def trace(x: Tensor) -> Any:
    """The sum of the diagonal of a 2-D tensor, square or not (torch.trace).

    >>> from rtxviz import Tensor
    >>> trace(Tensor.from_slice([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3])).item()
    6.0
    """
    x = _operand(x)
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a 2-D matrix, got shape {tuple(x.shape)}")
    return apply(Trace, (x,))


class Bmm(Op):
    """A batch of matrix products: a [B, n, m] @ b [B, m, p] -> [B, n, p] (no broadcasting)."""

    name = "bmm"
    kind = "linalg"
    rule = "dA = dC @ Bᵀ, dB = Aᵀ @ dC (per batch entry)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any) -> Any:
        return a @ b

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        ga = bmm(g, b.mT) if ctx.next[0] is not None else None
        gb = bmm(a.mT, g) if ctx.next[1] is not None else None
        return ga, gb

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        a, b = (t.data for t in ctx.saved_inputs)
        ga = g @ b.swapaxes(-1, -2) if ctx.next[0] is not None else None
        gb = a.swapaxes(-1, -2) @ g if ctx.next[1] is not None else None
        return ga, gb


@tensor_method("bmm")
@implements(Bmm)
def bmm(a: Tensor, b: Tensor) -> Any:
    """Batched matrix product of a [B, n, m] and b [B, m, p]: [B, n, p] (torch.bmm; batch sizes must agree).

    >>> from rtxviz import Tensor
    >>> bmm(Tensor.ones([2, 3, 4]), Tensor.ones([2, 4, 5])).shape
    (2, 3, 5)
    """
    a = _operand(a, b if isinstance(b, Tensor) else None)
    b = _operand(b, a)
    if a.ndim != 3 or b.ndim != 3:
        raise ShapeError(f"bmm: both operands must be 3-D [B, n, m] and [B, m, p], got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {tuple(a.shape)} and {tuple(b.shape)} "
                         f"({a.shape[0]} != {b.shape[0]})")
    if a.shape[2] != b.shape[1]:
        raise ShapeError(f"bmm: inner dimensions differ: {tuple(a.shape)} @ {tuple(b.shape)} "
                         f"({a.shape[2]} != {b.shape[1]})")
    return apply(Bmm, (a, b))


class Outer(Op):
    """The outer product of two vectors: out[i, j] = a[i] · b[j]."""

    name = "outer"
    kind = "linalg"
    rule = "dA = dC @ B, dB = dCᵀ @ A"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any) -> Any:
        return a[:, None] * b[None, :]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        ga = matmul(g, b) if ctx.next[0] is not None else None
        gb = matmul(a, g) if ctx.next[1] is not None else None
        return ga, gb

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        a, b = (t.data for t in ctx.saved_inputs)
        ga = g @ b if ctx.next[0] is not None else None
        gb = a @ g if ctx.next[1] is not None else None
        return ga, gb


@tensor_method("outer")
@implements(Outer)
def outer(a: Tensor, b: Tensor) -> Any:
    """The outer product of vectors a [n] and b [m]: [n, m] (torch.outer).

    >>> from rtxviz import Tensor
    >>> outer(Tensor.from_slice([1.0, 2.0], [2]), Tensor.from_slice([3.0, 4.0, 5.0], [3])).tolist()
    [[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]]
    """
    a = _operand(a, b if isinstance(b, Tensor) else None)
    b = _operand(b, a)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"outer: both operands must be 1-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return apply(Outer, (a, b))


# -- torch.linalg: inv, det, slogdet ------------------------------------------------------------------------------
def _square(op: str, a: Any, label: str = "A") -> int:
    """Check that `a` (a raw array) is a float (batch of) square matrices; return n."""
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: {label} must be a floating-point tensor, got dtype {a.dtype}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{op}: {label} must be a square matrix or a batch of them [.., n, n], "
                         f"got shape {tuple(a.shape)}")
    return int(a.shape[-1])


def _which(xp: Any, a: Any, fn: Any) -> str:
    """' (batch entry (i, j))': the first matrix of a batch on which `fn` fails, for an error message."""
    if a.ndim <= 2:
        return ""
    flat = a.reshape((-1, *a.shape[-2:]))
    for i in range(flat.shape[0]):
        try:
            fn(flat[i])
        except ValueError:
            return f" (batch entry {tuple(int(k) for k in np.unravel_index(i, a.shape[:-2]))})"
    return ""  # pragma: no cover - the batch failed as a whole only


def _inv_array(op: str, a: Any) -> Any:
    xp = xp_of(a)
    try:
        return xp.linalg.inv(a)
    except ValueError:  # numpy.linalg.LinAlgError
        raise ShapeError(f"{op}: the matrix is singular (not invertible){_which(xp, a, xp.linalg.inv)}, "
                         f"A of shape {tuple(a.shape)}") from None


def _swap(a: Any) -> Any:
    return a.swapaxes(-1, -2)


def _bcast_last2(g: Any) -> Any:
    return g[..., None, None]


class LinalgInv(Op):
    """The inverse of a square matrix (or of each in a batch)."""

    name = "linalg_inv"
    kind = "linalg"
    rule = "dA = -A⁻ᵀ @ dY @ A⁻ᵀ"
    save_output = True

    @staticmethod
    def forward(ctx: Any, a: Any) -> Any:
        _square("linalg_inv", a)
        return _inv_array("linalg_inv", a)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        yt = ctx.output.mT
        return (neg(matmul(matmul(yt, g), yt)),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        yt = _swap(ctx.out_data)
        return (-(yt @ g @ yt),)


@tensor_method("inverse")
@implements(LinalgInv)
def linalg_inv(A: Tensor) -> Any:
    """The inverse of A [.., n, n] (torch.linalg.inv); a singular matrix raises ShapeError.

    >>> from rtxviz import Tensor
    >>> linalg_inv(Tensor.from_slice([2.0, 0.0, 0.0, 4.0], [2, 2])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    return apply(LinalgInv, (_operand(A),))


class LinalgDet(Op):
    """The determinant of a square matrix (or of each in a batch)."""

    name = "linalg_det"
    kind = "linalg"
    rule = "dA = dY · det(A) · A⁻ᵀ"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, a: Any) -> Any:
        _square("linalg_det", a)
        return xp_of(a).linalg.det(a)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (a,) = ctx.saved_inputs
        s = mul(g, ctx.output)
        return (mul(s.unsqueeze(-1).unsqueeze(-1), linalg_inv(a).mT),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        a = ctx.saved_inputs[0].data
        return (_bcast_last2(g * ctx.out_data) * _swap(_inv_array("linalg_det", a)),)


@tensor_method("det")
@implements(LinalgDet)
def linalg_det(A: Tensor) -> Any:
    """The determinant of A [.., n, n] (torch.linalg.det): a tensor of A's batch shape.

    >>> from rtxviz import Tensor
    >>> linalg_det(Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2])).item()
    -2.0
    """
    return apply(LinalgDet, (_operand(A),))


class LinalgSlogdet(Op):
    """log |det A| of a square matrix (or of each in a batch): torch.linalg.slogdet(A)[1]."""

    name = "linalg_slogdet"
    kind = "linalg"
    rule = "dA = dY · A⁻ᵀ (of log|det A|; the sign has no gradient)"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, a: Any) -> Any:
        _square("linalg_slogdet", a)
        return xp_of(a).linalg.slogdet(a)[1]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        (a,) = ctx.saved_inputs
        return (mul(g.unsqueeze(-1).unsqueeze(-1), linalg_inv(a).mT),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        a = ctx.saved_inputs[0].data
        return (_bcast_last2(g) * _swap(_inv_array("linalg_slogdet", a)),)


@implements(LinalgSlogdet)
def linalg_slogdet(A: Tensor) -> Any:
    """log |det A| of A [.., n, n]: the logabsdet of torch.linalg.slogdet (`slogdet` gives the sign too).

    >>> from rtxviz import Tensor
    >>> round(linalg_slogdet(Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2], dtype="float64")).item(), 6)
    0.693147
    """
    return apply(LinalgSlogdet, (_operand(A),))


class SlogdetSign(Op):
    """The sign of det A (-1, 0 or 1) as slogdet gives it: a value with no gradient, as in PyTorch."""

    name = "slogdet_sign"
    kind = "linalg"
    differentiable = False
    keeps_finite = True
    rule = "no gradient (the sign of det A is piecewise constant)"
    examples = (Example(lambda a: slogdet(a).sign, ((3, 3),)), Example(lambda a: slogdet(a)[0], ((2, 2, 2),)))

    @staticmethod
    def forward(ctx: Any, a: Any) -> Any:
        _square("slogdet", a)
        return xp_of(a).linalg.slogdet(a)[0]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:  # pragma: no cover - never recorded: its input is a plain Tensor
        return (None,)


class Slogdet(NamedTuple):
    """What `slogdet` returns, as torch.linalg.slogdet: (sign, logabsdet)."""

    sign: Any
    logabsdet: Any


@tensor_method("slogdet")
@implements(SlogdetSign, reference=None)
def slogdet(A: Tensor) -> Slogdet:
    """(sign, logabsdet) of det A for A [.., n, n], as torch.linalg.slogdet: det A = sign · exp(logabsdet).
    The sign is a plain Tensor (no gradient); logabsdet is recorded (`linalg_slogdet`).

    >>> from rtxviz import Tensor
    >>> sign, logabsdet = slogdet(Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2], dtype="float64"))
    >>> sign.item(), round(logabsdet.item(), 6)
    (-1.0, 0.693147)
    """
    A = _operand(A)
    return Slogdet(apply(SlogdetSign, (Tensor._wrap(A.data),)), linalg_slogdet(A))



# -- torch.linalg: solve, cholesky ----------------------------------------------------------------------------
def _vector_rhs(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> bool:
    """PyTorch's rule: B is a (batch of) vector(s) when it is 1-D, or when its shape is A's without the last dim."""
    return len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1 and b_shape == a_shape[:-1])


def _solve_array(op: str, a: Any, bm: Any) -> Any:
    """X with A X = B for raw A [.., n, n] and B [.., n, k], their batch dims broadcast."""
    xp = xp_of(a)
    try:
        batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    except ValueError:
        raise ShapeError(f"{op}: the batch dims of A {tuple(a.shape)} and B {tuple(bm.shape)} do not broadcast "
                         f"({tuple(a.shape[:-2])} and {tuple(bm.shape[:-2])})") from None
    if a.shape[:-2] != batch:
        a = xp.broadcast_to(a, batch + a.shape[-2:])
    if bm.shape[:-2] != batch:
        bm = xp.broadcast_to(bm, batch + bm.shape[-2:])
    try:
        return xp.linalg.solve(a, bm)
    except ValueError:  # numpy.linalg.LinAlgError
        raise ShapeError(f"{op}: the matrix A is singular (not invertible)"
                         f"{_which(xp, a, xp.linalg.inv)}, A of shape {tuple(a.shape)}") from None


class LinalgSolve(Op):
    """X with A X = B: A [.., n, n], B [.., n, k] (batch dims broadcast) or a vector B [n] / [.., n]."""

    name = "linalg_solve"
    kind = "linalg"
    rule = "dB = solve(Aᵀ, dX), dA = -dB @ Xᵀ"
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any) -> Any:
        n = _square("linalg_solve", a)
        vec = _vector_rhs(a.shape, b.shape)
        bm = b[..., None] if vec else b
        if bm.ndim < 2 or bm.shape[-2] != n:
            raise ShapeError(f"linalg_solve: B of shape {tuple(b.shape)} does not fit A of shape {tuple(a.shape)} "
                             f"(expected B [.., {n}, k] or [{n}])")
        x = _solve_array("linalg_solve", a, bm)
        return x[..., 0] if vec else x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        a, b = ctx.saved_inputs
        gb = linalg_solve(a.mT, g)  # the same vector / matrix case as forward: g has X's shape
        ga = None
        if ctx.next[0] is not None:
            x = ctx.output
            if _vector_rhs(a.shape, b.shape):
                ga = neg(mul(gb.unsqueeze(-1), x.unsqueeze(-2)))
            else:
                ga = neg(matmul(gb, x.mT))
            ga = sum_to(ga, a.shape)
        return ga, (sum_to(gb, b.shape) if ctx.next[1] is not None else None)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        a, b = (t.data for t in ctx.saved_inputs)
        vec = _vector_rhs(a.shape, b.shape)
        gbm = _solve_array("linalg_solve", _swap(a), g[..., None] if vec else g)
        ga = gb = None
        if ctx.next[0] is not None:
            x = ctx.out_data
            ga = batched_sum_to(-(gbm @ _swap(x[..., None] if vec else x)), a.shape)
        if ctx.next[1] is not None:
            gb = batched_sum_to(gbm[..., 0] if vec else gbm, b.shape)
        return ga, gb


@implements(LinalgSolve)
def linalg_solve(A: Tensor, B: Tensor) -> Any:
    """X with A X = B (torch.linalg.solve): A [.., n, n]; B [.., n, k] with batch dims broadcasting against A's,
    or a vector B [n] (or [.., n], A's shape without its last dim). A singular A raises ShapeError.

    >>> from rtxviz import Tensor
    >>> linalg_solve(Tensor.from_slice([2.0, 0.0, 0.0, 4.0], [2, 2]), Tensor.from_slice([1.0, 1.0], [2])).tolist()
    [0.5, 0.25]
    """
    A = _operand(A, B if isinstance(B, Tensor) else None)
    return apply(LinalgSolve, (A, _operand(B, A)))


class LinalgCholesky(Op):
    """The lower Cholesky factor L of a symmetric positive-definite A = L Lᵀ (only A's lower triangle is read)."""

    name = "linalg_cholesky"
    kind = "linalg"
    rule = "dA = L⁻ᵀ Φ L⁻¹, Φ = ½ (M + tril(M, -1)ᵀ), M = tril(Lᵀ @ dL)"
    save_output = True

    @staticmethod
    def forward(ctx: Any, a: Any) -> Any:
        _square("linalg_cholesky", a)
        xp = xp_of(a)
        try:
            return xp.linalg.cholesky(a)
        except ValueError:  # numpy.linalg.LinAlgError
            raise ShapeError(f"linalg_cholesky: the matrix is not positive definite"
                             f"{_which(xp, a, xp.linalg.cholesky)}, A of shape {tuple(a.shape)}") from None

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        # PyTorch's cholesky_backward, with its triangular solves done by solve (numpy has no solve_triangular).
        low = ctx.output
        lower, strict = _tril_masks(low.data)
        lt = low.mT
        m = mul(matmul(lt, g), constant(lower))
        phi = mul_scalar(add(m, mul(m, constant(strict)).mT), 0.5)  # symmetric: M's lower part mirrored, ½ diag
        z = linalg_solve(lt, phi)  # L⁻ᵀ Φ
        return (linalg_solve(lt, z.mT).mT,)  # (L⁻ᵀ Zᵀ)ᵀ = Z L⁻¹

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        lt = _swap(ctx.out_data)
        lower, strict = _tril_masks(ctx.out_data)
        m = (lt @ g) * lower
        phi = 0.5 * (m + _swap(m * strict))
        z = _solve_array("linalg_cholesky", lt, phi)
        return (_swap(_solve_array("linalg_cholesky", lt, _swap(z))),)


def _tril_masks(like: Any) -> tuple[Any, Any]:
    """The lower-triangle masks (diagonal included, and excluded) of `like`'s matrices, as arrays of its dtype."""
    xp, n = xp_of(like), like.shape[-1]
    ones = xp.ones((n, n), dtype=like.dtype)
    return xp.tril(ones), xp.tril(ones, -1)


@tensor_method("cholesky")
@implements(LinalgCholesky)
def linalg_cholesky(A: Tensor, upper: bool = False) -> Any:
    """The Cholesky factor of a symmetric positive-definite A [.., n, n] (torch.linalg.cholesky): the lower L with
    A = L Lᵀ, or with `upper` its transpose U (A = Uᵀ U). A matrix that is not positive definite raises ShapeError.

    >>> from rtxviz import Tensor
    >>> linalg_cholesky(Tensor.from_slice([4.0, 2.0, 2.0, 5.0], [2, 2])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    low = apply(LinalgCholesky, (_operand(A),))
    return low.mT if upper else low


inv = linalg_inv
det = linalg_det
solve = linalg_solve
cholesky = linalg_cholesky


# -- torch's fixed-rank spellings of the matrix product, composed of matmul / bmm (no op of their own) ------------
def _ranks(op: str, a: Any, b: Any, want: tuple[int, int], names: str) -> tuple[Tensor, Tensor]:
    """The two operands of `op` as tensors, checked to have the ranks `want` (torch refuses others)."""
    a = _operand(a, b if isinstance(b, Tensor) else None)
    b = _operand(b, a)
    if (a.ndim, b.ndim) != want:
        raise ShapeError(f"{op}: expected {names}, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.data.dtype != b.data.dtype:
        raise DTypeError(f"{op}: both operands must have the same dtype, got {a.dtype} and {b.dtype}")
    return a, b


@tensor_method("dot")
def dot(input: Any, tensor: Any) -> Any:
    """The inner product of two 1-D tensors of one length and dtype, a 0-d tensor (torch.dot).

    >>> from rtxviz import Tensor
    >>> dot(Tensor.from_slice([1.0, 2.0], [2]), Tensor.from_slice([3.0, 4.0], [2])).item()
    11.0
    """
    a, b = _ranks("dot", input, tensor, (1, 1), "two 1-D tensors")
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"dot: the vectors' lengths differ: {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


@tensor_method("mm")
def mm(input: Any, mat2: Any) -> Any:
    """The product of two matrices [n, m] @ [m, p] (torch.mm; no broadcasting, no other ranks).

    >>> from rtxviz import Tensor
    >>> mm(Tensor.ones([2, 3]), Tensor.ones([3, 4])).shape
    (2, 4)
    """
    a, b = _ranks("mm", input, mat2, (2, 2), "two 2-D matrices [n, m] and [m, p]")
    if a.shape[1] != b.shape[0]:
        raise ShapeError(f"mm: inner dimensions differ: {tuple(a.shape)} @ {tuple(b.shape)} "
                         f"({a.shape[1]} != {b.shape[0]})")
    return matmul(a, b)


@tensor_method("mv")
def mv(input: Any, vec: Any) -> Any:
    """The product of a matrix [n, m] and a vector [m]: a vector [n] (torch.mv).

    >>> from rtxviz import Tensor
    >>> mv(Tensor.ones([2, 3]), Tensor.ones([3])).tolist()
    [3.0, 3.0]
    """
    a, b = _ranks("mv", input, vec, (2, 1), "a 2-D matrix [n, m] and a 1-D vector [m]")
    if a.shape[1] != b.shape[0]:
        raise ShapeError(f"mv: the matrix {tuple(a.shape)} and the vector {tuple(b.shape)} do not fit "
                         f"({a.shape[1]} != {b.shape[0]})")
    return matmul(a, b)


def _scaled_sum(op: str, input: Any, product: Any, beta: Any, alpha: Any) -> Any:
    """beta · input + alpha · product, input broadcast to the product's shape (never beyond it); with beta 0 the
    input is not read, so a NaN or inf in it does not reach the result (torch's rule for addmm and its kin)."""
    if alpha != 1:
        product = mul_scalar(product, float(alpha))
    if beta == 0:
        return product
    input = _operand(input, product)
    try:
        fits = np.broadcast_shapes(tuple(input.shape), tuple(product.shape)) == tuple(product.shape)
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: input of shape {tuple(input.shape)} does not broadcast to the product's shape "
                         f"{tuple(product.shape)}")
    return add(input if beta == 1 else mul_scalar(input, float(beta)), product)


@tensor_method("addmm")
def addmm(input: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
    """beta · input + alpha · (mat1 @ mat2), input broadcast to [n, p] (torch.addmm).

    >>> from rtxviz import Tensor
    >>> addmm(Tensor.ones([2]), Tensor.ones([2, 3]), Tensor.ones([3, 2]), alpha=2).tolist()
    [[7.0, 7.0], [7.0, 7.0]]
    """
    return _scaled_sum("addmm", input, mm(mat1, mat2), beta, alpha)


@tensor_method("baddbmm")
def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
    """beta · input + alpha · bmm(batch1, batch2), input broadcast to [B, n, p] (torch.baddbmm).

    >>> from rtxviz import Tensor
    >>> baddbmm(Tensor.zeros([1, 2]), Tensor.ones([3, 1, 4]), Tensor.ones([3, 4, 2])).shape
    (3, 1, 2)
    """
    return _scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha)
