"""Index ops: the ops that pick elements by an index or a mask.

getitem (``x[...]``); the comparisons that make masks; where and masked_fill. A pick's gradient is scattered into
zeros (`GetItemBackward`, add.at semantics, so repeated indices accumulate), and that scatter's own backward picks
the elements again, so second and higher derivatives flow through every op here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..device import to_device, xp_of
from ..errors import DeviceError, DimError, DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor, as_tensor_like
from ._base import Example, constant, implements, tensor_method
from .broadcast import sum_to

# -- element pickers and their common adjoint ----------------------------------------------------------------
_cupyx: Any = None


def add_at(out: Any, key: Any, values: Any) -> None:
    """out[key] += values in place, repeated indices accumulating (numpy add.at; cupyx.scatter_add on GPUs).

    On raw arrays (of one device); `key` is anything numpy indexing takes (ints, slices, integer arrays).

    >>> import numpy as np
    >>> out = np.zeros(3)
    >>> add_at(out, (np.array([0, 2, 0]),), np.ones(3))
    >>> out.tolist()
    [2.0, 0.0, 1.0]
    """
    global _cupyx
    if type(out) is np.ndarray:
        np.add.at(out, key, values)
        return
    if _cupyx is None:
        import cupyx  # noqa: PLC0415 - only on GPU arrays

        _cupyx = cupyx
    _cupyx.scatter_add(out, key, values)


class GetItemBackward(Op):
    """The adjoint of picking elements: zeros of the source shape with the gradient added at the picks."""

    name = "getitem_backward"
    kind = "gradient"
    rule = "dG = dY[key]  (Y = zeros(shape) with G added at key)"
    examples = (Example(lambda g: _scatter(g, (slice(0, 2), 1), (3, 4), True), ((2,),)),
                Example(lambda g: _scatter(g, (_PICK.data,), (4, 2), False), ((3, 2),)))

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        a = ctx.attrs
        out = xp_of(g).zeros(a["shape"], dtype=g.dtype)
        if a["basic"]:
            out[a["key"]] = g  # basic indexing never picks an element twice
        else:
            add_at(out, a["key"], g)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(GetItem, (g,), {"key": ctx.attrs["key"], "basic": ctx.attrs["basic"]}),)


_PICK = Tensor(np.array([2, 0, 2]))  # an index with a repeat, for the examples


def _scatter(g: Any, key: Any, shape: tuple[int, ...], basic: bool) -> Any:
    return apply(GetItemBackward, (g,), {"key": key, "shape": shape, "basic": basic})


class GetItem(Op):
    name = "getitem"
    kind = "index"
    keeps_finite = True
    rule = "dX = zeros(shape(X)) with dY added at [key]"
    examples = (Example(lambda x: x[1:, ::2], ((3, 5),)), Example(lambda x: x[_PICK], ((4, 2),)),
                Example(lambda x: x[..., 1], ((2, 3, 2),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x[ctx.attrs["key"]]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (_scatter(g, ctx.attrs["key"], ctx.state, ctx.attrs["basic"]),)


def _index_array(op: str, value: Any, x: Any) -> Any:
    """An index (Tensor, array, list) as an int64 or bool array on x's device."""
    arr = value.data if isinstance(value, Tensor) else value
    if type(arr) is not np.ndarray and not hasattr(arr, "__cuda_array_interface__"):
        arr = np.asarray(arr)
        if arr.dtype.kind == "f" and arr.size == 0:
            arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iub":
        raise DTypeError(f"{op}: indices must be integers or bools, got dtype {arr.dtype}")
    if type(arr) is not type(x.data):
        arr = to_device(arr, x.device)
    elif type(arr) is not np.ndarray and arr.device.id != x.data.device.id:
        raise DeviceError(f"{op}: the index is on cuda:{arr.device.id} but the tensor on {x.device}")
    return arr


def _check_bounds(op: str, idx: Any, size: int, dim: int) -> None:
    """Raise a DimError naming the first index outside [-size, size) (numpy would wrap on GPUs)."""
    if idx.size == 0:
        return
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        value = int(idx[bad].reshape(-1)[0])
        raise DimError(f"{op}: index {value} is out of range for dim {dim} of size {size}")


