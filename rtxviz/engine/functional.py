"""Higher-order helpers over the differentiable backward: Jacobians, Hessians, vjp, jvp, hvp.

Shapes follow `torch.autograd.functional`: the Jacobian of f: x -> y is `y.shape + x.shape`, the Hessian
of a one-element f is `x.shape + x.shape`; `flatten=True` gives the 2-D matrix (y.numel(), x.numel()).
All rows come from one batched backward walk (`rtxviz.engine.batched`) rather than one backward per row.

>>> from rtxviz import Tensor
>>> x = Tensor.from_slice([1.0, 2.0, 3.0], [3], dtype="float64")
>>> HessianComputer.compute(lambda v: v.pow(2).sum(), x).tolist()
[[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .backward import grad, run_backward
from .batched import batched_vjp
from .errors import DTypeError, ShapeError
from .grad_mode import enable_grad
from .tensor import Tensor, as_tensor_like
from .variable import Variable

Fn = Callable[[Variable], Variable]


def _leaf(x: Any, where: str) -> Variable:
    """A fresh leaf that requires grad, over x's data (x: Variable, Tensor or array-like)."""
    t = x if isinstance(x, Tensor) else Tensor(x)
    if t.dtype.kind != "f":
        raise DTypeError(f"{where}: x must be a floating-point tensor, got dtype {t.dtype}")
    return Variable.from_tensor(t.tensor, requires_grad=True)


def _call(f: Fn, x: Variable, where: str) -> Variable:
    with enable_grad():
        y = f(x)
    if not isinstance(y, Tensor):
        raise TypeError(f"{where}: f must return a Variable, got {type(y).__name__}")
    return y


def _eye_rows(n: int, like: Any, shape: tuple[int, ...]) -> Any:
    """n one-hot cotangents of `shape`, stacked: (n, *shape)."""
    xp = like.xp
    return xp.eye(n, dtype=like.dtype).reshape((n, *shape))


def _rows(output: Variable, x: Variable, cotangents: Any, batched: bool = True) -> Any:
    """d<cot_i, output>/dx for every row i of `cotangents`: one batched walk when possible, else row by row."""
    if batched:
        got = batched_vjp(output, [x], cotangents)
        if got is not None:
            return got[0]
    xp = x.xp
    if not isinstance(output, Variable) or not output.requires_grad:
        return xp.zeros((cotangents.shape[0], *x.shape), dtype=x.dtype)
    rows = xp.zeros(cotangents.shape[:1] + tuple(x.shape), dtype=x.dtype)
    plan: dict = {}  # the graph is the same for every row: order and prune it once (see run_backward)
    outs, ins = [output], [x]
    for i in range(cotangents.shape[0]):
        found = run_backward(outs, [output._wrap(cotangents[i], None)], True, False, ins, True, plan)
        assert found is not None  # with inputs given, the walk returns their gradients
        (g,) = found
        if g is not None:
            rows[i] = g.data
    return rows


class JacobianComputer:
    """The Jacobian of f at x, as `torch.autograd.functional.jacobian` (the spec's `JacobianComputer`).

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 2.0, 3.0], [3], dtype="float64")
    >>> J = JacobianComputer.compute(lambda v: v.narrow(0, 0, 2) + v.narrow(0, 1, 2), x)  # doctest: +SKIP
    >>> JacobianComputer.compute(lambda v: v * v, x).tolist()
    [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 6.0]]
    """

    @staticmethod
    def compute(f: Fn, x: Any, flatten: bool = False, batched: bool = True) -> Tensor:
        """J[i..., j...] = d f(x)[i...] / d x[j...]; shape f(x).shape + x.shape, or (m, n) with `flatten`.

        `batched=False` computes the rows with one backward pass each (slower; same numbers).
        """
        xv = _leaf(x, "JacobianComputer.compute")
        y = _call(f, xv, "JacobianComputer.compute")
        m = int(y.data.size)
        rows = _rows(y, xv, _eye_rows(m, y, y.shape), batched)
        shape = (m, xv.data.size) if flatten else (*y.shape, *xv.shape)
        return Tensor._wrap(rows.reshape(shape))


class HessianComputer:
    """The Hessian of a one-element f at x, as `torch.autograd.functional.hessian` (the spec's helper).

    The gradient is computed once with `create_graph=True`; then every row of the Hessian comes from one
    batched walk of the gradient's own graph, seeded with the identity.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 2.0], [2], dtype="float64")
    >>> HessianComputer.compute(lambda v: (v * v * v).sum(), x).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """

    @staticmethod
    def compute(f: Fn, x: Any, flatten: bool = False, batched: bool = True) -> Tensor:
        """H[i..., j...] = d² f / dx[i...] dx[j...]; shape x.shape + x.shape, or (n, n) with `flatten`."""
        xv = _leaf(x, "HessianComputer.compute")
        y = _call(f, xv, "HessianComputer.compute")
        if y.data.size != 1:
            raise ShapeError(
                f"HessianComputer.compute: f must return one element, got shape {y.shape} "
                "(use JacobianComputer for vector outputs)"
            )
        n = int(xv.data.size)
        with enable_grad():
            if not y.requires_grad:
                g = None
            else:
                (g,) = grad(y, xv, create_graph=True, allow_unused=True)
        shape = (n, n) if flatten else (*xv.shape, *xv.shape)
        if g is None:
            return Tensor._wrap(xv.xp.zeros(shape, dtype=xv.dtype))
        rows = _rows(g, xv, _eye_rows(n, xv, xv.shape), batched)
        return Tensor._wrap(rows.reshape(shape))


