"""lstm_layer: one LSTM layer over a whole sequence as one op (its time loop in forward and in backward).

An LSTM written as a composite records ~15 ops per timestep, and each timestep's slice of the input projection
scatters its gradient into a zero tensor of the whole sequence (quadratic in the length). This op takes the input
projections of every timestep at once, ``xw = x·W_ihᵀ + b_ih + b_hh`` [T, N, 4H] (one matmul, made by the
caller), and runs the recurrence on raw arrays:

    i, f, g, o = σ(z_i), σ(z_f), tanh(z_g), σ(z_o),  z = xw_t + h_{t-1}·W_hhᵀ
    c_t = f·c_{t-1} + i·g,  h_t = o·tanh(c_t)  (·W_hrᵀ with a projection)

Its output is [T, N, P + H]: h_t in the first P features (P = H without a projection), c_t in the last H, so
that the caller reads the outputs, h_n and c_n as slices of one value. First-order backward is one helper op,
`lstm_layer_backward` (back-propagation through time on raw arrays, the weight gradients as one matmul over all
timesteps); a recorded backward (create_graph) rebuilds the layer from differentiable ops and differentiates
that, so every order is exact.
"""

from __future__ import annotations

from typing import Any

from ..backward import grad
from ..device import xp_of
from ..errors import GraphError, ShapeError
from ..grad_mode import STATE, enable_grad
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, implements
from .arithmetic import add, mul
from .linalg import matmul
from .shape import cat, narrow, reshape, stack, transpose
from .unary import sigmoid, tanh


def _sigmoid_(z: Any) -> Any:
    """σ(z) in place, as 0.5·tanh(z/2) + 0.5: stable on both tails and one transcendental pass."""
    xp = xp_of(z)
    z *= 0.5
    xp.tanh(z, out=z)
    z *= 0.5
    z += 0.5
    return z


def _check(op: str, xw: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, w_hr: Tensor | None) -> None:
    if xw.ndim != 3 or xw.shape[-1] % 4:
        raise ShapeError(f"{op}: xw must be [T, N, 4·H], got shape {xw.shape}")
    t, n, h4 = xw.shape
    hidden = h4 // 4
    p = hidden if w_hr is None else w_hr.shape[0]
    if tuple(w_hh.shape) != (h4, p):
        raise ShapeError(f"{op}: w_hh must be [4·H, P] = {(h4, p)}, got {w_hh.shape}")
    if w_hr is not None and tuple(w_hr.shape) != (p, hidden):
        raise ShapeError(f"{op}: w_hr must be [P, H] = {(p, hidden)}, got {w_hr.shape}")
    if tuple(h0.shape) != (n, p) or tuple(c0.shape) != (n, hidden):
        raise ShapeError(f"{op}: h0 must be [N, P] = {(n, p)} and c0 [N, H] = {(n, hidden)}, got {h0.shape} and "
                         f"{c0.shape}")