def _norm_key(x: Any, key: Any) -> tuple[tuple, bool]:
    """Checked numpy key for x[key] (Tensors and lists become arrays; bool masks become their nonzero
    positions) and whether it is basic (ints, slices, None, Ellipsis only)."""
    if not isinstance(key, tuple):
        key = (key,)
    items: list[Any] = []
    basic = True
    consumed = 0
    ellipsis = False
    for k in key:
        if k is None or isinstance(k, slice):
            items.append(k)
            consumed += k is not None
        elif k is Ellipsis:
            if ellipsis:
                raise DimError("getitem: an index can only have a single ellipsis ('...')")
            ellipsis = True
            items.append(k)
        elif isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_):
            items.append(int(k))
            consumed += 1
        elif isinstance(k, Tensor | list | tuple | np.ndarray) or hasattr(k, "__cuda_array_interface__"):
            arr = _index_array("getitem", k, x)
            basic = False
            items.append(arr)
            consumed += arr.ndim if arr.dtype.kind == "b" else 1
        else:
            raise TypeError(f"getitem: unsupported index {k!r} of type {type(k).__name__}; use ints, slices, "
                            "None, ..., or integer/bool tensors")
    nd = x.ndim
    if consumed > nd:
        raise DimError(f"getitem: too many indices ({consumed}) for a tensor of {nd} dim(s) (shape {x.shape})")
    shape = x.shape
    out: list[Any] = []
    dim = 0
    for k in items:
        if k is None:
            out.append(k)
        elif k is Ellipsis:
            dim += nd - consumed
            out.append(k)
        elif isinstance(k, slice):
            out.append(k)
            dim += 1
        elif isinstance(k, int):
            size = shape[dim]
            if not -size <= k < size:
                raise DimError(f"getitem: index {k} is out of range for dim {dim} of size {size}")
            out.append(k)
            dim += 1
        elif k.dtype.kind == "b":
            want = shape[dim : dim + k.ndim]
            if k.shape != want:
                raise ShapeError(f"getitem: boolean mask of shape {k.shape} does not match dims {dim}.."
                                 f"{dim + k.ndim - 1} of the tensor (shape {shape}, those dims {want})")
            if k.ndim == 0:  # x[True]: numpy adds a dim of size 1 (or 0); keep the mask as is
                out.append(k)
            else:
                out.extend(k.nonzero())
            dim += k.ndim
        else:
            _check_bounds("getitem", k, shape[dim], dim)
            out.append(k.astype(np.int64, copy=False))
            dim += 1
    return tuple(out), basic


def reference_key(key: Sequence[Any]) -> tuple:
    """A reference file's getitem key (one entry per leading dim: an int, null for the whole dim, or
    [start, stop, step] with nulls allowed) as the Python index tuple it stands for.

    >>> reference_key([1, None, [None, -1, 2]])
    (1, slice(None, None, None), slice(None, -1, 2))
    """
    out: list[Any] = []
    for k in key:
        if k is None:
            out.append(slice(None))
        elif isinstance(k, list | tuple):
            if len(k) != 3:
                raise ShapeError(f"getitem: a slice entry of a key is [start, stop, step], got {list(k)!r}")
            out.append(slice(*k))
        elif isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_):
            out.append(int(k))
        else:
            raise TypeError(f"getitem: a key entry is an int, null or [start, stop, step], got {k!r}")
    return tuple(out)


@implements(GetItem, call=lambda x, key: getitem(x, reference_key(key)))
def getitem(x: Any, key: Any) -> Any:
    """x[key] with numpy/PyTorch semantics: ints, slices (negative steps too), None, ..., integer and bool
    tensors. The gradient is scattered back into zeros (repeated picks accumulate).

    >>> from rtxviz import Tensor
    >>> t = Tensor.arange(6).reshape(2, 3)
    >>> t[1, ::-1].tolist(), t[:, Tensor([0, 0])].tolist(), t[t > 3].tolist()
    ([5, 4, 3], [[0, 0], [3, 3]], [4, 5])
    """
    norm, basic = _norm_key(x, key)
    return apply(GetItem, (x,), {"key": norm, "basic": basic})


def iterate(x: Any) -> Any:
    if x.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(x.shape[0]):
        yield apply(GetItem, (x,), {"key": (i,), "basic": True})


tensor_method("__getitem__")(getitem)
tensor_method("__iter__")(iterate)


# -- comparisons -------------------------------------------------------------------------------------------
_COMPARE = frozenset({"__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"})


class Compare(Op):
    """An elementwise comparison (bool result, no gradient), as an op so that a tracer sees where a mask comes
    from: a graph-cache replay recomputes `x > 0` from the new x instead of reusing the captured mask."""

    name = "compare"
    kind = "comparison"
    differentiable = False
    rule = "no gradient (a bool result)"
    examples = (Example(lambda a, b: compare(a, b, "__gt__"), ((3, 4), (3, 4))),
                Example(lambda a: compare(a, 0.0, "__le__"), ((5,),)))

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any) -> Any:
        return getattr(a, ctx.attrs["name"])(b)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:  # pragma: no cover - never recorded: its inputs are plain Tensors
        return None, None


_COMPARE_ATTRS = {n: {"name": n} for n in _COMPARE}


@implements(Compare, reference=None)
def compare(a: Tensor, b: Any, name: str) -> Tensor:
    """`a <op> b` for a comparison dunder `name` ("__gt__", ...): a bool Tensor that records no gradient.

    >>> from rtxviz import Tensor
    >>> compare(Tensor.from_slice([-1.0, 2.0], [2]), 0.0, "__gt__").tolist()
    [False, True]
    """
    b = as_tensor_like(b, a)
    if b.data.dtype != a.data.dtype or type(b.data) is not type(a.data):
        return Tensor._wrap(getattr(a.data, name)(b.data))  # mixed dtypes: numpy's rules, as the operators had
    # Plain Tensors in: the result is a Tensor (never a Variable that requires grad), and no node is recorded.
    return apply(Compare, (Tensor._wrap(a.data), Tensor._wrap(b.data)), _COMPARE_ATTRS[name])


