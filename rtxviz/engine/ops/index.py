"""Index ops: the ops that pick elements by an index or a mask, and the ones that scatter values by one.

getitem (``x[...]``), gather, scatter_add, index_add; the comparisons that make masks; where and masked_fill.
Picking and scattering are each other's adjoints: a pick's gradient is scattered into zeros (`GetItemBackward`,
add.at semantics, so repeated indices accumulate), a scatter's gradient is picked (`GetItem`), and each of the two
rules is itself an op whose backward is the other, so second and higher derivatives flow through every op here.
Index arrays built from an index (the aranges that pair with a gather index) are made by forward and kept in
``ctx.state``, so that a graph-cache replay rebuilds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..creation import multinomial
from ..device import cupyx_module, to_device, xp_of
from ..errors import DeviceError, DimError, DTypeError, ShapeError
from ..graph import Op, TapeNode, apply
from ..tensor import Tensor, as_tensor_like
from ._base import Example, constant, implements, norm_dim, promote, tensor_method
from .arithmetic import mul_scalar
from .broadcast import sum_to

# -- element pickers and their common adjoint ----------------------------------------------------------------


def add_at(out: Any, key: Any, values: Any) -> None:
    """out[key] += values in place, repeated indices accumulating (numpy add.at; cupyx.scatter_add on GPUs).

    On raw arrays (of one device); `key` is anything numpy indexing takes (ints, slices, integer arrays).

    >>> import numpy as np
    >>> out = np.zeros(3)
    >>> add_at(out, (np.array([0, 2, 0]),), np.ones(3))
    >>> out.tolist()
    [2.0, 0.0, 1.0]
    """
    if type(out) is np.ndarray:
        np.add.at(out, key, values)
        return
    cupyx_module().scatter_add(out, key, values)


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


# -- gather / scatter_add / index_add -------------------------------------------------------------------------
def _along_key(index: Any, dim: int) -> tuple:
    """The advanced-index key that pairs `index` with positions along `dim` and with each element's own position
    in every other dim: ``x[key][i, j, k] = x[i, index[i, j, k], k]`` for dim 1 (PyTorch's gather)."""
    xp = xp_of(index)
    nd = index.ndim
    key = []
    for d in range(nd):
        if d == dim:
            key.append(index)
        else:
            shape = [1] * nd
            shape[d] = index.shape[d]
            key.append(xp.arange(index.shape[d]).reshape(shape))
    return tuple(key)


def _int_index(op: str, index: Any, x: Any) -> Any:
    """An integer index (Tensor, array, list) as an int64 array on x's device: the array passed in when it is
    one already (a graph-cache capture binds it by identity)."""
    idx = _index_array(op, index, x)
    if idx.dtype.kind == "b":
        raise DTypeError(f"{op}: index must be an integer tensor, got bool")
    return idx.astype(np.int64, copy=False)


def _check_range(op: str, idx: Any, size: int, dim: int, shape: tuple[int, ...]) -> None:
    """Raise a DimError naming the first index outside [0, size) (PyTorch takes no negative indices here)."""
    if idx.size == 0:
        return
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        raise DimError(f"{op}: index {int(idx[bad].reshape(-1)[0])} is out of range for dim {dim} of size {size} "
                       f"(shape {shape})")


def _along_shapes(op: str, x: Any, d: int, idx: Any, other: str = "input") -> None:
    """PyTorch's rule for gather and scatter_add: index has x's rank and fits in x in every dim but `d`."""
    if idx.ndim != x.ndim:
        raise ShapeError(f"{op}: index must have the {other}'s number of dims ({x.ndim}, shape {x.shape}), "
                         f"got shape {idx.shape}")
    for k in range(x.ndim):
        if k != d and idx.shape[k] > x.shape[k]:
            raise ShapeError(f"{op}: index of shape {idx.shape} is larger than the {other} (shape {x.shape}) "
                             f"in dim {k}")


class Gather(Op):
    name = "gather"
    kind = "index"
    keeps_finite = True
    rule = "dX = zeros(shape(X)) with dY added at index along dim (repeated indices add up)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        key = _along_key(ctx.attrs["index"].data, ctx.attrs["dim"])
        ctx.state = (x.shape, key)
        return x[key]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        shape, key = ctx.state
        return (_scatter(g, key, shape, False),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        shape, key = ctx.state
        out = xp_of(g).zeros((g.shape[0], *shape), dtype=g.dtype)
        add_at(out, (slice(None), *key), g)
        return (out,)


@tensor_method("gather")
@implements(Gather, call=lambda x, index, dim: gather(x, dim, index))
def gather(x: Any, dim: int, index: Any) -> Any:
    """The values of `x` at `index` along `dim` (torch.gather): ``out[i][j] = x[i][index[i][j]]`` for dim 1.
    `index` (int64) has x's rank and is no larger than x in the other dims; the output has its shape. Repeated
    indices are allowed and their gradients add up.

    >>> from rtxviz import Tensor
    >>> x = Tensor.arange(6).reshape(2, 3)
    >>> x.gather(1, Tensor([[2, 0], [1, 1]])).tolist()
    [[2, 0], [4, 4]]
    """
    d = norm_dim("gather", dim, x.ndim)
    idx = _int_index("gather", index, x)
    if x.ndim == 0:  # PyTorch: a 0-d tensor gathers with a 0-d index, which must be 0
        if idx.ndim != 0:
            raise ShapeError(f"gather: a 0-d input takes a 0-d index, got shape {idx.shape}")
        _check_range("gather", idx, 1, 0, x.shape)
        return apply(GetItem, (x,), {"key": (), "basic": True})
    _along_shapes("gather", x, d, idx)
    _check_range("gather", idx, x.shape[d], d, x.shape)
    return apply(Gather, (x,), {"dim": d, "index": Tensor._wrap(idx)})


class ScatterAdd(Op):
    name = "scatter_add"
    kind = "index"
    rule = "dX = dY, dSrc = gather(dY, dim, index)"

    @staticmethod
    def forward(ctx: Any, x: Any, src: Any) -> Any:
        key = _along_key(ctx.attrs["index"].data, ctx.attrs["dim"])
        ctx.state = key
        out = x.copy()
        add_at(out, key, src)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        gs = apply(GetItem, (g,), {"key": ctx.state, "basic": False}) if ctx.next[1] is not None else None
        return g, gs

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        return g, g[(slice(None), *ctx.state)]


@tensor_method("scatter_add")
@implements(ScatterAdd, call=lambda x, index, src, dim: scatter_add(x, dim, index, src))
def scatter_add(x: Any, dim: int, index: Any, src: Any) -> Any:
    """`x` with each ``src[i][j]`` added at position ``index[i][j]`` along `dim` (torch.scatter_add; for dim 1,
    ``out[i][index[i][j]] += src[i][j]``); repeated indices add up. `index` (int64) has x's rank, fits in x in
    the other dims and in `src` in every dim (src's extra elements are ignored, as in PyTorch).

    >>> from rtxviz import Tensor
    >>> x = Tensor.zeros([2, 3])
    >>> x.scatter_add(1, Tensor([[0, 0], [2, 1]]), Tensor.ones([2, 2])).tolist()
    [[2.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    """
    src = as_tensor_like(src, x)
    d = norm_dim("scatter_add", dim, x.ndim)
    idx = _int_index("scatter_add", index, x)
    if x.ndim == 0:
        raise DimError("scatter_add: the input must have at least 1 dim (unsqueeze a 0-d tensor first)")
    _along_shapes("scatter_add", x, d, idx)
    if src.ndim != idx.ndim or any(i > s for i, s in zip(idx.shape, src.shape, strict=True)):
        raise ShapeError(f"scatter_add: index of shape {idx.shape} does not fit in src of shape {src.shape} "
                         "(same number of dims, no larger in any)")
    if src.shape != idx.shape:  # PyTorch reads only src's leading part
        src = apply(GetItem, (src,), {"key": tuple(slice(0, n) for n in idx.shape), "basic": True})
    _check_range("scatter_add", idx, x.shape[d], d, x.shape)
    return apply(ScatterAdd, (x, src), {"dim": d, "index": Tensor._wrap(idx)})


class IndexAdd(Op):
    name = "index_add"
    kind = "index"
    rule = "dX = dY, dSource = alpha · index_select(dY, dim, index)"

    @staticmethod
    def forward(ctx: Any, x: Any, source: Any) -> Any:
        a = ctx.attrs
        key = (slice(None),) * a["dim"] + (a["index"].data,)
        ctx.state = key
        out = x.copy()
        alpha = a["alpha"]
        add_at(out, key, source if alpha == 1 else source * alpha)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        gs = None
        if ctx.next[1] is not None:
            gs = apply(GetItem, (g,), {"key": ctx.state, "basic": False})
            alpha = ctx.attrs["alpha"]
            if alpha != 1:
                gs = mul_scalar(gs, alpha)
        return g, gs

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        gs = g[(slice(None), *ctx.state)]
        alpha = ctx.attrs["alpha"]
        return g, (gs if alpha == 1 else gs * alpha)


@tensor_method("index_add")
@implements(IndexAdd, call=lambda x, index, source, dim, alpha=1: index_add(x, dim, index, source, alpha=alpha))
def index_add(x: Any, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:
    """`x` plus `alpha` times the slices of `source` added into the rows `index` (1-D int64) along `dim`
    (torch.index_add): ``out[index[j]] += alpha * source[j]`` for dim 0; repeated indices add up. `source` has
    x's shape except ``len(index)`` along dim.

    >>> from rtxviz import Tensor
    >>> Tensor.zeros([3, 2]).index_add(0, Tensor([2, 0, 2]), Tensor.ones([3, 2]), alpha=0.5).tolist()
    [[0.5, 0.5], [0.0, 0.0], [1.0, 1.0]]
    """
    source = as_tensor_like(source, x)
    d = norm_dim("index_add", dim, x.ndim)
    idx = _int_index("index_add", index, x)
    if idx.ndim != 1:
        raise ShapeError(f"index_add: index must be 1-D, got shape {idx.shape}")
    if x.ndim == 0:
        raise DimError("index_add: the input must have at least 1 dim (unsqueeze a 0-d tensor first)")
    want = x.shape[:d] + (idx.shape[0],) + x.shape[d + 1:]
    if source.shape != want:
        raise ShapeError(f"index_add: source must have shape {want} (the input's {x.shape} with {idx.shape[0]} "
                         f"index entries along dim {d}), got {source.shape}")
    _check_range("index_add", idx, x.shape[d], d, x.shape)
    return apply(IndexAdd, (x, source), {"dim": d, "index": Tensor._wrap(idx), "alpha": alpha})


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


class Logical(Op):
    """``a & b``, ``a | b``, ``a ^ b`` and ``~a`` on bool (logical) or int64 (bitwise) tensors, as PyTorch's operators:
    no gradient, and an op (not numpy on the side) so that a graph-cache replay recomputes a combined mask."""

    name = "logical"
    kind = "comparison"
    differentiable = False
    rule = "no gradient (a bool or integer result)"
    examples = (Example(lambda a, b: logical(a > 0, b > 0, "__and__"), ((3, 4), (3, 4))),
                Example(lambda a: logical(a > 0, None, "__invert__"), ((5,),)))

    @staticmethod
    def forward(ctx: Any, a: Any, b: Any = None) -> Any:
        return getattr(a, ctx.attrs["name"])() if b is None else getattr(a, ctx.attrs["name"])(b)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:  # pragma: no cover - never recorded: its inputs are plain Tensors
        return None, None


_LOGICAL_SYMBOL = {"__and__": "&", "__or__": "|", "__xor__": "^", "__invert__": "~"}
_LOGICAL_ATTRS = {n: {"name": n} for n in _LOGICAL_SYMBOL}


@implements(Logical, reference=None)
def logical(a: Tensor, b: Any, name: str) -> Tensor:
    """`a & b` (name "__and__"), `|`, `^`, or `~a` (b None): bool tensors combine logically, int64 bitwise.

    >>> from rtxviz import Tensor
    >>> m = Tensor.from_slice([-1.0, 2.0, 3.0], [3]) > 0
    >>> (m & (m.logical_not() | m)).tolist(), (~m).tolist()
    ([False, True, True], [True, False, False])
    """
    sym = _LOGICAL_SYMBOL[name]
    if a.data.dtype.kind not in "bi":
        raise DTypeError(f"{sym}: defined for bool and int64 tensors, got {a.dtype} (compare first: (x > 0) {sym} ...)")
    if b is None:
        return apply(Logical, (Tensor._wrap(a.data),), _LOGICAL_ATTRS[name])
    if not isinstance(b, Tensor):
        if type(b) not in (bool, int):
            raise TypeError(f"{sym}: the other operand must be a tensor, a bool or an int, got {type(b).__name__}")
        b = Tensor._wrap(xp_of(a.data).asarray(b, dtype=a.data.dtype))
    if b.data.dtype != a.data.dtype:
        raise DTypeError(f"{sym}: both operands must have one dtype, got {a.dtype} and {b.dtype}")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"{sym}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast") from None
    return apply(Logical, (Tensor._wrap(a.data), Tensor._wrap(b.data)), _LOGICAL_ATTRS[name])


@tensor_method("logical_not")
def logical_not(a: Tensor) -> Tensor:
    """not a, elementwise, as bool: a bool tensor's negation, any other's ``a == 0`` (no gradient)."""
    return logical(nonzero_mask(a), None, "__invert__")


@tensor_method("logical_and")
def logical_and(a: Tensor, b: Any) -> Tensor:
    """a and b elementwise, as bool (nonzero is true; no gradient)."""
    return logical(nonzero_mask(a), nonzero_mask(b), "__and__")


@tensor_method("logical_or")
def logical_or(a: Tensor, b: Any) -> Tensor:
    """a or b elementwise, as bool (nonzero is true; no gradient)."""
    return logical(nonzero_mask(a), nonzero_mask(b), "__or__")


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
        got = dtype if dtype is not None else getattr(arr, "dtype", None)
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
    if a.data.dtype != b.data.dtype:  # torch's result type: where(c, ints, floats) is float
        a, b = promote(Where, a, b)
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


# torch's ``probs.multinomial(n)``: sampled indices, drawn by the seeded generator (no op: nothing to differentiate)
tensor_method("multinomial")(multinomial)


# -- where the nonzero elements are -----------------------------------------------------------------------------
class Nonzero(Op):
    """The indices of the nonzero elements of `x`, one row [N, ndim] each, in row-major order: int64, no
    gradient (torch.nonzero). An op, so that a graph-cache replay recomputes them from the new values."""

    name = "nonzero"
    kind = "index"
    differentiable = False
    rule = "no gradient (indices)"
    examples = (Example(lambda x: nonzero(x), ((3, 4),)),
                Example(lambda x: nonzero(x), (np.array([[0.0, 1.5], [-2.0, 0.0]]),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        xp = xp_of(x)
        return xp.stack(xp.nonzero(x), axis=-1).astype(np.int64, copy=False).reshape(-1, x.ndim)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:  # pragma: no cover - never recorded: its input is a plain Tensor
        return (None,)


@tensor_method("nonzero")
@implements(Nonzero, reference=None)
def nonzero(x: Any, *, as_tuple: bool = False) -> Any:
    """Where `x` is nonzero (torch.nonzero): an int64 tensor [N, x.ndim] of the indices, one row per nonzero
    element in row-major order; ``as_tuple=True`` gives one 1-D index tensor per dim instead (for ``x[...]``).

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([0.0, 1.0, 2.0, 0.0], [2, 2])
    >>> nonzero(x).tolist(), [t.tolist() for t in nonzero(x, as_tuple=True)]
    ([[0, 1], [1, 0]], [[0, 1], [1, 0]])
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"nonzero: expected a Tensor, got {type(x).__name__}")
    scalar = x.ndim == 0
    if scalar:  # torch: a scalar is a 1-element vector, whose rows then have no columns ([1, 0] or [0, 0])
        x = x.reshape(1)
    rows = apply(Nonzero, (Tensor._wrap(x.data),))
    if as_tuple:
        return tuple(rows[:, d] for d in range(x.ndim))
    return rows[:, :0] if scalar else rows