class LSTMLayer(Op):
    """Inputs (xw [T, N, 4H], h0 [N, P], c0 [N, H], w_hh [4H, P][, w_hr [P, H]]); output [T, N, P + H]."""

    name = "lstm_layer"
    kind = "nn"
    rule = ("z = X_t + h·W_hhᵀ, c' = σ(z_f)·c + σ(z_i)·tanh(z_g), h' = σ(z_o)·tanh(c'); backward through time: "
            "dc = dh'·o·(1 - tanh²c') + dc'·f, dz = [dc·g·i(1-i), dc·c·f(1-f), dc·i·(1-g²), dh'·tanh c'·o(1-o)], "
            "dh = dz·W_hh, dW_hh = Σ_t dzᵀ·h")
    save_inputs = True
    save_output = True
    examples = (
        Example(lambda xw, h0, c0, w: lstm_layer(xw, h0, c0, w), ((3, 2, 8), (2, 2), (2, 2), (8, 2))),
        Example(lambda xw, h0, c0, w, r: lstm_layer(xw, h0, c0, w, r),
                ((3, 2, 12), (2, 2), (2, 3), (12, 2), (2, 3))),
    )

    @staticmethod
    def forward(ctx: Any, xw: Any, h0: Any, c0: Any, w_hh: Any, w_hr: Any = None) -> Any:
        xp = xp_of(xw)
        steps, n, h4 = xw.shape
        hidden = h4 // 4
        p = w_hh.shape[1]
        out = xp.empty((steps, n, p + hidden), dtype=xw.dtype)
        gates = xp.empty_like(xw)  # the activated gates i, f, g, o of every step: what backward reads
        w_t = w_hh.T
        h, c = h0, c0
        for t in range(steps):
            z = gates[t]
            xp.matmul(h, w_t, out=z)
            z += xw[t]
            _sigmoid_(z[:, :2 * hidden])
            xp.tanh(z[:, 2 * hidden:3 * hidden], out=z[:, 2 * hidden:3 * hidden])
            _sigmoid_(z[:, 3 * hidden:])
            c_new = out[t, :, p:]
            xp.multiply(z[:, hidden:2 * hidden], c, out=c_new)
            c_new += z[:, :hidden] * z[:, 2 * hidden:3 * hidden]
            hr = xp.tanh(c_new)
            hr *= z[:, 3 * hidden:]
            if w_hr is None:
                out[t, :, :p] = hr
            else:
                xp.matmul(hr, w_hr.T, out=out[t, :, :p])
            h, c = out[t, :, :p], c_new
        ctx.state = gates
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        need = [e is not None for e in ctx.next]
        if STATE.enabled:
            # Recording (create_graph): differentiate the layer rebuilt from ops, so that the gradients are
            # functions of the inputs in turn.
            wanted = [t for t, yes in zip(inputs, need, strict=True) if yes]
            with enable_grad():
                rebuilt = lstm_layer_composite(*inputs)
            found = grad(rebuilt, wanted, grad_outputs=g, create_graph=True, allow_unused=True)
            it = iter(found)
            return tuple(next(it) if yes else None for yes in need)
        flat = apply(LSTMLayerBackward, (g, *inputs, ctx.output, Tensor._wrap(ctx.state)))
        grads: list[Any] = []
        start = 0
        for t, yes in zip(inputs, need, strict=True):
            size = 1
            for s in t.shape:
                size *= s
            grads.append(reshape(narrow(flat, 0, start, size), tuple(t.shape)) if yes else None)
            start += size
        return tuple(grads)


class LSTMLayerBackward(Op):
    """lstm_layer's first-order gradients, packed flat in the order of its inputs (xw, h0, c0, w_hh[, w_hr]).
    Inputs (dY, xw, h0, c0, w_hh[, w_hr], Y, gates). Only used where no graph is recorded, so it has no backward
    of its own."""

    name = "lstm_layer_backward"
    kind = "gradient"
    rule = "(first-order helper of lstm_layer; not differentiated)"
    differentiable = False
    examples = (
        Example(lambda xw, h0, c0, w: grad(lstm_layer(xw, h0, c0, w).sum(), [xw, w])[1],
                ((3, 2, 8), (2, 2), (2, 2), (8, 2))),
    )

    @staticmethod
    def forward(ctx: Any, g: Any, xw: Any, h0: Any, c0: Any, w_hh: Any, *rest: Any) -> Any:
        xp = xp_of(g)
        w_hr = rest[0] if len(rest) == 3 else None
        y, gates = rest[-2], rest[-1]
        steps, n, h4 = xw.shape
        hidden = h4 // 4
        p = w_hh.shape[1]
        dz_all = xp.empty_like(xw)
        dh_all = xp.empty((steps, n, p), dtype=g.dtype) if w_hr is not None else None
        dh = xp.zeros((n, p), dtype=g.dtype)
        dc = xp.zeros((n, hidden), dtype=g.dtype)
        for t in range(steps - 1, -1, -1):
            i = gates[t, :, :hidden]
            f = gates[t, :, hidden:2 * hidden]
            gg = gates[t, :, 2 * hidden:3 * hidden]
            o = gates[t, :, 3 * hidden:]
            c = y[t, :, p:]
            c_prev = y[t - 1, :, p:] if t > 0 else c0
            tc = xp.tanh(c)
            dh += g[t, :, :p]
            if w_hr is not None:
                dh_all[t] = dh
                dhr = dh @ w_hr
            else:
                dhr = dh
            dz = dz_all[t]
            # output gate, then the cell: dc += dhr·o·(1 - tanh² c)
            xp.multiply(dhr, tc, out=dz[:, 3 * hidden:])
            dz[:, 3 * hidden:] *= o * (1 - o)
            dhr = dhr * o
            tc *= tc
            xp.subtract(1, tc, out=tc)
            dhr *= tc
            dc += dhr
            dc += g[t, :, p:]
            xp.multiply(dc, gg * i * (1 - i), out=dz[:, :hidden])
            xp.multiply(dc, c_prev * f * (1 - f), out=dz[:, hidden:2 * hidden])
            xp.multiply(dc, i * (1 - gg * gg), out=dz[:, 2 * hidden:3 * hidden])
            dc *= f
            dh = dz @ w_hh
        # weight gradients as one matmul over all timesteps: Σ_t dz_tᵀ·h_{t-1}
        h_prev = xp.concatenate([h0[None], y[:-1, :, :p]], axis=0).reshape(steps * n, p)
        dw_hh = dz_all.reshape(steps * n, h4).T @ h_prev
        parts = [dz_all.ravel(), dh.ravel(), dc.ravel(), dw_hh.ravel()]
        if w_hr is not None:
            c_all = y[:, :, p:]
            hr = xp.tanh(c_all) * gates[:, :, 3 * hidden:]
            parts.append((dh_all.reshape(steps * n, p).T @ hr.reshape(steps * n, hidden)).ravel())
        return xp.concatenate(parts)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError("lstm_layer_backward: internal first-order helper, not differentiated")


