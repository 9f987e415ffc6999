"""numpy meets Tensors: a numpy value on the left of an operator, a numpy ufunc or a numpy function applied to a
Tensor runs the engine's op (so a Variable keeps its graph), or raises saying what to use instead.

Without this, ``np.float64(3) * x`` and ``np.ones(2) + x`` let numpy convert x to an array (through
``__array__``) and return an array: the gradient was silently lost. numpy hands ufunc calls that involve a
Tensor to ``Tensor.__array_ufunc__`` and calls of its public functions (np.sum, np.concatenate, ...) to
``Tensor.__array_function__``; both are defined here.

>>> import numpy as np
>>> from rtxviz import Variable
>>> x = Variable(np.array([1.0, 2.0]), requires_grad=True)
>>> y = np.float64(3.0) * np.exp(x)
>>> type(y).__name__, y.grad_fn.name
('Variable', 'mul')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor
from . import arithmetic as _a
from . import linalg as _l
from . import reduction as _r
from . import shape as _s
from . import unary as _u
from ._base import tensor_method
from .operators import eq, ge, gt, le, lt, ne, rdiv, rpow, rsub


def _swap(fn: Callable[[Any, Any], Any], reflected: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A binary ufunc's op: `fn(a, b)` when a is a Tensor, else the reflected form on b (b is then the Tensor)."""

    def call(a: Any, b: Any) -> Any:
        return fn(a, b) if isinstance(a, Tensor) else reflected(b, a)

    return call


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", str(fn))


#: numpy ufunc -> the engine op it runs (one or two operands, at least one a Tensor).
UFUNCS: dict[Any, Callable[..., Any]] = {
    np.add: _a.add, np.subtract: _swap(_a.sub, rsub), np.multiply: _a.mul, np.true_divide: _swap(_a.div, rdiv),
    np.power: _swap(_a.pow, rpow), np.matmul: _l.matmul, np.maximum: _a.maximum, np.minimum: _a.minimum,
    np.negative: _a.neg, np.positive: lambda x: x, np.exp: _u.exp, np.log: _u.log, np.sqrt: _u.sqrt,
    np.absolute: _u.abs, np.tanh: _u.tanh, np.sin: _u.sin, np.cos: _u.cos, np.square: _u.square,
    np.reciprocal: _u.reciprocal, np.less: _swap(lt, gt), np.less_equal: _swap(le, ge),
    np.greater: _swap(gt, lt), np.greater_equal: _swap(ge, le), np.equal: _swap(eq, eq),
    np.not_equal: _swap(ne, ne),
}
UFUNCS.update({np.tan: _u.tan, np.arctan: _u.atan, np.sinh: _u.sinh, np.cosh: _u.cosh, np.log1p: _u.log1p,
               np.expm1: _u.expm1, np.arctan2: _a.atan2, np.hypot: _a.hypot,
               np.floor_divide: _a.floor_divide, np.remainder: _a.remainder, np.fmod: _a.fmod})


def _reduction(op: Callable[..., Any], fn: str) -> Callable[..., Any]:
    """numpy's (a, axis=None, ..., keepdims=False) onto the op's (x, dim, keepdim); other keywords (out=, dtype=,
    where=) are refused."""

    def call(x: Any, axis: Any = None, **kwargs: Any) -> Any:
        extra = set(kwargs) - {"keepdims"}
        if extra:
            raise TypeError(f"numpy.{fn} on a rtxviz Tensor: the keyword(s) {sorted(extra)} are not supported; call "
                            f"the tensor's own method (x.{fn}(dim=..., keepdim=...))")
        return op(x, axis, keepdim=bool(kwargs.get("keepdims", False)))

    return call


#: numpy function -> the engine op it runs (numpy's own signature, the array first).
FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.sum: _reduction(_r.sum, "sum"), np.mean: _reduction(_r.mean, "mean"),
    np.max: _reduction(lambda x, d, keepdim: _r._values(_r.max(x, d, keepdim)), "max"),
    np.min: _reduction(lambda x, d, keepdim: _r._values(_r.min(x, d, keepdim)), "min"),
    np.amax: _reduction(_r.amax, "amax"), np.amin: _reduction(_r.amin, "amin"),
    np.prod: _reduction(_r.prod, "prod"), np.std: _reduction(_r.std, "std"),
    np.matmul: _l.matmul, np.dot: _l.matmul,
    np.reshape: lambda x, shape, **kw: _s.reshape(x, shape), np.transpose: lambda x, axes=None: (
        _s.permute(x, *axes) if axes is not None else _s.permute(x, *reversed(range(x.ndim)))),
    np.concatenate: lambda arrays, axis=0: _s.cat(list(arrays), dim=axis),
    np.stack: lambda arrays, axis=0: _s.stack(list(arrays), dim=axis),
    np.squeeze: lambda x, axis=None: _s.squeeze(x, axis), np.expand_dims: lambda x, axis: _s.unsqueeze(x, axis),
    np.clip: lambda x, a_min=None, a_max=None, **kw: _u.clamp(x, a_min, a_max),
    np.where: lambda cond, a, b: _s.where(cond, a, b),
}

#: numpy functions that read values without making a new differentiable value (predicates, shapes): they see the
#: tensors' arrays, as before, even for a Variable that requires grad.
READ_ONLY = frozenset({np.allclose, np.array_equal, np.array_equiv, np.isclose, np.shape, np.ndim, np.size,
                       np.any, np.all, np.isfinite, np.isnan, np.isinf, np.argmax, np.argmin, np.count_nonzero,
                       np.result_type, np.can_cast})


def _needs_grad(values: Any) -> bool:
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return False


def _arrays(values: Any) -> Any:
    """The arguments with every Tensor replaced by its array (on the host), for numpy's own implementation."""
    if isinstance(values, Tensor):
        return values._host()
    if isinstance(values, list | tuple):
        return type(values)(_arrays(v) for v in values)
    if isinstance(values, dict):
        return {k: _arrays(v) for k, v in values.items()}
    return values


@tensor_method("__array_ufunc__")
def array_ufunc(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """numpy ufuncs on Tensors (``np.exp(x)``, ``np.float64(2) * x``, ``np.ones(2) + x``) run the engine's op."""
    op = UFUNCS.get(ufunc)
    if method != "__call__" or op is None or kwargs:
        what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        why = (f"the keyword(s) {sorted(kwargs)} are not supported" if op is not None and method == "__call__"
               else "it is not an rtxviz op")
        raise TypeError(f"{what} on a rtxviz {type(self).__name__}: {why}; use the engine's op (Tensor methods, "
                        "rtxviz.nn.functional), or .numpy() / .detach() for plain values")
    return op(*inputs)


@tensor_method("__array_function__")
def array_function(self: Tensor, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """numpy functions on Tensors (np.sum, np.concatenate, ...) run the engine's op; a function without one
    raises when a Variable that requires grad takes part (its gradient would be lost), and otherwise computes
    on the arrays as numpy would."""
    op = FUNCTIONS.get(func)
    if op is not None:
        return op(*args, **kwargs)
    if func in READ_ONLY or not _needs_grad((args, kwargs)):
        return func(*_arrays(args), **_arrays(kwargs))
    raise TypeError(f"numpy.{_name(func)} on a rtxviz Variable that requires grad: numpy would return a plain array "
                    "and the gradient would be lost; use the engine's op (a Tensor method or rtxviz.nn.functional), "
                    "or call it on x.detach() when no gradient is wanted")
