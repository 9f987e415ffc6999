"""lstm_layer, gru_layer, rnn_layer: one recurrent layer over a whole sequence as one op (its time loop in forward
and in backward).

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
that, so every order is exact. On numpy float32 arrays, and where the compiled module is there
(`rtxviz.accel`), each time step's element-wise work (the activations and the cell update, and their gradients)
is one call into C instead of ~12 ufunc calls on [N, H] slices; the matmuls stay numpy's. float64, cupy and
``RTXVIZ_NO_NATIVE=1`` take the ufunc path (tests/nn/test_lstm_native.py compares the two).

`gru_layer` (xw = x·W_ihᵀ + b_ih [T, N, 3H], b_hh its own input since r multiplies the n gate's hidden part)
and `rnn_layer` (tanh or relu) follow the same pattern.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import accel
from ..backward import grad
from ..device import xp_of
from ..errors import GraphError, ShapeError
from ..grad_mode import STATE, enable_grad
from ..graph import Op, apply
from ..tensor import Tensor
from ._base import Example, implements
from .arithmetic import add, mul, sub
from .linalg import matmul
from .shape import cat, narrow, reshape, stack, transpose
from .unary import relu, sigmoid, tanh


def _sigmoid_(z: Any) -> Any:
    """σ(z) = 1 / (1 + exp(-z)) in place (exp overflows to inf for z < -88 in float32, and 1 / inf is the
    right 0: the caller silences the warning)."""
    xp = xp_of(z)
    xp.negative(z, out=z)
    xp.exp(z, out=z)
    z += 1
    xp.reciprocal(z, out=z)
    return z


class _quiet_overflow:
    """numpy's errstate(over="ignore") (cupy raises no floating-point warnings: nothing to silence)."""

    def __init__(self, xp: Any) -> None:
        self.state = xp.errstate(over="ignore") if hasattr(xp, "errstate") else None

    def __enter__(self) -> None:
        if self.state is not None:
            self.state.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self.state is not None:
            self.state.__exit__(*exc)


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


def _native_lstm(*arrays: Any) -> bool:
    """Whether the compiled step kernels take these arrays: numpy float32 only (cupy's arrays never reach C;
    float64 keeps numpy's exact ufuncs), not empty (the kernels refuse zero sizes), and only where the compiled
    module was built (read at each call, so a test can switch it off)."""
    return accel.lstm_forward_step is not None and all(
        type(a) is np.ndarray and a.dtype == np.float32 and a.size > 0 for a in arrays if a is not None)


def _lstm_forward_native(xw: Any, h0: Any, c0: Any, w_hh: Any, w_hr: Any) -> tuple[Any, Any]:
    """LSTMLayer.forward's time loop with one C call per step after its matmul: (out, gates)."""
    steps, n, h4 = xw.shape
    hidden = h4 // 4
    p = w_hh.shape[1]
    xw = np.ascontiguousarray(xw)
    c0 = np.ascontiguousarray(c0)
    out = np.empty((steps, n, p + hidden), dtype=np.float32)
    gates = np.empty_like(xw)
    w_t = np.ascontiguousarray(w_hh.T)
    w_r = None if w_hr is None else np.ascontiguousarray(w_hr.T)
    # o·tanh(c) of the step (before the projection), contiguous: the next step's matmul reads it ~1.5x faster
    # than the strided slice of out that the kernel also writes it to
    hr = np.empty((n, hidden), dtype=np.float32)
    step = accel.lstm_forward_step
    h = h0
    for t in range(steps):
        np.matmul(h, w_t, out=gates[t])
        step(gates, xw, out, c0, hr, w_r is None, t, steps, n, hidden, p)
        if w_r is None:
            h = hr
        else:
            h = out[t, :, :p]
            np.matmul(hr, w_r, out=h)
    return out, gates