def nonzero_mask(mask: Any) -> Any:
    """A 0/1 (or any integer) mask as a bool one, by the `compare` op (so that a graph-cache replay recomputes
    it); a bool mask as it is. The reference files write masks as integer tensors (nonzero means true).

    >>> from rtxviz import Tensor
    >>> nonzero_mask(Tensor([0, 1, 2])).tolist()
    [False, True, True]
    """
    if not isinstance(mask, Tensor):
        mask = Tensor(mask)
    if mask.data.dtype.kind == "b":
        return mask
    return compare(mask, 0, "__ne__")


# -- where / masked_fill -----------------------------------------------------------------------------------
def _mask_array(op: str, mask: Any, like: Any) -> Any:
    dtype = getattr(mask.data if isinstance(mask, Tensor) else mask, "dtype", None)
    arr = _index_array(op, mask, like) if dtype is None or dtype.kind == "b" else None
    if arr is None or arr.dtype.kind != "b":
        got = dtype if dtype is not None else arr.dtype
        raise DTypeError(f"{op}: the condition/mask must be a bool tensor, got dtype {got}")
    return arr


class Where(Op):
    name = "where"
    kind = "index"
    keeps_finite = True
    examples = (Example(lambda a, b: where(a > 0, a, b), ((3, 4), (3, 4))),
                Example(lambda a, b: where(a > 0, a, b), ((2, 3), (3,))))
    rule = "dA = dY where cond else 0, dB = dY where not cond else 0"

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any) -> Any:
        out = xp_of(a).where(ctx.attrs["cond"].data, a, b)
        if a.shape != out.shape or b.shape != out.shape:
            ctx.state = (a.shape, b.shape)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        zero = constant(xp_of(g.data).zeros((), dtype=g.data.dtype))  # announced: a graph-cache replay bakes it in
        attrs = ctx.attrs
        ga = apply(Where, (g, zero), attrs) if ctx.next[0] is not None else None
        gb = apply(Where, (zero, g), attrs) if ctx.next[1] is not None else None
        if ctx.state is not None:
            ga = None if ga is None else sum_to(ga, ctx.state[0])
            gb = None if gb is None else sum_to(gb, ctx.state[1])
        return ga, gb


@implements(Where, call=lambda mask, a, b: where(nonzero_mask(mask), a, b))
def where(condition: Any, a: Any, b: Any) -> Any:
    """Elementwise `a` where `condition` else `b` (broadcasting); the gradient goes to the chosen side.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([-1.0, 2.0], [2])
    >>> where(x > 0, x, 0.0).tolist()
    [0.0, 2.0]
    """
    like = a if isinstance(a, Tensor) else (b if isinstance(b, Tensor) else None)
    if like is None:
        a = Tensor(a)
        like = a
    a, b = as_tensor_like(a, like), as_tensor_like(b, like)
    cond = _mask_array("where", condition, like)
    try:
        np.broadcast_shapes(cond.shape, a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"where: condition {cond.shape}, a {a.shape} and b {b.shape} do not broadcast") from None
    return apply(Where, (a, b), {"cond": Tensor._wrap(cond)})


@tensor_method("where")
def where_method(x: Any, condition: Any, other: Any) -> Any:
    """x.where(condition, other): x where condition else other (PyTorch's Tensor.where)."""
    return where(condition, x, other)


class MaskedFill(Op):
    name = "masked_fill"
    kind = "index"
    examples = (Example(lambda x: masked_fill(x, x < 0, 0.5), ((3, 4),)),)
    rule = "dX = dY where not mask else 0"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return xp_of(x).where(ctx.attrs["mask"].data, x.dtype.type(ctx.attrs["value"]), x)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        zero = constant(xp_of(g.data).zeros((), dtype=g.data.dtype))
        return (apply(Where, (zero, g), {"cond": ctx.attrs["mask"]}),)


@tensor_method("masked_fill")
@implements(MaskedFill, call=lambda x, mask, value: masked_fill(x, nonzero_mask(mask), value))
def masked_fill(x: Any, mask: Any, value: Any) -> Any:
    """x with `value` written where `mask` (a bool tensor broadcastable to x) is True.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([1.0, -2.0, 3.0], [3])
    >>> x.masked_fill(x < 0, 0.0).tolist()
    [1.0, 0.0, 3.0]
    """
    m = _mask_array("masked_fill", mask, x)
    try:
        shape = np.broadcast_shapes(m.shape, x.shape)
    except ValueError:
        shape = None
    if shape != x.shape:
        raise ShapeError(f"masked_fill: mask of shape {m.shape} does not broadcast to the tensor's shape {x.shape}")
    if isinstance(value, Tensor):
        if value.requires_grad:
            return where(Tensor._wrap(m), value, x)
        value = value.item()
    return apply(MaskedFill, (x,), {"mask": Tensor._wrap(m), "value": value})
