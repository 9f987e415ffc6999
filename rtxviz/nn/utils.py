"""Parameter utilities (PyTorch's semantics): clip_grad_norm_ and clip_grad_value_, parameters_to_vector and
vector_to_parameters.

They work on `.grad` arrays directly and record no graph. Gradients are replaced by scaled copies rather
than scaled in place: the engine may hand the same array to two leaves (e.g. both inputs of an add).

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> p = Parameter(Tensor.zeros([2]))
>>> p.grad = Parameter(Tensor.from_slice([3.0, 4.0], [2]), requires_grad=False)
>>> round(clip_grad_norm_([p], 1.0).item(), 4), [round(v, 4) for v in p.grad.tolist()]
(5.0, [0.6, 0.8])
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..engine.errors import ShapeError
from ..engine.ops.shape import cat
from ..engine.tensor import Tensor
from ..engine.variable import Variable


def _with_grads(parameters: Iterable[Variable] | Variable) -> list[Variable]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]  # type: ignore[list-item]  # a single Variable
    return [p for p in parameters if p.grad is not None]


def _set_grad(p: Variable, array: Any) -> None:
    p.grad = Variable.from_tensor(Tensor._wrap(array), requires_grad=False)


def clip_grad_norm_(parameters: Iterable[Variable] | Variable, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale all gradients together so their joint `norm_type`-norm is at most `max_norm` (`foreach`, PyTorch's
    choice of kernel, is accepted and has no effect).

    As PyTorch: total = norm of the per-parameter norms; every gradient is multiplied by
    min(1, max_norm / (total + 1e-6)). Returns the total norm (before clipping) as a 0-d Tensor.
    """
    params = _with_grads(parameters)
    norm_type = float(norm_type)
    if not params:
        return Tensor.zeros([])
    grads = [p.grad.data for p in params if p.grad is not None]  # all have one (_with_grads)
    xp = params[0].xp
    if math.isinf(norm_type):
        norms = [xp.abs(g).max() for g in grads]
        total = xp.stack(norms).max()
    else:
        norms = [xp.linalg.norm(g.reshape(-1), ord=norm_type) for g in grads]
        total = xp.linalg.norm(xp.stack(norms), ord=norm_type)
    total_f = float(total)
    if error_if_nonfinite and not math.isfinite(total_f):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is {total_f}")
    coef = min(float(max_norm) / (total_f + 1e-6), 1.0)
    for p, g in zip(params, grads, strict=True):
        _set_grad(p, g * g.dtype.type(coef))
    return Tensor._wrap(xp.asarray(total, dtype=grads[0].dtype))


def clip_grad_value_(parameters: Iterable[Variable] | Variable, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value] (`foreach` is accepted and has no effect)."""
    c = float(clip_value)
    for p in _with_grads(parameters):
        g = p.grad
        assert g is not None  # _with_grads keeps the parameters that have one
        _set_grad(p, g.xp.clip(g.data, -c, c))


def parameters_to_vector(parameters: Iterable[Variable]) -> Any:
    """Every parameter flattened and joined into one 1-D tensor, in order (an op, so gradients flow back).

    >>> from rtxviz.nn import Linear
    >>> parameters_to_vector(Linear(3, 2).parameters()).shape
    (8,)
    """
    params = list(parameters)
    if not params:
        raise ValueError("parameters_to_vector: no parameters given")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Variable]) -> None:
    """Copy consecutive slices of the 1-D `vec` into the parameters, in place and in order (the inverse of
    parameters_to_vector); the Parameter objects stay the same, so an optimizer keeps them.

    >>> from rtxviz import Tensor
    >>> from rtxviz.nn import Linear
    >>> lin = Linear(2, 1)
    >>> vector_to_parameters(Tensor.from_slice([1.0, 2.0, 3.0], [3]), lin.parameters())
    >>> lin.weight.tolist(), lin.bias.tolist()
    ([[1.0, 2.0]], [3.0])
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected a Tensor, got {type(vec).__name__}")
    if vec.ndim != 1:
        raise ShapeError(f"vector_to_parameters: expected a 1-D vector, got shape {tuple(vec.shape)}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.shape[0] != total:
        raise ShapeError(f"vector_to_parameters: the vector has {vec.shape[0]} elements, the parameters have "
                         f"{total} ({[tuple(p.shape) for p in params]})")
    offset = 0
    for p in params:
        n = p.numel()
        piece = vec.data[offset:offset + n].reshape(p.shape)
        p.data[...] = Tensor._wrap(piece).to(p.device, p.dtype).data
        offset += n