def _lstm_backward_native(g: Any, c0: Any, w_hh: Any, w_hr: Any, y: Any, gates: Any, dz_all: Any
                          ) -> tuple[Any, Any, Any]:
    """LSTMLayerBackward's time loop, one C call per step before its matmul: fills dz_all [T, N, 4H]; returns
    (dh0, dc0, the gradient of every step's h before the projection or None without one)."""
    steps, n, h4 = gates.shape
    hidden = h4 // 4
    p = w_hh.shape[1]
    g = np.ascontiguousarray(g)
    c0 = np.ascontiguousarray(c0)
    step = accel.lstm_backward_step
    dh = np.zeros((n, p), dtype=np.float32)
    dc = np.zeros((n, hidden), dtype=np.float32)
    dh_all = None
    if w_hr is None:
        for t in range(steps - 1, -1, -1):
            step(gates, y, c0, g, dh, True, dc, dz_all, t, steps, n, hidden, p)
            np.matmul(dz_all[t], w_hh, out=dh)
    else:
        dh_all = np.empty((steps, n, p), dtype=np.float32)
        dhr = np.empty((n, hidden), dtype=np.float32)
        for t in range(steps - 1, -1, -1):
            np.add(dh, g[t, :, :p], out=dh_all[t])
            np.matmul(dh_all[t], w_hr, out=dhr)
            step(gates, y, c0, g, dhr, False, dc, dz_all, t, steps, n, hidden, p)
            np.matmul(dz_all[t], w_hh, out=dh)
    return dh, dc, dh_all


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
        if _native_lstm(xw, h0, c0, w_hh, w_hr):
            out, ctx.state = _lstm_forward_native(xw, h0, c0, w_hh, w_hr)
            return out
        xp = xp_of(xw)
        steps, n, h4 = xw.shape
        hidden = h4 // 4
        p = w_hh.shape[1]
        out = xp.empty((steps, n, p + hidden), dtype=xw.dtype)
        gates = xp.empty_like(xw)  # the activated gates i, f, g, o of every step: what backward reads
        w_t = xp.ascontiguousarray(w_hh.T)  # BLAS reads a row-major right operand faster, 64 times over
        w_r = None if w_hr is None else xp.ascontiguousarray(w_hr.T)
        h, c = h0, c0
        with _quiet_overflow(xp):
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
                h_new = out[t, :, :p]
                if w_r is None:
                    xp.tanh(c_new, out=h_new)
                    h_new *= z[:, 3 * hidden:]
                else:
                    hr = xp.tanh(c_new)
                    hr *= z[:, 3 * hidden:]
                    xp.matmul(hr, w_r, out=h_new)
                h, c = h_new, c_new
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
        g4 = gates.reshape(steps, n, 4, hidden)
        c_all = y[:, :, p:]
        # The result, flat, in the order of the inputs: dxw, dh0, dc0, dW_hh[, dW_hr]; its pieces are written in
        # place (no concatenation at the end).
        sizes = [steps * n * h4, n * p, n * hidden, h4 * p] + ([p * hidden] if w_hr is not None else [])
        flat = xp.empty(sum(sizes), dtype=g.dtype)
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        dz_all = flat[:offsets[1]].reshape(steps, n, 4, hidden)
        if _native_lstm(g, h0, c0, w_hh, w_hr, y, gates):
            dh, dc, dh_all = _lstm_backward_native(g, c0, w_hh, w_hr, y, gates, dz_all.reshape(steps, n, h4))
            tc = xp.tanh(c_all) if w_hr is not None else None  # for dW_hr below
        else:
            dh, dc, tc, dh_all = _lstm_backward_numpy(g, c0, w_hr, g4, c_all, dz_all, w_hh)
        flat[offsets[1]:offsets[2]] = dh.ravel()
        flat[offsets[2]:offsets[3]] = dc.ravel()
        # weight gradients as one matmul over all timesteps: Σ_t dz_tᵀ·h_{t-1}
        dz_flat = dz_all.reshape(steps * n, h4)
        dw_hh = flat[offsets[3]:offsets[4]].reshape(h4, p)
        xp.matmul(dz_flat[n:].T, y[:-1, :, :p].reshape((steps - 1) * n, p), out=dw_hh)
        dw_hh += dz_flat[:n].T @ h0
        if w_hr is not None:
            hr = tc * g4[:, :, 3]  # o·tanh(c), what W_hr multiplied
            xp.matmul(dh_all.reshape(steps * n, p).T, hr.reshape(steps * n, hidden),
                      out=flat[offsets[4]:offsets[5]].reshape(p, hidden))
        return flat

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError("lstm_layer_backward: internal first-order helper, not differentiated")


