"""The `linear` op, y = x @ Wᵀ + b with W laid out [out, in] as PyTorch's: one node instead of transpose +
matmul + add, and a weight gradient that comes out C-contiguous in W's own layout (so optimizers stream
over contiguous memory). Written on the engine's public Op/apply; backward uses differentiable ops, so
higher-order gradients work.

>>> from rtxviz import Tensor
>>> linear(Tensor.ones([2, 3]), Tensor.ones([4, 3]), Tensor.zeros([4])).tolist()
[[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]
"""

from __future__ import annotations

from typing import Any

from ..engine.errors import ShapeError
from ..engine.graph import Op, apply
from ..engine.tensor import Tensor


class Linear(Op):
    name = "linear"
    rule = "dX = dY @ W, dW = dYᵀ @ X, db = Σ dY"
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any, b: Any = None) -> Any:
        out = x @ w.T
        if b is not None:
            out += b
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        x, w = ctx.saved_inputs[0], ctx.saved_inputs[1]
        nxt = ctx.next
        gx = g.matmul(w) if nxt[0] is not None else None
        gw = gb = None
        need_b = len(nxt) > 2 and nxt[2] is not None
        if nxt[1] is not None or need_b:
            g2 = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
            if nxt[1] is not None:
                x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
                gw = g2.transpose(0, 1).matmul(x2)
            if need_b:
                gb = g2.sum(0)
        return (gx, gw, gb)[: len(nxt)]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Any:
    """x @ weightᵀ + bias for x [..., in], weight [out, in], bias [out] (PyTorch's F.linear)."""
    if x.ndim == 0 or weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(f"linear: input {tuple(x.shape)} does not fit weight {tuple(weight.shape)} "
                         "(expected input [..., in] and weight [out, in])")
    if bias is None:
        return apply(Linear, (x, weight))
    if bias.shape != (weight.shape[0],):
        raise ShapeError(f"linear: bias has shape {tuple(bias.shape)}, expected ({weight.shape[0]},)")
    return apply(Linear, (x, weight, bias))