def jacobian(f: Fn, x: Any, flatten: bool = False) -> Tensor:
    """`JacobianComputer.compute(f, x, flatten)`."""
    return JacobianComputer.compute(f, x, flatten)


def hessian(f: Fn, x: Any, flatten: bool = False) -> Tensor:
    """`HessianComputer.compute(f, x, flatten)`."""
    return HessianComputer.compute(f, x, flatten)


def _cotangent(v: Any, like: Tensor, where: str, what: str) -> Tensor:
    if v is None:
        if like.data.size != 1:
            raise ShapeError(f"{where}: {what} is required when the shape is {like.shape} (not one element)")
        return Tensor._wrap(like.xp.ones(like.shape, dtype=like.dtype))
    t = as_tensor_like(v, like)
    if t.shape != like.shape:
        raise ShapeError(f"{where}: {what} has shape {t.shape}, expected {like.shape}")
    return t


def vjp(f: Fn, x: Any, v: Any = None, create_graph: bool = False) -> tuple[Any, Any]:
    """(f(x), vᵀ J): the vector-Jacobian product, as `torch.autograd.functional.vjp`.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 2.0], [2], dtype="float64")
    >>> y, g = vjp(lambda t: t * t, x, Tensor.from_slice([1.0, 10.0], [2], dtype="float64"))
    >>> g.tolist()
    [2.0, 40.0]
    """
    xv = _leaf(x, "vjp")
    y = _call(f, xv, "vjp")
    vt = _cotangent(v, y, "vjp", "v")
    if not y.requires_grad:
        return _out(y, create_graph), Tensor._wrap(xv.xp.zeros(xv.shape, dtype=xv.dtype))
    with enable_grad():
        (g,) = grad(y, xv, grad_outputs=vt, create_graph=create_graph, allow_unused=True)
    return _out(y, create_graph), _result(g, xv, create_graph)


def jvp(f: Fn, x: Any, v: Any = None, create_graph: bool = False) -> tuple[Any, Any]:
    """(f(x), J v): the Jacobian-vector product, by the double-vjp trick (no forward mode needed).

    With u a dummy cotangent that requires grad, g(u) = uᵀ J is linear in u, and the vjp of g with v
    is (J v)ᵀ: two reverse passes give a forward-mode product.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 2.0], [2], dtype="float64")
    >>> y, t = jvp(lambda a: a * a, x, Tensor.from_slice([1.0, 10.0], [2], dtype="float64"))
    >>> t.tolist()
    [2.0, 40.0]
    """
    xv = _leaf(x, "jvp")
    y = _call(f, xv, "jvp")
    vt = _cotangent(v, xv, "jvp", "v")
    if not y.requires_grad:
        return _out(y, create_graph), Tensor._wrap(y.xp.zeros(y.shape, dtype=y.dtype))
    u = Variable.from_tensor(Tensor._wrap(y.xp.zeros(y.shape, dtype=y.dtype)), requires_grad=True)
    with enable_grad():
        (g,) = grad(y, xv, grad_outputs=u, create_graph=True, allow_unused=True)
        if g is None or not g.requires_grad:
            return _out(y, create_graph), Tensor._wrap(y.xp.zeros(y.shape, dtype=y.dtype))
        (jv,) = grad(g, u, grad_outputs=vt, create_graph=create_graph, allow_unused=True)
    return _out(y, create_graph), _result(jv, u, create_graph)


def hvp(f: Fn, x: Any, v: Any, create_graph: bool = False) -> tuple[Any, Any]:
    """(f(x), H v) for a one-element f, as `torch.autograd.functional.hvp` (H is symmetric, so also vᵀH).

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, 2.0], [2], dtype="float64")
    >>> y, hv = hvp(lambda a: (a * a * a).sum(), x, Tensor.from_slice([1.0, 1.0], [2], dtype="float64"))
    >>> hv.tolist()
    [6.0, 12.0]
    """
    xv = _leaf(x, "hvp")
    y = _call(f, xv, "hvp")
    if y.data.size != 1:
        raise ShapeError(f"hvp: f must return one element, got shape {y.shape}")
    vt = _cotangent(v, xv, "hvp", "v")
    zeros = Tensor._wrap(xv.xp.zeros(xv.shape, dtype=xv.dtype))
    if not y.requires_grad:
        return _out(y, create_graph), zeros
    with enable_grad():
        (g,) = grad(y, xv, create_graph=True, allow_unused=True)
        if g is None or not g.requires_grad:
            return _out(y, create_graph), zeros
        (hv,) = grad(g, xv, grad_outputs=vt, create_graph=create_graph, allow_unused=True)
    return _out(y, create_graph), _result(hv, xv, create_graph)


def _out(y: Tensor, create_graph: bool) -> Any:
    return y if create_graph else Tensor._wrap(y.data)


def _result(g: Any, like: Tensor, create_graph: bool) -> Any:
    if g is None:
        return Tensor._wrap(like.xp.zeros(like.shape, dtype=like.dtype))
    if create_graph:
        return g
    return Tensor._wrap(g.data)


__all__ = ["HessianComputer", "JacobianComputer", "hessian", "hvp", "jacobian", "jvp", "vjp"]