def _lstm_backward_numpy(g: Any, c0: Any, w_hr: Any, g4: Any, c_all: Any, dz_all: Any, w_hh: Any
                         ) -> tuple[Any, Any, Any, Any]:
    """LSTMLayerBackward's time loop in ufuncs (float64, cupy, no compiled module): fills dz_all [T, N, 4, H];
    returns (dh0, dc0, tanh of every c, the gradient of every step's h before the projection or None)."""
    xp = xp_of(g)
    steps, n, _, hidden = g4.shape
    h4 = 4 * hidden
    p = g.shape[2] - hidden
    i, f, gg, o = g4[:, :, 0], g4[:, :, 1], g4[:, :, 2], g4[:, :, 3]
    # Everything but the incoming gradients, for all steps at once, into preallocated buffers (fresh large
    # temporaries cost a page fault per page): dz = dc·a[0:3] (i, f, g) and dhr·a[3] (o), dc += dhr·b, with
    # dhr the gradient of o·tanh(c).
    a = xp.empty_like(g4)
    tc = xp.tanh(c_all)
    tmp = xp.empty_like(tc)
    xp.subtract(1, i, out=tmp)
    tmp *= i
    xp.multiply(tmp, gg, out=a[:, :, 0])
    xp.subtract(1, f, out=tmp)
    tmp *= f
    xp.multiply(tmp[1:], c_all[:-1], out=a[1:, :, 1])
    xp.multiply(tmp[0], c0, out=a[0, :, 1])
    xp.multiply(gg, gg, out=tmp)
    xp.subtract(1, tmp, out=tmp)
    xp.multiply(tmp, i, out=a[:, :, 2])
    xp.subtract(1, o, out=tmp)
    tmp *= o
    xp.multiply(tmp, tc, out=a[:, :, 3])
    b = tmp
    xp.multiply(tc, tc, out=b)
    xp.subtract(1, b, out=b)
    b *= o
    g_c = g[:, :, p:]
    c_grad_at = g_c.reshape(steps, -1).any(axis=1).tolist()  # usually only c_n's step, or none
    dh_all: Any = xp.empty((steps, n, p), dtype=g.dtype) if w_hr is not None else None
    dh = xp.zeros((n, p), dtype=g.dtype)
    dc = xp.zeros((n, hidden), dtype=g.dtype)
    scratch = xp.empty((n, hidden), dtype=g.dtype)
    for t in range(steps - 1, -1, -1):
        dh += g[t, :, :p]
        if w_hr is not None:
            dh_all[t] = dh
            dhr = dh @ w_hr
        else:
            dhr = dh
        xp.multiply(dhr, b[t], out=scratch)
        dc += scratch
        if c_grad_at[t]:
            dc += g_c[t]
        dz = dz_all[t]
        xp.multiply(dc[:, None, :], a[t, :, :3], out=dz[:, :3])
        xp.multiply(dhr, a[t, :, 3], out=dz[:, 3])
        dc *= f[t]
        dh = dz.reshape(n, h4) @ w_hh
    return dh, dc, tc, dh_all


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


