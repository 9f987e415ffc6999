"""Shape ops: reshape, transpose, permute, squeeze, unsqueeze, flatten, narrow, cat, stack, split, chunk,
index_select, getitem (``x[...]``), where, masked_fill. Their backward rules move the gradient back into the
input's layout; the ones that pick elements scatter it into zeros (`GetItemBackward`, add.at semantics, so
repeated indices accumulate), and that scatter's own backward picks the elements again, so second
derivatives flow through every op here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..device import to_device, xp_of
from ..errors import DeviceError, DimError, DTypeError, ShapeError
from ..graph import Op, apply
from ..tensor import Tensor, as_tensor_like
from ._base import Example, constant, implements, norm_dim, norm_dims, tensor_method
from .broadcast import sum_to


class Reshape(Op):
    name = "reshape"
    kind = "shape"
    keeps_finite = True
    rule = "dX = reshape(dY, shape(X))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.reshape(ctx.attrs["shape"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (reshape(g, ctx.state),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (g.reshape((g.shape[0], *ctx.state)),)


@tensor_method("reshape", "view")
@implements(Reshape, call=lambda x, shape: reshape(x, tuple(shape)))
def reshape(x: Any, *shape: Any) -> Any:
    """A new shape with the same number of elements (one -1 is inferred)."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    size = x.data.size
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape {x.shape} ({size} elements) to {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    total = 1
    for s in shape:
        total *= s
    if total != size:
        raise ShapeError(f"reshape: cannot reshape {x.shape} ({size} elements) to {shape} ({total} elements)")
    if shape == x.data.shape:
        return x
    return apply(Reshape, (x,), {"shape": shape})


class Transpose(Op):
    name = "transpose"
    kind = "shape"
    keeps_finite = True
    rule = "dX = transpose(dY, dim0, dim1)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.swapaxes(ctx.attrs["dim0"], ctx.attrs["dim1"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(Transpose, (g,), ctx.attrs),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        return (g.swapaxes(ctx.attrs["dim0"] + 1, ctx.attrs["dim1"] + 1),)


@tensor_method("transpose")
@implements(Transpose)
def transpose(x: Any, dim0: int = 0, dim1: int = 1) -> Any:
    """Swap two dims (a view). The spec calls `transpose(0, 1)`."""
    nd = x.ndim
    d0, d1 = norm_dim("transpose", dim0, nd), norm_dim("transpose", dim1, nd)
    if nd < 2 or d0 == d1:
        return x
    return apply(Transpose, (x,), {"dim0": d0, "dim1": d1})


class Unsqueeze(Op):
    name = "unsqueeze"
    kind = "shape"
    keeps_finite = True
    rule = "dX = squeeze(dY, dim)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return x.reshape(x.shape[: ctx.attrs["dim"]] + (1,) + x.shape[ctx.attrs["dim"] :])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (reshape(g, ctx.state),)

    batched = Reshape.batched  # its ctx.state is the input's shape, as reshape's


@tensor_method("unsqueeze")
@implements(Unsqueeze)
def unsqueeze(x: Any, dim: int) -> Any:
    """Insert a dim of size 1 at `dim` (negative counts from the end of the result)."""
    return apply(Unsqueeze, (x,), {"dim": norm_dim("unsqueeze", dim, x.ndim, extra=1)})


# -- permute / squeeze / flatten / .T / .mT ------------------------------------------------------------------
class Permute(Op):
    name = "permute"
    kind = "shape"
    keeps_finite = True
    rule = "dX = permute(dY, inverse(dims))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.transpose(ctx.attrs["dims"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        dims = ctx.attrs["dims"]
        inverse = [0] * len(dims)
        for i, d in enumerate(dims):
            inverse[d] = i
        return (apply(Permute, (g,), {"dims": tuple(inverse)}),)


def _int_args(args: tuple) -> tuple:
    """`f(1, 2)` and `f((1, 2))` / `f([1, 2])` alike."""
    if len(args) == 1 and not isinstance(args[0], int | np.integer):
        return tuple(args[0])
    return args


@tensor_method("permute")
@implements(Permute, call=lambda x, dims: permute(x, *dims))
def permute(x: Any, *dims: Any) -> Any:
    """Reorder the dims: output dim i is input dim `dims[i]` (a view).

    >>> from rtxviz import Tensor
    >>> Tensor.zeros([2, 3, 4]).permute(2, 0, 1).shape
    (4, 2, 3)
    """
    dims = _int_args(dims)
    nd = x.ndim
    if len(dims) != nd:
        raise DimError(f"permute: dims {list(dims)} has {len(dims)} entries but the tensor has {nd} dims "
                       f"(shape {x.shape})")
    norm = norm_dims("permute", dims, nd) or ()
    if norm == tuple(range(nd)):
        return x
    return apply(Permute, (x,), {"dims": norm})


class Squeeze(Reshape):
    """Dropping size-1 dims is a reshape; its own name keeps graphs readable."""

    name = "squeeze"


@tensor_method("squeeze")
@implements(Squeeze)
def squeeze(x: Any, dim: Any = None) -> Any:
    """Drop size-1 dims: all of them (dim None), or the given dim(s); a dim whose size is not 1 is kept,
    as in PyTorch.

    >>> from rtxviz import Tensor
    >>> Tensor.zeros([2, 1, 3, 1]).squeeze().shape, Tensor.zeros([2, 1, 3, 1]).squeeze(-1).shape
    ((2, 3), (2, 1, 3))
    """
    shape = x.shape
    dims = range(len(shape)) if dim is None else (norm_dims("squeeze", dim, x.ndim) or ())
    drop = {d for d in dims if d < len(shape) and shape[d] == 1}
    if not drop:
        return x
    out = tuple(s for i, s in enumerate(shape) if i not in drop)
    return apply(Squeeze, (x,), {"dim": tuple(sorted(drop)), "shape": out})


@tensor_method("flatten")
def flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    """Merge dims `start_dim..end_dim` into one (a `reshape`); a 0-d tensor becomes shape (1,).

    >>> from rtxviz import Tensor
    >>> Tensor.zeros([2, 3, 4]).flatten(1).shape
    (2, 12)
    """
    nd = x.ndim
    s, e = norm_dim("flatten", start_dim, nd), norm_dim("flatten", end_dim, nd)
    if nd == 0:
        return reshape(x, (1,))
    if s > e:
        raise DimError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (tensor of {nd} dims)")
    shape = x.shape
    merged = 1
    for d in shape[s : e + 1]:
        merged *= d
    return reshape(x, shape[:s] + (merged,) + shape[e + 1 :])


def T(x: Any) -> Any:
    """All dims reversed (PyTorch's `.T`); a tensor of fewer than 2 dims is returned as is."""
    nd = x.ndim
    return x if nd < 2 else permute(x, tuple(range(nd - 1, -1, -1)))


def mT(x: Any) -> Any:
    """The last two dims swapped (matrix transpose of a batch)."""
    if x.ndim < 2:
        raise DimError(f"mT: needs a tensor of at least 2 dims, got shape {x.shape}")
    return transpose(x, -2, -1)


Tensor.T = property(T)  # type: ignore[method-assign, assignment]
Tensor.mT = property(mT)  # type: ignore[method-assign, assignment]


# -- element pickers and their common adjoint ----------------------------------------------------------------
_cupyx: Any = None


def scatter_add(out: Any, key: Any, values: Any) -> None:
    """out[key] += values with repeated indices accumulating (numpy add.at; cupyx.scatter_add on GPUs)."""
    global _cupyx
    if type(out) is np.ndarray:
        np.add.at(out, key, values)
        return
    if _cupyx is None:
        import cupyx

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
            scatter_add(out, a["key"], g)
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


@implements(GetItem, reference=None)
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


# -- narrow / split / chunk ------------------------------------------------------------------------------------
class Narrow(Op):
    name = "narrow"
    kind = "shape"
    keeps_finite = True
    rule = "dX = zeros(shape(X)) with dY placed at [start : start+length] along dim"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        a = ctx.attrs
        start = a["start"]
        key = (slice(None),) * a["dim"] + (slice(start, start + a["length"]),)
        ctx.state = (x.shape, key)
        return x[key]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        shape, key = ctx.state
        return (_scatter(g, key, shape, True),)


@tensor_method("narrow")
@implements(Narrow)
def narrow(x: Any, dim: int, start: int, length: int) -> Any:
    """Elements `start .. start+length-1` along `dim` (a view; negative start counts from the end).

    >>> from rtxviz import Tensor
    >>> Tensor.arange(5).narrow(0, 1, 3).tolist()
    [1, 2, 3]
    """
    d = norm_dim("narrow", dim, x.ndim)
    if x.ndim == 0:
        raise DimError(f"narrow: cannot narrow a 0-d tensor (dim {dim})")
    size = x.shape[d]
    start, length = int(start), int(length)
    if not -size <= start <= size:
        raise DimError(f"narrow: start {start} is out of range for dim {d} of size {size} "
                       f"(expected {-size}..{size}; shape {x.shape})")
    if start < 0:
        start += size
    if length < 0 or start + length > size:
        raise ShapeError(f"narrow: start {start} + length {length} exceeds dim {d} of size {size} "
                         f"(shape {x.shape})")
    return apply(Narrow, (x,), {"dim": d, "start": start, "length": length})


@tensor_method("split")
def split(x: Any, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple:
    """Pieces along `dim`: of `split_size` each (the last may be smaller), or of the listed sizes.

    >>> from rtxviz import Tensor
    >>> [p.tolist() for p in Tensor.arange(5).split(2)]
    [[0, 1], [2, 3], [4]]
    """
    d = norm_dim("split", dim, x.ndim)
    if x.ndim == 0:
        raise DimError("split: cannot split a 0-d tensor")
    size = x.shape[d]
    if isinstance(split_size_or_sections, int | np.integer):
        step = int(split_size_or_sections)
        if step <= 0 and not (step == 0 and size == 0):
            raise ShapeError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != size:
            raise ShapeError(f"split: sizes {sizes} do not add up to dim {d} of size {size} (shape {x.shape})")
    out = []
    start = 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


@tensor_method("chunk")
def chunk(x: Any, chunks: int, dim: int = 0) -> tuple:
    """At most `chunks` equal pieces along `dim` (PyTorch: each of ceil(size / chunks); maybe fewer)."""
    if int(chunks) <= 0:
        raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
    d = norm_dim("chunk", dim, x.ndim)
    if x.ndim == 0:
        raise DimError("chunk: cannot chunk a 0-d tensor")
    size = x.shape[d]
    if size == 0:
        return tuple(narrow(x, d, 0, 0) for _ in range(int(chunks)))
    return split(x, -(-size // int(chunks)), d)


# -- index_select ---------------------------------------------------------------------------------------------
class IndexSelect(Op):
    name = "index_select"
    kind = "index"
    keeps_finite = True
    rule = "dX = zeros(shape(X)); dX[index] += dY along dim"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return xp_of(x).take(x, ctx.attrs["index"].data, axis=ctx.attrs["dim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        d = ctx.attrs["dim"]
        key = (slice(None),) * d + (ctx.attrs["index"].data,)
        return (_scatter(g, key, ctx.state, False),)


@tensor_method("index_select")
@implements(IndexSelect, call=lambda x, index, dim: index_select(x, dim, index))
def index_select(x: Any, dim: int, index: Any) -> Any:
    """The entries at `index` (1-D int64) along `dim`; repeats allowed, and their gradients add up.

    >>> from rtxviz import Tensor
    >>> Tensor.arange(6).reshape(3, 2).index_select(0, Tensor([2, 0, 2])).tolist()
    [[4, 5], [0, 1], [4, 5]]
    """
    d = norm_dim("index_select", dim, x.ndim)
    idx = _index_array("index_select", index, x)
    if idx.dtype.kind == "b":
        raise DTypeError("index_select: index must be an integer tensor, got bool")
    if idx.ndim > 1:
        raise ShapeError(f"index_select: index must be 1-D, got shape {idx.shape}")
    idx = idx.astype(np.int64, copy=False)  # already 1-D: no reshape, so the array stays the one passed in
    size = 1 if x.ndim == 0 else x.shape[d]
    if idx.size:
        bad = (idx < 0) | (idx >= size)
        if bad.any():
            raise DimError(f"index_select: index {int(idx[bad][0])} is out of range for dim {d} of size {size} "
                           f"(shape {x.shape})")
    if x.ndim == 0:  # PyTorch: a 0-d tensor takes exactly one index, 0, and stays 0-d
        if idx.size != 1:
            raise ShapeError(f"index_select: a 0-d tensor takes exactly one index, got {idx.size}")
        return apply(GetItem, (x,), {"key": (), "basic": True})
    return apply(IndexSelect, (x,), {"dim": d, "index": Tensor._wrap(idx)})


# -- cat / stack ---------------------------------------------------------------------------------------------
def _tensor_list(op: str, tensors: Any) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence | tuple | list):
        raise TypeError(f"{op}: expected a list or tuple of tensors, got {type(tensors).__name__}")
    if len(tensors) == 0:
        raise ShapeError(f"{op}: expected a non-empty list of tensors")
    like = next((t for t in tensors if isinstance(t, Tensor)), None)
    return [as_tensor_like(t, like) for t in tensors]


class Cat(Op):
    name = "cat"
    kind = "shape"
    keeps_finite = True
    rule = "dXᵢ = narrow(dY, dim, offsetᵢ, sizeᵢ)"

    @staticmethod
    def forward(ctx: Any, *arrays: Any) -> Any:
        d = ctx.attrs["dim"]
        ctx.state = tuple(a.shape[d] for a in arrays)
        return xp_of(arrays[0]).concatenate(arrays, axis=d)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        d = ctx.attrs["dim"]
        out = []
        start = 0
        for size, nxt in zip(ctx.state, ctx.next, strict=True):
            out.append(None if nxt is None else narrow(g, d, start, size))
            start += size
        return tuple(out)


@implements(Cat, call=lambda *xs, dim=0: cat(list(xs), dim=dim))
def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join tensors along an existing dim; shapes must agree elsewhere.

    >>> from rtxviz import Tensor
    >>> cat([Tensor.zeros([2, 3]), Tensor.ones([1, 3])], dim=0).shape
    (3, 3)
    """
    ts = _tensor_list("cat", tensors)
    first = ts[0].shape
    nd = len(first)
    if nd == 0:
        raise DimError("cat: zero-dimensional tensors cannot be concatenated (unsqueeze them first)")
    d = norm_dim("cat", dim, nd)
    for i, t in enumerate(ts[1:], 1):
        s = t.shape
        if len(s) != nd or any(a != b for j, (a, b) in enumerate(zip(s, first, strict=True)) if j != d):
            raise ShapeError(f"cat: tensor {i} has shape {s} but tensor 0 has shape {first}; shapes must match "
                             f"except in dim {d}")
    return apply(Cat, tuple(ts), {"dim": d})


class Stack(Op):
    name = "stack"
    kind = "shape"
    keeps_finite = True
    rule = "dXᵢ = dY[..., i, ...] (index i along dim)"

    @staticmethod
    def forward(ctx: Any, *arrays: Any) -> Any:
        return xp_of(arrays[0]).stack(arrays, axis=ctx.attrs["dim"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        d = ctx.attrs["dim"]
        lead = (slice(None),) * d
        return tuple(None if nxt is None else apply(GetItem, (g,), {"key": lead + (i,), "basic": True})
                     for i, nxt in enumerate(ctx.next))


@implements(Stack, call=lambda *xs, dim=0: stack(list(xs), dim=dim))
def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join same-shaped tensors along a new dim `dim`.

    >>> from rtxviz import Tensor
    >>> stack([Tensor.zeros([2, 3]), Tensor.ones([2, 3])], dim=1).shape
    (2, 2, 3)
    """
    ts = _tensor_list("stack", tensors)
    first = ts[0].shape
    d = norm_dim("stack", dim, len(first), extra=1)
    for i, t in enumerate(ts[1:], 1):
        if t.shape != first:
            raise ShapeError(f"stack: tensor {i} has shape {t.shape} but tensor 0 has shape {first}; "
                             "stack needs equal shapes")
    return apply(Stack, tuple(ts), {"dim": d})


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


@implements(Where, reference=None)
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
@implements(MaskedFill, reference=None)
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
