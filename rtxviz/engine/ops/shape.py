"""Shape ops: reshape, transpose, permute, squeeze, unsqueeze, flatten, narrow, split, chunk, index_select, cat,
stack, flip, roll, tril, triu, repeat, pad, diagonal. Their backward rules move the gradient back into the input's
layout; the ones that pick elements scatter it into zeros and the ones that copy elements (repeat, the
replicate/reflect/circular pads) add the copies' gradients up, and each of those rules is an op whose own backward
is the forward again, so second derivatives flow through every op here.

The ops that pick or scatter by an index or a mask (getitem, gather, scatter_add, index_add, where, masked_fill,
the comparisons) live in `index`; their names are importable from here as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..device import xp_of
from ..errors import DimError, DTypeError, ShapeError
from ..graph import Op, TapeNode, apply
from ..tensor import Tensor, as_tensor_like
from ._base import Example, implements, norm_dim, norm_dims, own_rule_batched, promote_all, tensor_method
from .index import (  # noqa: F401 - re-exported: other modules import these names from here
    Compare,
    Gather,
    GetItem,
    GetItemBackward,
    IndexAdd,
    MaskedFill,
    ScatterAdd,
    Where,
    _check_bounds,
    _index_array,
    _mask_array,
    _norm_key,
    _scatter,
    add_at,
    compare,
    gather,
    getitem,
    index_add,
    iterate,
    masked_fill,
    nonzero_mask,
    reference_key,
    where,
    where_method,
)
from .index import add_at as scatter_add  # noqa: F401 - the raw helper's old name (nn_pool imports it)
from .reduction import sum as _sum


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


class Clone(Op):
    """A copy in a new buffer: writing to it in place leaves the original alone (torch.clone)."""

    name = "clone"
    kind = "shape"
    keeps_finite = True
    rule = "dX = dY"
    examples = (Example(lambda x: clone(x), ((3, 2),)),)
    batched = staticmethod(own_rule_batched)

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.copy()

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (g,)


@tensor_method("clone")
@implements(Clone, reference=None)
def clone(x: Any) -> Any:
    """A copy of `x` in its own buffer, differentiable (torch.clone)."""
    return apply(Clone, (x,))


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
@implements("flatten")
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


# -- narrow / split / chunk -----------------------------------------------------------------------------------
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
@implements("split", call=lambda x, split_size, dim, index: split(x, split_size, dim)[index])
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
@implements("chunk", call=lambda x, chunks, dim, index: chunk(x, chunks, dim)[index])
def chunk(x: Any, chunks: int, dim: int = 0) -> tuple:
    """At most `chunks` equal pieces along `dim` (PyTorch: each of ceil(size / chunks); maybe fewer).

    >>> from rtxviz import Tensor
    >>> [p.tolist() for p in Tensor.arange(5).chunk(3)]
    [[0, 1], [2, 3], [4]]
    """
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
    ts = promote_all(_tensor_list("cat", tensors))  # torch's result type: cat([ints, floats]) is float
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
    ts = promote_all(_tensor_list("stack", tensors))
    first = ts[0].shape
    d = norm_dim("stack", dim, len(first), extra=1)
    for i, t in enumerate(ts[1:], 1):
        if t.shape != first:
            raise ShapeError(f"stack: tensor {i} has shape {t.shape} but tensor 0 has shape {first}; "
                             "stack needs equal shapes")
    return apply(Stack, tuple(ts), {"dim": d})


# -- flip / roll ----------------------------------------------------------------------------------------------
class Flip(Op):
    name = "flip"
    kind = "shape"
    keeps_finite = True
    rule = "dX = flip(dY, dims)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return xp_of(x).flip(x, axis=ctx.attrs["dims"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(Flip, (g,), ctx.attrs),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        return (xp_of(g).flip(g, axis=tuple(d + 1 for d in ctx.attrs["dims"])),)


@tensor_method("flip")
@implements(Flip, call=lambda x, dims: flip(x, dims))
def flip(x: Any, *dims: Any) -> Any:
    """`x` with the order of its elements reversed along each of `dims` (torch.flip; ``x.flip(0, 1)`` and
    ``x.flip([0, 1])`` alike).

    >>> from rtxviz import Tensor
    >>> Tensor.arange(6).reshape(2, 3).flip(1).tolist()
    [[2, 1, 0], [5, 4, 3]]
    """
    norm = norm_dims("flip", _int_args(dims), x.ndim) or ()
    if not norm or x.ndim == 0:
        return x
    return apply(Flip, (x,), {"dims": norm})


class Roll(Op):
    name = "roll"
    kind = "shape"
    keeps_finite = True
    rule = "dX = roll(dY, -shifts, dims)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        a = ctx.attrs
        if a["dims"] is None:
            return xp_of(x).roll(x, a["shifts"][0])  # the flattened tensor, shape kept
        return xp_of(x).roll(x, a["shifts"], axis=a["dims"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        a = ctx.attrs
        return (apply(Roll, (g,), {"shifts": tuple(-s for s in a["shifts"]), "dims": a["dims"]}),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        a = ctx.attrs
        xp = xp_of(g)
        back = tuple(-s for s in a["shifts"])
        if a["dims"] is None:
            return (xp.roll(g.reshape(g.shape[0], -1), back[0], axis=1).reshape(g.shape),)
        return (xp.roll(g, back, axis=tuple(d + 1 for d in a["dims"])),)


@tensor_method("roll")
@implements(Roll)
def roll(x: Any, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Any:
    """`x` with its elements moved `shifts` places along `dims`, those that fall off one end coming back at the
    other (torch.roll); with dims None, the flattened tensor is rolled by one shift and the shape kept.

    >>> from rtxviz import Tensor
    >>> Tensor.arange(6).reshape(2, 3).roll(1, 1).tolist(), Tensor.arange(6).reshape(2, 3).roll(2).tolist()
    ([[2, 0, 1], [5, 3, 4]], [[4, 5, 0], [1, 2, 3]])
    """
    shift_t = (int(shifts),) if isinstance(shifts, int | np.integer) else tuple(int(s) for s in shifts)
    if dims is None:
        if len(shift_t) != 1:
            raise ShapeError(f"roll: without dims, shifts must be a single shift, got {list(shift_t)}")
        if x.data.size == 0:
            return x
        return apply(Roll, (x,), {"shifts": shift_t, "dims": None})
    dim_t = (dims,) if isinstance(dims, int | np.integer) else tuple(dims)
    if len(dim_t) != len(shift_t) or not dim_t:
        raise ShapeError(f"roll: shifts {list(shift_t)} and dims {list(dim_t)} must have the same, non-zero length")
    norm = tuple(norm_dim("roll", d, x.ndim) for d in dim_t)  # a dim may repeat: its shifts add up
    if x.ndim == 0 or x.data.size == 0:
        return x
    return apply(Roll, (x,), {"shifts": shift_t, "dims": norm})


# -- tril / triu ----------------------------------------------------------------------------------------------
def _triangle(x: Any, diagonal: int, lower: bool) -> Any:
    """The lower (j <= i + diagonal) or upper (j >= i + diagonal) triangle of the last two dims, zeros elsewhere."""
    xp = xp_of(x)
    n, m = x.shape[-2:]
    keep = xp.tri(n, m, diagonal, dtype=bool) if lower else ~xp.tri(n, m, diagonal - 1, dtype=bool)
    return xp.where(keep, x, x.dtype.type(0))


class Tril(Op):
    name = "tril"
    kind = "shape"
    keeps_finite = True
    rule = "dX = tril(dY, diagonal)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return _triangle(x, ctx.attrs["diagonal"], True)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(Tril, (g,), ctx.attrs),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        return (_triangle(g, ctx.attrs["diagonal"], True),)  # the last two dims: a leading batch dim is one more


def _check_matrix(op: str, x: Any) -> None:
    if x.ndim < 2:
        raise DimError(f"{op}: needs a tensor of at least 2 dims (the last two are the matrix), got shape {x.shape}")


@tensor_method("tril")
@implements(Tril)
def tril(x: Any, diagonal: int = 0) -> Any:
    """The lower triangle of the matrices in the last two dims: entries (i, j) with j <= i + diagonal, the rest
    zero (torch.tril).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([2, 3]).tril().tolist()
    [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    """
    _check_matrix("tril", x)
    return apply(Tril, (x,), {"diagonal": int(diagonal)})


class Triu(Op):
    name = "triu"
    kind = "shape"
    keeps_finite = True
    rule = "dX = triu(dY, diagonal)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return _triangle(x, ctx.attrs["diagonal"], False)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(Triu, (g,), ctx.attrs),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        return (_triangle(g, ctx.attrs["diagonal"], False),)


@tensor_method("triu")
@implements(Triu)
def triu(x: Any, diagonal: int = 0) -> Any:
    """The upper triangle of the matrices in the last two dims: entries (i, j) with j >= i + diagonal, the rest
    zero (torch.triu).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([2, 3]).triu(1).tolist()
    [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
    """
    _check_matrix("triu", x)
    return apply(Triu, (x,), {"diagonal": int(diagonal)})


# -- repeat ---------------------------------------------------------------------------------------------------
def _tiles(shape: tuple[int, ...], repeats: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the repeated output viewed as (r0, s0, r1, s1, ...), the positions of the r's in it): summing over those
    adds each element's copies up."""
    padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
    inter = tuple(v for r, s in zip(repeats, padded, strict=True) for v in (r, s))
    return inter, tuple(range(0, 2 * len(repeats), 2))


class Repeat(Op):
    name = "repeat"
    kind = "shape"
    keeps_finite = True
    rule = "dX = Σ over the copies of dY (view dY as (r₀, s₀, r₁, s₁, …), sum over the r's)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return xp_of(x).tile(x, ctx.attrs["repeats"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        inter, axes = _tiles(ctx.state, ctx.attrs["repeats"])
        return (reshape(_sum(reshape(g, inter), dim=axes), ctx.state),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        inter, axes = _tiles(ctx.state, ctx.attrs["repeats"])
        b = g.shape[0]
        return (g.reshape((b, *inter)).sum(axis=tuple(a + 1 for a in axes)).reshape((b, *ctx.state)),)


@tensor_method("repeat")
@implements(Repeat, call=lambda x, repeats: repeat(x, *repeats))
def repeat(x: Any, *sizes: Any) -> Any:
    """`x` tiled `sizes[d]` times along each dim d (PyTorch's Tensor.repeat; extra leading sizes add dims).

    >>> from rtxviz import Tensor
    >>> Tensor.arange(3).repeat(2, 2).tolist()
    [[0, 1, 2, 0, 1, 2], [0, 1, 2, 0, 1, 2]]
    """
    reps = tuple(int(s) for s in _int_args(sizes))
    if len(reps) < x.ndim:
        raise DimError(f"repeat: {len(reps)} repeat sizes {list(reps)} for a tensor of {x.ndim} dims (shape "
                       f"{x.shape}); give at least one per dim")
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeat: repeat sizes must be >= 0, got {list(reps)}")
    if len(reps) == x.ndim and all(r == 1 for r in reps):
        return x
    return apply(Repeat, (x,), {"repeats": reps})


# -- pad ------------------------------------------------------------------------------------------------------
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_source(xp: Any, size: int, lo: int, hi: int, mode: str) -> Any:
    """For each position of a padded dim, the input position it copies (reflect, replicate or circular)."""
    j = xp.arange(-lo, size + hi)
    if mode == "replicate":
        return xp.clip(j, 0, size - 1)
    if mode == "circular":
        return j % size
    j = xp.abs(j)  # reflect (the edge itself is not repeated): pads are smaller than the dim
    return xp.where(j >= size, 2 * (size - 1) - j, j)


class Pad(Op):
    """F.pad. A constant pad places x inside a tensor of the value; the other modes copy x's elements outward,
    as an index into x built by forward (in ctx.state), and their gradient adds the copies up."""

    name = "pad"
    kind = "shape"
    # keeps_finite stays False: a constant pad writes its value, which may be ±inf (masks, max-pool padding)
    rule = "dX = dY[inner] (constant); dX = zeros(shape(X)) with dY added at the source of each element (others)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        a = ctx.attrs
        xp = xp_of(x)
        pads, mode = a["pad"], a["mode"]
        k = len(pads) // 2
        lead = x.ndim - k
        if mode == "constant":
            inner = (slice(None),) * lead + tuple(
                slice(pads[2 * (k - 1 - i)], pads[2 * (k - 1 - i)] + x.shape[lead + i]) for i in range(k))
            out_shape = x.shape[:lead] + tuple(
                x.shape[lead + i] + pads[2 * (k - 1 - i)] + pads[2 * (k - 1 - i) + 1] for i in range(k))
            ctx.state = (x.shape, inner, True)
            out = xp.full(out_shape, a["value"], dtype=x.dtype)
            out[inner] = x
            return out
        srcs = []
        for i in range(k):
            lo, hi = pads[2 * (k - 1 - i)], pads[2 * (k - 1 - i) + 1]
            shape = [1] * k
            shape[i] = -1
            srcs.append(_pad_source(xp, x.shape[lead + i], lo, hi, mode).reshape(shape))
        key = (slice(None),) * lead + tuple(srcs)
        ctx.state = (x.shape, key, False)
        return x[key]

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        shape, key, basic = ctx.state
        if basic:
            return (apply(GetItem, (g,), {"key": key, "basic": True}),)
        return (_scatter(g, key, shape, False),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        shape, key, basic = ctx.state
        if basic:
            return (g[(slice(None), *key)],)
        out = xp_of(g).zeros((g.shape[0], *shape), dtype=g.dtype)
        add_at(out, (slice(None), *key), g)
        return (out,)


@implements(Pad)
def pad(x: Any, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Any:
    """Pad `x` as torch.nn.functional.pad: `pad` is [left, right] of the last dim, then [top, bottom] of the one
    before, and so on. mode "constant" fills with `value` (default 0; negative pads crop); "reflect" mirrors
    without repeating the edge, "replicate" repeats the edge, "circular" wraps around: these pad the last 1, 2
    or 3 dims of a tensor with 1 or 2 more (batch, channel).

    >>> from rtxviz import Tensor
    >>> x = Tensor.arange(3).reshape(1, 3).to(dtype="float64")
    >>> pad(x, [1, 2]).tolist(), pad(x, [2, 1], mode="reflect").tolist(), pad(x, [1, 1], mode="circular").tolist()
    ([[0.0, 0.0, 1.0, 2.0, 0.0, 0.0]], [[2.0, 1.0, 0.0, 1.0, 2.0, 1.0]], [[2.0, 0.0, 1.0, 2.0, 0.0]])
    """
    pads = tuple(int(p) for p in pad)
    k = len(pads) // 2
    if len(pads) % 2 or not pads:
        raise ShapeError(f"pad: the pad list must have an even, non-zero length, got {list(pads)}")
    if k > x.ndim:
        raise ShapeError(f"pad: {list(pads)} pads {k} dims but the tensor has {x.ndim} (shape {x.shape})")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(_PAD_MODES)}, got {mode!r}")
    if mode == "constant":
        if any(p < 0 for p in pads):  # negative pads crop first (a getitem), then the rest pads
            lead = x.ndim - k
            crop = (slice(None),) * lead + tuple(
                slice(max(-pads[2 * (k - 1 - i)], 0), x.shape[lead + i] - max(-pads[2 * (k - 1 - i) + 1], 0))
                for i in range(k))
            for i, sl in enumerate(crop[lead:]):
                if sl.stop < sl.start:
                    raise ShapeError(f"pad: {list(pads)} crops dim {lead + i} of size {x.shape[lead + i]} below 0")
            x = getitem(x, crop)
            pads = tuple(max(p, 0) for p in pads)
            if not any(pads):
                return x
        fill = 0.0 if value is None else float(value)
        return apply(Pad, (x,), {"pad": pads, "mode": mode, "value": fill})
    if value is not None:
        raise ValueError(f"pad: mode {mode!r} takes no value, got {value!r}")
    if k > 3 or x.ndim not in (k + 1, k + 2):
        raise ShapeError(f"pad: mode {mode!r} pads the last 1, 2 or 3 dims of a tensor with 1 or 2 more (batch, "
                         f"channel); {list(pads)} pads {k} dim(s) of a tensor of shape {x.shape}")
    for i in range(k):
        size = x.shape[x.ndim - 1 - i]
        lo, hi = pads[2 * i], pads[2 * i + 1]
        if any(p < 0 for p in (lo, hi)):
            raise ShapeError(f"pad: mode {mode!r} takes pads >= 0, got {list(pads)}")
        limit = size - 1 if mode == "reflect" else size
        if (lo or hi) and (max(lo, hi) > limit or size == 0):
            rel = "smaller than" if mode == "reflect" else "at most"
            raise ShapeError(f"pad: {mode} pads must be {rel} the dim they pad; got {lo}, {hi} for dim "
                             f"{x.ndim - 1 - i} of size {size} (shape {x.shape})")
    return apply(Pad, (x,), {"pad": pads, "mode": mode, "value": None})


# -- diagonal -------------------------------------------------------------------------------------------------
def _diagonal_index(xp: Any, shape: tuple[int, ...], offset: int, dim1: int, dim2: int) -> tuple[Any, Any]:
    """The positions (along dim1, along dim2) of the diagonal `offset`: (i, i + offset)."""
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = max(0, min(shape[dim1] - r0, shape[dim2] - c0))
    i = xp.arange(n)
    return i + r0, i + c0


def _place_diagonal(g: Any, shape: tuple[int, ...], offset: int, dim1: int, dim2: int) -> Any:
    """Zeros of `shape` with the last dim of `g` written on the diagonal of dims (dim1, dim2); on raw arrays."""
    xp = xp_of(g)
    out = xp.zeros(shape, dtype=g.dtype)
    i, j = _diagonal_index(xp, shape, offset, dim1, dim2)
    xp.moveaxis(out, (dim1, dim2), (-2, -1))[..., i, j] = g
    return out


class DiagonalBackward(Op):
    """The adjoint of taking a diagonal: zeros of the source shape with the gradient on the diagonal."""

    name = "diagonal_backward"
    kind = "gradient"
    rule = "dG = diagonal(dY, offset, dim1, dim2)"
    examples = (Example(lambda g: _diagonal_scatter(g, (3, 4), 1, 0, 1), ((3,),)),
                Example(lambda g: _diagonal_scatter(g, (3, 2, 4), -1, 2, 0), ((2, 3),)))

    @staticmethod
    def forward(ctx: Any, g: Any) -> Any:
        a = ctx.attrs
        return _place_diagonal(g, a["shape"], a["offset"], a["dim1"], a["dim2"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        a = ctx.attrs
        return (apply(Diagonal, (g,), {"offset": a["offset"], "dim1": a["dim1"], "dim2": a["dim2"]}),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        a = ctx.attrs
        return (xp_of(g).diagonal(g, a["offset"], a["dim1"] + 1, a["dim2"] + 1).copy(),)


def _diagonal_scatter(g: Any, shape: tuple[int, ...], offset: int, dim1: int, dim2: int) -> Any:
    return apply(DiagonalBackward, (g,), {"shape": shape, "offset": offset, "dim1": dim1, "dim2": dim2})


class Diagonal(Op):
    name = "diagonal"
    kind = "shape"
    keeps_finite = True
    rule = "dX = zeros(shape(X)) with dY on the diagonal (offset, dim1, dim2)"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        a = ctx.attrs
        ctx.state = x.shape
        return xp_of(x).diagonal(x, a["offset"], a["dim1"], a["dim2"]).copy()  # numpy's is a read-only view

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        a = ctx.attrs
        return (_diagonal_scatter(g, ctx.state, a["offset"], a["dim1"], a["dim2"]),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        a = ctx.attrs
        return (_place_diagonal(g, (g.shape[0], *ctx.state), a["offset"], a["dim1"] + 1, a["dim2"] + 1),)


@tensor_method("diagonal")
@implements(Diagonal)
def diagonal(x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """The diagonal ``x[i, i + offset]`` of the matrices in dims (dim1, dim2), as a new last dim (torch.diagonal;
    offset > 0 above the main diagonal, < 0 below).

    >>> from rtxviz import Tensor
    >>> x = Tensor.arange(12).reshape(3, 4)
    >>> x.diagonal().tolist(), x.diagonal(1).tolist(), x.diagonal(-1).tolist()
    ([0, 5, 10], [1, 6, 11], [4, 9])
    """
    if x.ndim < 2:
        raise DimError(f"diagonal: needs a tensor of at least 2 dims, got shape {x.shape}")
    d1, d2 = norm_dim("diagonal", dim1, x.ndim), norm_dim("diagonal", dim2, x.ndim)
    if d1 == d2:
        raise DimError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2} (both dim {d1})")
    return apply(Diagonal, (x,), {"offset": int(offset), "dim1": d1, "dim2": d2})


# -- PyTorch's shape spellings, composed of the ops above (no op of their own) ---------------------------------------


@tensor_method("t")
def t(x: Any) -> Any:
    """The transpose of a matrix (a tensor of at most 2 dims is returned with its 2 dims swapped), as torch's
    ``x.t()``; more dims are refused, as PyTorch refuses them (use `transpose` or `.mT`)."""
    if x.ndim > 2:
        raise ShapeError(f"t(): expects a tensor of at most 2 dims, got {x.ndim}D of shape {x.shape}; "
                         "use x.transpose(dim0, dim1)")
    return transpose(x, 0, 1)


@tensor_method("view_as")
def view_as(x: Any, other: Any) -> Any:
    """`x` reshaped to `other`'s shape (torch's ``x.view_as(y)``)."""
    return reshape(x, other.shape)


@tensor_method("reshape_as")
def reshape_as(x: Any, other: Any) -> Any:
    """`x` reshaped to `other`'s shape (torch's ``x.reshape_as(y)``)."""
    return reshape(x, other.shape)


@tensor_method("unbind")
def unbind(x: Any, dim: int = 0) -> tuple:
    """The slices of `x` along `dim`, that dim removed, as a tuple (torch.unbind): one recorded `getitem` each."""
    d = norm_dim("unbind", dim, x.ndim)
    lead = (slice(None),) * d
    return tuple(x[lead + (i,)] for i in range(x.shape[d]))



# -- more of PyTorch's shape functions, composed of the ops above (no op of their own) -------------------------------
_diagonal = diagonal  # diag's argument is named `diagonal`, as torch's


@tensor_method("diag")
def diag(x: Any, diagonal: int = 0) -> Any:
    """torch.diag: a 1-D `x` as the square matrix with x on its diagonal `diagonal` (offset > 0 above the main
    one, < 0 below), or the diagonal `diagonal` of a 2-D `x` as a vector. The gradient is the other of the two.

    >>> from rtxviz import Tensor
    >>> diag(Tensor.from_slice([1.0, 2.0], [2]), 1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    >>> diag(Tensor.arange(9).reshape(3, 3), -1).tolist()
    [3, 7]
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"diag: expected a Tensor, got {type(x).__name__}")
    offset = int(diagonal)
    if x.ndim == 2:
        return _diagonal(x, offset)
    if x.ndim != 1:
        raise DimError(f"diag: expected a 1-D or 2-D tensor, got {x.ndim}-D of shape {x.shape}")
    n = x.shape[0] + (offset if offset >= 0 else -offset)
    # placing a vector on a diagonal is the adjoint of taking it: that op, whose gradient is the diagonal again
    return _diagonal_scatter(x, (n, n), offset, 0, 1)


@tensor_method("tile")
def tile(x: Any, dims: Sequence[int]) -> Any:
    """`x` repeated `dims[d]` times along each dim (torch.tile): Tensor.repeat, with ones put in front of `dims`
    when it names fewer dims than `x` has.

    >>> from rtxviz import Tensor
    >>> tile(Tensor.arange(2), (2, 2)).tolist()
    [[0, 1, 0, 1], [0, 1, 0, 1]]
    """
    reps = _int_args((dims,)) if not isinstance(dims, int) else (dims,)
    reps = (1,) * (x.ndim - len(reps)) + tuple(int(r) for r in reps)
    return repeat(x, *reps)


@tensor_method("repeat_interleave")
def repeat_interleave(x: Any, repeats: int, dim: int | None = None, *, output_size: int | None = None) -> Any:
    """Each element of `x` repeated `repeats` times in place along `dim` (torch.repeat_interleave with an int
    `repeats`; None: along the flattened `x`). The gradient adds the copies' gradients up (expand's).

    >>> from rtxviz import Tensor
    >>> repeat_interleave(Tensor.arange(4).reshape(2, 2), 2, dim=1).tolist()
    [[0, 0, 1, 1], [2, 2, 3, 3]]
    """
    from .broadcast import expand

    if isinstance(repeats, Tensor) and repeats.ndim == 0:
        repeats = int(repeats.item())
    if isinstance(repeats, bool) or not isinstance(repeats, int | np.integer):
        raise TypeError(f"repeat_interleave: repeats must be an int (a tensor of repeats per element is not "
                        f"supported), got {type(repeats).__name__}")
    r = int(repeats)
    if r < 0:
        raise ShapeError(f"repeat_interleave: repeats must be >= 0, got {r}")
    if dim is None:
        x, d = reshape(x, -1), 0
    else:
        d = norm_dim("repeat_interleave", dim, x.ndim)
    if x.ndim == 0:
        x = reshape(x, 1)
    shape = x.shape
    if output_size is not None and output_size != shape[d] * r:
        raise ShapeError(f"repeat_interleave: output_size {output_size} is not {shape[d]} · {r} = {shape[d] * r}")
    wide = expand(unsqueeze(x, d + 1), *shape[:d + 1], r, *shape[d + 1:])
    return reshape(wide, *shape[:d], shape[d] * r, *shape[d + 1:])


@implements("concat", reference=None)
def concat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """torch.concat, an alias of `cat`: tensors joined along an existing dim.

    >>> from rtxviz import Tensor
    >>> concat([Tensor.zeros([2, 3]), Tensor.ones([1, 3])]).shape
    (3, 3)
    """
    return cat(tensors, dim)


concatenate = concat  # torch.concatenate, the same alias


def _at_least(op: str, tensors: Any, ndim: int) -> list:
    """The tensors of a stack function, each given dims up to `ndim` as torch.atleast_1d / atleast_2d do (a
    scalar becomes [1] or [1, 1], a vector [n] becomes [1, n])."""
    out = []
    for t in _tensor_list(op, tensors):
        out.append(reshape(t, *((1,) * (ndim - t.ndim)), *t.shape) if t.ndim < ndim else t)
    return out


def hstack(tensors: Sequence[Any]) -> Any:
    """Tensors joined column-wise (torch.hstack): along dim 0 if they are all 1-D, else along dim 1.

    >>> from rtxviz import Tensor
    >>> hstack([Tensor.arange(2), Tensor.arange(1)]).tolist()
    [0, 1, 0]
    """
    ts = _at_least("hstack", tensors, 1)
    return cat(ts, 0 if all(t.ndim == 1 for t in ts) else 1)


def vstack(tensors: Sequence[Any]) -> Any:
    """Tensors joined row-wise (torch.vstack): each made at least 2-D (a vector [n] is the row [1, n]), then
    joined along dim 0.

    >>> from rtxviz import Tensor
    >>> vstack([Tensor.arange(2), Tensor.arange(2)]).tolist()
    [[0, 1], [0, 1]]
    """
    return cat(_at_least("vstack", tensors, 2), 0)


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-D tensors (torch.meshgrid; varargs or one list): with n tensors of sizes s₀, s₁, ...
    each output has shape (s₀, s₁, ...) and repeats its tensor along the other dims; ``indexing="xy"`` swaps the
    first two dims (numpy's Cartesian convention). Each grid is an expand, so its gradient sums back.

    >>> from rtxviz import Tensor
    >>> a, b = meshgrid(Tensor.arange(2), Tensor.arange(3), indexing="xy")
    >>> a.shape, b.tolist()
    ((3, 2), [[0, 0], [1, 1], [2, 2]])
    """
    from .broadcast import expand

    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = _tensor_list("meshgrid", list(tensors))
    for i, t in enumerate(ts):
        if t.ndim > 1:
            raise DimError(f"meshgrid: expects 0-D or 1-D tensors, got tensor {i} of shape {t.shape}")
    sizes = [t.shape[0] if t.ndim else 1 for t in ts]
    # the dim each tensor runs along: its position, but the first two swapped for "xy"
    where_of = list(range(len(ts)))
    if indexing == "xy" and len(ts) >= 2:
        where_of[0], where_of[1] = 1, 0
    shape = [0] * len(ts)
    for i, d in enumerate(where_of):
        shape[d] = sizes[i]
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[where_of[i]] = sizes[i]
        out.append(expand(reshape(t, *view), *shape))
    return tuple(out)