# -- GRU --------------------------------------------------------------------------------------------------------
def _check_gru(op: str, xw: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> None:
    if xw.ndim != 3 or xw.shape[-1] % 3:
        raise ShapeError(f"{op}: xw must be [T, N, 3·H], got shape {xw.shape}")
    _, n, h3 = xw.shape
    hidden = h3 // 3
    if tuple(w_hh.shape) != (h3, hidden):
        raise ShapeError(f"{op}: w_hh must be [3·H, H] = {(h3, hidden)}, got {w_hh.shape}")
    if b_hh is not None and tuple(b_hh.shape) != (h3,):
        raise ShapeError(f"{op}: b_hh must be [3·H] = {(h3,)}, got {b_hh.shape}")
    if tuple(h0.shape) != (n, hidden):
        raise ShapeError(f"{op}: h0 must be [N, H] = {(n, hidden)}, got {h0.shape}")


class GRULayer(Op):
    """Inputs (xw [T, N, 3H], h0 [N, H], w_hh [3H, H][, b_hh [3H]]); output [T, N, H], the h of every step."""

    name = "gru_layer"
    kind = "nn"
    rule = ("a = h·W_hhᵀ + b_hh, r = σ(X_r + a_r), z = σ(X_z + a_z), n = tanh(X_n + r·a_n), h' = (1 - z)·n + z·h; "
            "backward through time: dn = dh'·(1-z)·(1-n²), dX = [dn·a_n·r(1-r), dh'·(h-n)·z(1-z), dn], "
            "da = [dX_r, dX_z, dn·r], dh = dh'·z + da·W_hh, dW_hh = Σ_t daᵀ·h")
    save_inputs = True
    save_output = True
    examples = (
        Example(lambda xw, h0, w, b: gru_layer(xw, h0, w, b), ((3, 2, 6), (2, 2), (6, 2), (6,))),
        Example(lambda xw, h0, w: gru_layer(xw, h0, w), ((2, 3, 9), (3, 3), (9, 3))),
    )

    @staticmethod
    def forward(ctx: Any, xw: Any, h0: Any, w_hh: Any, b_hh: Any = None) -> Any:
        xp = xp_of(xw)
        steps, n, h3 = xw.shape
        hidden = h3 // 3
        out = xp.empty((steps, n, hidden), dtype=xw.dtype)
        # per step: r, z, n and a_n (the hidden projection of the n gate), what backward reads
        saved = xp.empty((steps, n, 4, hidden), dtype=xw.dtype)
        w_t = xp.ascontiguousarray(w_hh.T)
        h = h0
        with _quiet_overflow(xp):
            for t in range(steps):
                a = h @ w_t
                if b_hh is not None:
                    a += b_hh
                s = saved[t]
                # r and z: σ(X + a) for the first 2H columns
                pre = xw[t, :, :2 * hidden] + a[:, :2 * hidden]
                _sigmoid_(pre)
                s[:, 0] = pre[:, :hidden]
                s[:, 1] = pre[:, hidden:]
                s[:, 3] = a[:, 2 * hidden:]
                cand = s[:, 2]
                xp.multiply(s[:, 0], s[:, 3], out=cand)
                cand += xw[t, :, 2 * hidden:]
                xp.tanh(cand, out=cand)
                # h' = n + z·(h - n)
                h_new = out[t]
                xp.subtract(h, cand, out=h_new)
                h_new *= s[:, 1]
                h_new += cand
                h = h_new
        ctx.state = saved
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        need = [e is not None for e in ctx.next]
        if STATE.enabled:
            wanted = [t for t, yes in zip(inputs, need, strict=True) if yes]
            with enable_grad():
                rebuilt = gru_layer_composite(*inputs)
            found = grad(rebuilt, wanted, grad_outputs=g, create_graph=True, allow_unused=True)
            it = iter(found)
            return tuple(next(it) if yes else None for yes in need)
        flat = apply(GRULayerBackward, (g, *inputs, ctx.output, Tensor._wrap(ctx.state)))
        grads: list[Any] = []
        start = 0
        for t, yes in zip(inputs, need, strict=True):
            size = 1
            for s in t.shape:
                size *= s
            grads.append(reshape(narrow(flat, 0, start, size), tuple(t.shape)) if yes else None)
            start += size
        return tuple(grads)


class GRULayerBackward(Op):
    """gru_layer's first-order gradients, packed flat in the order of its inputs (xw, h0, w_hh[, b_hh]).
    Inputs (dY, xw, h0, w_hh[, b_hh], Y, saved gates). Only used where no graph is recorded."""

    name = "gru_layer_backward"
    kind = "gradient"
    rule = "(first-order helper of gru_layer; not differentiated)"
    differentiable = False
    examples = (
        Example(lambda xw, h0, w, b: grad(gru_layer(xw, h0, w, b).sum(), [xw, w, b])[1],
                ((3, 2, 6), (2, 2), (6, 2), (6,))),
    )

    @staticmethod
    def forward(ctx: Any, g: Any, xw: Any, h0: Any, w_hh: Any, *rest: Any) -> Any:
        xp = xp_of(g)
        has_bias = len(rest) == 3
        y, saved = rest[-2], rest[-1]
        steps, n, h3 = xw.shape
        hidden = h3 // 3
        r, z, cand, a_n = saved[:, :, 0], saved[:, :, 1], saved[:, :, 2], saved[:, :, 3]
        sizes = [steps * n * h3, n * hidden, h3 * hidden] + ([h3] if has_bias else [])
        flat = xp.empty(sum(sizes), dtype=g.dtype)
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        dx_all = flat[:offsets[1]].reshape(steps, n, 3, hidden)
        da_all = xp.empty((steps, n, 3, hidden), dtype=g.dtype)  # the gradient of a = h·W_hhᵀ + b_hh
        h_prev_all = xp.concatenate([h0[None], y[:-1]], axis=0)
        # step-independent factors, for all steps at once
        f_n = (1 - cand * cand) * (1 - z)       # dn_pre = dh'·f_n
        f_z = (h_prev_all - cand) * z * (1 - z)  # dz_pre = dh'·f_z
        f_r = a_n * r * (1 - r)                  # dr_pre = dn_pre·f_r
        dh = xp.zeros((n, hidden), dtype=g.dtype)
        for t in range(steps - 1, -1, -1):
            dh += g[t]
            dx = dx_all[t]
            da = da_all[t]
            xp.multiply(dh, f_n[t], out=dx[:, 2])
            xp.multiply(dh, f_z[t], out=dx[:, 1])
            xp.multiply(dx[:, 2], f_r[t], out=dx[:, 0])
            da[:, :2] = dx[:, :2]
            xp.multiply(dx[:, 2], r[t], out=da[:, 2])
            dh *= z[t]
            dh += da.reshape(n, h3) @ w_hh
        flat[offsets[1]:offsets[2]] = dh.ravel()
        da_flat = da_all.reshape(steps * n, h3)
        xp.matmul(da_flat.T, h_prev_all.reshape(steps * n, hidden),
                  out=flat[offsets[2]:offsets[3]].reshape(h3, hidden))
        if has_bias:
            da_flat.sum(axis=0, out=flat[offsets[3]:offsets[4]])
        return flat

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError("gru_layer_backward: internal first-order helper, not differentiated")


def gru_layer_composite(xw: Any, h0: Any, w_hh: Any, b_hh: Any = None) -> Any:
    """gru_layer written with differentiable ops, step by step (what a recorded backward differentiates).

    >>> from rtxviz import Tensor
    >>> xw, h0, w = Tensor.ones([2, 1, 3]), Tensor.zeros([1, 1]), Tensor.ones([3, 1])
    >>> a, b = gru_layer(xw, h0, w).tolist(), gru_layer_composite(xw, h0, w).tolist()
    >>> all(abs(u[0][0] - v[0][0]) < 1e-6 for u, v in zip(a, b))
    True
    """
    hidden = xw.shape[-1] // 3
    h = h0
    outs = []
    w_t = transpose(w_hh, 0, 1)
    for t in range(xw.shape[0]):
        x_t = narrow(xw, 0, t, 1)[0]
        a = matmul(h, w_t) if b_hh is None else add(matmul(h, w_t), b_hh)
        r = sigmoid(add(narrow(x_t, 1, 0, hidden), narrow(a, 1, 0, hidden)))
        z = sigmoid(add(narrow(x_t, 1, hidden, hidden), narrow(a, 1, hidden, hidden)))
        cand = tanh(add(narrow(x_t, 1, 2 * hidden, hidden), mul(r, narrow(a, 1, 2 * hidden, hidden))))
        h = add(cand, mul(z, sub(h, cand)))
        outs.append(h)
    return stack(outs, 0)


@implements(GRULayer, reference=None)
def gru_layer(xw: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None = None) -> Any:
    """One GRU layer over a sequence, from its input projections xw = x·W_ihᵀ + b_ih [T, N, 3H] (gates in
    PyTorch's order r, z, n; b_hh stays separate, since r multiplies the n gate's hidden part): returns the h of
    every step, [T, N, H].

    >>> from rtxviz import Tensor
    >>> gru_layer(Tensor.zeros([5, 2, 9]), Tensor.zeros([2, 3]), Tensor.zeros([9, 3])).shape
    (5, 2, 3)
    """
    _check_gru("gru_layer", xw, h0, w_hh, b_hh)
    inputs = (xw, h0, w_hh) if b_hh is None else (xw, h0, w_hh, b_hh)
    return apply(GRULayer, inputs)


# -- Elman RNN --------------------------------------------------------------------------------------------------
class RNNLayer(Op):
    """Inputs (xw [T, N, H], h0 [N, H], w_hh [H, H]); attrs nonlinearity ("tanh" | "relu"); output [T, N, H]."""

    name = "rnn_layer"
    kind = "nn"
    rule = ("h' = act(X_t + h·W_hhᵀ); backward through time: da = (dh' + da_next·W_hh)·act'(h'), dX_t = da, "
            "dW_hh = Σ_t daᵀ·h")
    save_inputs = True
    save_output = True
    examples = (
        Example(lambda xw, h0, w: rnn_layer(xw, h0, w), ((3, 2, 4), (2, 4), (4, 4))),
        Example(lambda xw, h0, w: rnn_layer(xw, h0, w, "relu"), ((3, 2, 4), (2, 4), (4, 4))),
    )

    @staticmethod
    def forward(ctx: Any, xw: Any, h0: Any, w_hh: Any) -> Any:
        xp = xp_of(xw)
        out = xp.empty_like(xw)
        w_t = xp.ascontiguousarray(w_hh.T)
        relu = ctx.attrs["nonlinearity"] == "relu"
        h = h0
        for t in range(xw.shape[0]):
            h_new = out[t]
            xp.matmul(h, w_t, out=h_new)
            h_new += xw[t]
            if relu:
                xp.maximum(h_new, 0, out=h_new)
            else:
                xp.tanh(h_new, out=h_new)
            h = h_new
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inputs = ctx.saved_inputs
        need = [e is not None for e in ctx.next]
        if STATE.enabled:
            wanted = [t for t, yes in zip(inputs, need, strict=True) if yes]
            with enable_grad():
                xw, h0, w_hh = inputs
                rebuilt = rnn_layer_composite(xw, h0, w_hh, ctx.attrs["nonlinearity"])
            found = grad(rebuilt, wanted, grad_outputs=g, create_graph=True, allow_unused=True)
            it = iter(found)
            return tuple(next(it) if yes else None for yes in need)
        flat = apply(RNNLayerBackward, (g, *inputs, ctx.output), ctx.attrs)
        grads: list[Any] = []
        start = 0
        for t, yes in zip(inputs, need, strict=True):
            size = 1
            for s in t.shape:
                size *= s
            grads.append(reshape(narrow(flat, 0, start, size), tuple(t.shape)) if yes else None)
            start += size
        return tuple(grads)


class RNNLayerBackward(Op):
    """rnn_layer's first-order gradients, packed flat in the order of its inputs (xw, h0, w_hh). Inputs (dY, xw,
    h0, w_hh, Y). Only used where no graph is recorded."""

    name = "rnn_layer_backward"
    kind = "gradient"
    rule = "(first-order helper of rnn_layer; not differentiated)"
    differentiable = False
    examples = (
        Example(lambda xw, h0, w: grad(rnn_layer(xw, h0, w).sum(), [xw, w])[1], ((3, 2, 4), (2, 4), (4, 4))),
    )

    @staticmethod
    def forward(ctx: Any, g: Any, xw: Any, h0: Any, w_hh: Any, y: Any) -> Any:
        xp = xp_of(g)
        steps, n, hidden = xw.shape
        sizes = [steps * n * hidden, n * hidden, hidden * hidden]
        flat = xp.empty(sum(sizes), dtype=g.dtype)
        da_all = flat[:sizes[0]].reshape(steps, n, hidden)
        # act'(h') for all steps: 1 - h'² (tanh) or [h' > 0] (relu)
        slope = (y > 0).astype(y.dtype) if ctx.attrs["nonlinearity"] == "relu" else 1 - y * y
        dh = xp.zeros((n, hidden), dtype=g.dtype)
        for t in range(steps - 1, -1, -1):
            dh += g[t]
            xp.multiply(dh, slope[t], out=da_all[t])
            dh = da_all[t] @ w_hh
        flat[sizes[0]:sizes[0] + sizes[1]] = dh.ravel()
        h_prev = xp.concatenate([h0[None], y[:-1]], axis=0).reshape(steps * n, hidden)
        xp.matmul(da_all.reshape(steps * n, hidden).T, h_prev,
                  out=flat[sizes[0] + sizes[1]:].reshape(hidden, hidden))
        return flat

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        raise GraphError("rnn_layer_backward: internal first-order helper, not differentiated")


def rnn_layer_composite(xw: Any, h0: Any, w_hh: Any, nonlinearity: str = "tanh") -> Any:
    """rnn_layer written with differentiable ops, step by step (what a recorded backward differentiates).

    >>> from rtxviz import Tensor
    >>> xw, h0, w = Tensor.ones([2, 1, 2]), Tensor.zeros([1, 2]), Tensor.ones([2, 2])
    >>> rnn_layer(xw, h0, w).tolist() == rnn_layer_composite(xw, h0, w).tolist()
    True
    """
    act = tanh if nonlinearity == "tanh" else relu
    h = h0
    outs = []
    w_t = transpose(w_hh, 0, 1)
    for t in range(xw.shape[0]):
        h = act(add(narrow(xw, 0, t, 1)[0], matmul(h, w_t)))
        outs.append(h)
    return stack(outs, 0)


@implements(RNNLayer, reference=None)
def rnn_layer(xw: Tensor, h0: Tensor, w_hh: Tensor, nonlinearity: str = "tanh") -> Any:
    """One Elman RNN layer over a sequence, from its input projections xw = x·W_ihᵀ + b_ih + b_hh [T, N, H]:
    returns the h of every step, [T, N, H]; nonlinearity "tanh" or "relu".

    >>> from rtxviz import Tensor
    >>> rnn_layer(Tensor.ones([4, 2, 3]), Tensor.zeros([2, 3]), Tensor.zeros([3, 3]), "relu").tolist()[0]
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"rnn_layer: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    if xw.ndim != 3:
        raise ShapeError(f"rnn_layer: xw must be [T, N, H], got shape {xw.shape}")
    _, n, hidden = xw.shape
    if tuple(w_hh.shape) != (hidden, hidden) or tuple(h0.shape) != (n, hidden):
        raise ShapeError(f"rnn_layer: w_hh must be [H, H] = {(hidden, hidden)} and h0 [N, H] = {(n, hidden)}, got "
                         f"{w_hh.shape} and {h0.shape}")
    return apply(RNNLayer, (xw, h0, w_hh), {"nonlinearity": nonlinearity})
