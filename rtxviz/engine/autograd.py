"""`torch.autograd`'s spelling of the engine's autograd: `Function` (custom ops with static forward/backward and
`apply`), `grad`, `backward`, the grad-mode switches, `functional` (jacobian, hessian, vjp, jvp, hvp) and
`gradcheck`/`gradgradcheck`. Nothing lives here: each name is the engine's own object.

>>> import rtxviz
>>> x = rtxviz.tensor([3.0], requires_grad=True)
>>> rtxviz.autograd.grad((x * x).sum(), x)[0].tolist()
[6.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import functional
from .backward import grad, run_backward
from .grad_mode import enable_grad, no_grad, set_grad_enabled
from .gradcheck import gradcheck, gradgradcheck
from .graph import BackwardContext as FunctionCtx
from .graph import Function
from .tensor import Tensor
from .variable import Variable

__all__ = ["Function", "FunctionCtx", "Variable", "backward", "enable_grad", "functional", "grad", "gradcheck",
           "gradgradcheck", "no_grad", "set_grad_enabled"]


def backward(tensors: Tensor | Sequence[Tensor], grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Any = None) -> None:
    """Accumulate the gradients of `tensors` into the leaves' `.grad`, as `torch.autograd.backward`
    (``tensors.backward(grad_tensors)`` for several outputs at once); `inputs` limits which leaves get one."""
    outs: list[Any] = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is None:
        gouts: list[Any] = [None] * len(outs)
    elif isinstance(grad_tensors, Tensor):
        gouts = [grad_tensors]
    else:
        gouts = list(grad_tensors)
    if inputs is None:
        run_backward(outs, gouts, retain_graph, create_graph)
        return
    leaves: list[Any] = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    grads = run_backward(outs, gouts, retain_graph, create_graph, leaves, allow_unused=True)
    for leaf, g in zip(leaves, grads or (), strict=True):
        if g is not None:
            leaf.grad = g if leaf.grad is None else leaf.grad + g