def lstm_layer_composite(xw: Any, h0: Any, c0: Any, w_hh: Any, w_hr: Any = None) -> Any:
    """lstm_layer written with differentiable ops, step by step (what a recorded backward differentiates).

    >>> from rtxviz import Tensor
    >>> xw, h0 = Tensor.ones([2, 1, 4]), Tensor.zeros([1, 1])
    >>> a = lstm_layer(xw, h0, h0, Tensor.ones([4, 1])).tolist()
    >>> b = lstm_layer_composite(xw, h0, h0, Tensor.ones([4, 1])).tolist()
    >>> all(abs(u - v) < 1e-6 for u, v in zip(sum(sum(a, []), []), sum(sum(b, []), [])))
    True
    """
    hidden = xw.shape[-1] // 4
    h, c = h0, c0
    outs = []
    w_t = transpose(w_hh, 0, 1)
    for t in range(xw.shape[0]):
        z = add(narrow(xw, 0, t, 1)[0], matmul(h, w_t))
        i = sigmoid(narrow(z, 1, 0, hidden))
        f = sigmoid(narrow(z, 1, hidden, hidden))
        gg = tanh(narrow(z, 1, 2 * hidden, hidden))
        o = sigmoid(narrow(z, 1, 3 * hidden, hidden))
        c = add(mul(f, c), mul(i, gg))
        h = mul(o, tanh(c))
        if w_hr is not None:
            h = matmul(h, transpose(w_hr, 0, 1))
        outs.append(cat([h, c], 1))
    return stack(outs, 0)


@implements(LSTMLayer, reference=None)
def lstm_layer(xw: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor, w_hr: Tensor | None = None) -> Any:
    """One LSTM layer over a sequence, from its input projections xw = x·W_ihᵀ + b_ih + b_hh [T, N, 4H] (gates
    in PyTorch's order i, f, g, o): returns [T, N, P + H], h_t then c_t along the last dim.

    >>> from rtxviz import Tensor
    >>> y = lstm_layer(Tensor.zeros([5, 2, 12]), Tensor.zeros([2, 3]), Tensor.zeros([2, 3]), Tensor.zeros([12, 3]))
    >>> y.shape  # h_t and c_t of 5 steps, batch 2, hidden 3
    (5, 2, 6)
    """
    _check("lstm_layer", xw, h0, c0, w_hh, w_hr)
    inputs = (xw, h0, c0, w_hh) if w_hr is None else (xw, h0, c0, w_hh, w_hr)
    return apply(LSTMLayer, inputs)
