"""In-place ops as PyTorch users know them: ``add_``, ``sub_``, ``mul_``, ``div_``, ``clamp_``, ``fill_``, ``zero_``,
``copy_``, ``masked_fill_``, ``x[key] = v`` and ``x += y`` (and -=, *=, /=).

Each writes into the tensor's own buffer (views of it see the change) and bumps the buffer's version, so that a
backward rule that saved the old value raises instead of reading the new one (`rtxviz.engine.versions`). On a
Variable while grad mode is on, the op is also recorded, as the out-of-place op it is, and the Variable becomes
that op's output (its ``grad_fn`` is the new node), so gradients flow through the write. As in PyTorch, a leaf
that requires grad refuses an in-place op outside ``no_grad``: its `.grad` would no longer be the gradient of the
value it holds. A recorded write also reaches every other Variable over the same buffer (a view of the written
tensor, or the base of a written view); their nodes do not include it, so using one of them afterwards in a
recorded op raises `InplaceError` (`versions.check_alias`) instead of giving a gradient without the write.

>>> import numpy as np
>>> from rtxviz import Variable
>>> w = Variable(np.array([1.0, 2.0]), requires_grad=True)
>>> h = w * 3.0
>>> h += 1.0
>>> h.grad_fn.name, h.tolist()
('add_scalar', [4.0, 7.0])
>>> h.sum().backward(); w.grad.tolist()
[3.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import versions as _versions
from ..device import xp_of
from ..errors import GraphError, ShapeError
from ..grad_mode import STATE
from ..graph import Op, apply
from ..sites import user_site
from ..tensor import Tensor, as_tensor_like
from . import arithmetic as _a
from . import index as _i
from . import unary as _u
from ._base import Example, constant, implements, tensor_method
from .broadcast import expand, sum_to
from .convert import to_device_dtype


def _refuse_leaf(x: Tensor, op: str) -> None:
    if x._is_var and x.requires_grad and x._node is None and STATE.enabled:
        name = getattr(x, "name", None)
        raise GraphError(
            f"{op}: a leaf Variable that requires grad ({'`' + name + '`, ' if name else ''}{x.dtype} of shape "
            f"{x.shape}) is being used in an in-place operation; its .grad would no longer be the gradient of the "
            "value it holds. Do it inside `with rtxviz.no_grad():` (as an optimizer does), on x.detach(), or "
            "out of place (x = x + ...)")


def _site(op: str) -> str:
    site = user_site(3)
    return f"{op} at {site.short}" if site is not None else op


def _apply_inplace(x: Tensor, op: str, compute: Callable[[Tensor], Any], *others: Any) -> Tensor:
    """Run `compute` (the out-of-place op) on x, write the result into x's buffer, bump its version and, when a
    graph was recorded, make x the recorded op's output."""
    _refuse_leaf(x, op)
    records = STATE.enabled and x._is_var and (x.requires_grad or any(getattr(o, "requires_grad", False)
                                                                       for o in others))
    if records:
        # the op reads x's current value: give it its own copy, since x's buffer is about to change under it
        var: Any = x  # a Variable: only Variables record
        source = var._wrap(x.data.copy(), var._node)
        source.requires_grad = x.requires_grad
        out = compute(source)
    else:
        out = compute(Tensor._wrap(x.data))
    result = out.data
    if result.shape != x.data.shape:
        raise ShapeError(f"{op}: the result has shape {tuple(result.shape)} but an in-place op must keep the "
                         f"tensor's shape {tuple(x.shape)}")
    if result.dtype != x.data.dtype:
        result = result.astype(x.data.dtype)
    x.data[...] = result
    _versions.bump(x.data, _site(op))
    if records and out._node is not None:
        var._node = out._node
        var.requires_grad = True
        _versions.note_recorded_write(x.data, out._node.id)  # its aliases' nodes are now out of date
    return x


# -- arithmetic ---------------------------------------------------------------------------------------------------
@tensor_method("add_", "__iadd__")
def add_(x: Tensor, other: Any, alpha: Any = 1.0) -> Tensor:
    """x += alpha · other, in place."""
    return _apply_inplace(x, "add_", lambda s: _a.add(s, other if alpha == 1 else _a.mul(other, alpha)), other)


@tensor_method("sub_", "__isub__")
def sub_(x: Tensor, other: Any, alpha: Any = 1.0) -> Tensor:
    """x -= alpha · other, in place."""
    return _apply_inplace(x, "sub_", lambda s: _a.sub(s, other if alpha == 1 else _a.mul(other, alpha)), other)


@tensor_method("mul_", "__imul__")
def mul_(x: Tensor, other: Any) -> Tensor:
    """x *= other, in place."""
    return _apply_inplace(x, "mul_", lambda s: _a.mul(s, other), other)


@tensor_method("div_", "__itruediv__")
def div_(x: Tensor, other: Any) -> Tensor:
    """x /= other, in place."""
    return _apply_inplace(x, "div_", lambda s: _a.div(s, other), other)


@tensor_method("clamp_", "clip_")
def clamp_(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """x clamped into [min, max], in place."""
    return _apply_inplace(x, "clamp_", lambda s: _u.clamp(s, min, max), min, max)


@tensor_method("masked_fill_")
def masked_fill_(x: Tensor, mask: Any, value: Any) -> Tensor:
    """x with `value` written where `mask` is True, in place."""
    return _apply_inplace(x, "masked_fill_", lambda s: _i.masked_fill(s, mask, value), value)


# -- overwriting --------------------------------------------------------------------------------------------------
class Overwrite(Op):
    """x's value replaced by src (broadcast to x's shape): src gets the gradient, x's old value none."""

    name = "overwrite"
    kind = "shape"
    keeps_finite = True
    rule = "dSrc = sum_to(dY, shape(Src)), dX = 0 (X's old value is gone)"
    examples = (Example(lambda x, s: apply(Overwrite, (x, s)), ((2, 3), (3,))),)

    @staticmethod
    def forward(ctx: Any, x: Any, src: Any) -> Any:
        ctx.state = src.shape
        return xp_of(x).broadcast_to(src, x.shape).astype(x.dtype, copy=True)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return None, (sum_to(g, ctx.state) if ctx.next[1] is not None else None)


@tensor_method("copy_")
@implements(Overwrite, reference=None)
def copy_(x: Tensor, src: Any) -> Tensor:
    """x's values replaced by `src` (broadcast to x's shape, cast to x's dtype and device), in place."""
    s = src if isinstance(src, Tensor) else as_tensor_like(src, x)
    if s.dtype != x.dtype or s.device != x.device:
        s = to_device_dtype(s, x.device, x.dtype)
    try:
        np.broadcast_shapes(tuple(s.shape), tuple(x.shape))
    except ValueError:
        raise ShapeError(f"copy_: the source of shape {tuple(s.shape)} does not broadcast to the tensor's shape "
                         f"{tuple(x.shape)}") from None
    return _apply_inplace(x, "copy_", lambda t: apply(Overwrite, (t, s)), s)


@tensor_method("fill_")
def fill_(x: Tensor, value: float) -> Tensor:
    """Every element set to `value`, in place."""
    return copy_(x, as_tensor_like(float(value) if x.dtype.kind == "f" else value, x))


@tensor_method("zero_")
def zero_(x: Tensor) -> Tensor:
    """Every element set to 0, in place."""
    return fill_(x, 0)


# -- x[key] = v ---------------------------------------------------------------------------------------------------
class SetItem(Op):
    """x with x[key] replaced by v (broadcast into the picked region): the out-of-place form of ``x[key] = v``."""

    name = "setitem"
    kind = "index"
    rule = "dX = dY with 0 at [key], dV = sum_to(dY[key], shape(V))"
    examples = (Example(lambda x, v: apply(SetItem, (x, v), {"key": (slice(0, 2), 1)}), ((3, 4), (2,))),
                Example(lambda x, v: apply(SetItem, (x, v), {"key": (1,)}), ((3, 2), ())))

    @staticmethod
    def forward(ctx: Any, x: Any, v: Any) -> Any:
        out = x.copy()
        out[ctx.attrs["key"]] = v
        ctx.state = v.shape
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        key = ctx.attrs["key"]
        gx = gv = None
        if ctx.next[0] is not None:
            zero = constant(xp_of(g.data).zeros((), dtype=g.data.dtype))
            gx = apply(SetItem, (g, zero), ctx.attrs)
        if ctx.next[1] is not None:
            picked = g[key]
            gv = sum_to(picked, ctx.state) if picked.shape != ctx.state else picked
        return gx, gv


@tensor_method("__setitem__")
@implements(SetItem, reference=None)
def setitem(x: Tensor, key: Any, value: Any) -> None:
    """``x[key] = value``: numpy/PyTorch basic and advanced indexing, value broadcast into the picked region."""
    v = value if isinstance(value, Tensor) else as_tensor_like(value, x)
    if v.dtype != x.dtype:
        v = to_device_dtype(v, None, x.dtype)
    norm_key, _basic = _i._norm_key(x, key)
    try:
        region = x.data[norm_key].shape
        np.broadcast_to(np.empty(v.shape, dtype=np.bool_), region)
    except (IndexError, ValueError) as exc:
        raise ShapeError(f"__setitem__: cannot write a value of shape {tuple(v.shape)} into x[{key!r}] of a tensor "
                         f"of shape {tuple(x.shape)} ({exc})") from None
    if v.shape != region:
        v = expand(v, region) if len(v.shape) <= len(region) else v
    _apply_inplace(x, "__setitem__", lambda s: apply(SetItem, (s, v), {"key": norm_key}), v)


# -- version counters ---------------------------------------------------------------------------------------------
def _version(x: Tensor) -> int:
    """How many times this tensor's buffer was modified in place (PyTorch's ``x._version``)."""
    return _versions.version(x.data)


Tensor._version = property(_version)  # type: ignore[method-assign,assignment]
