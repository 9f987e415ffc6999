"""Broadcasting: its two directions as ops, expand (broadcast_to) and its adjoint sum_to (sum over broadcast
dims), and `BroadcastBinary`, the base class of the ops whose two inputs broadcast (add, mul, atan2, ...)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..device import xp_of
from ..errors import ShapeError
from ..graph import Op, TapeNode, apply
from ..tensor import Tensor
from ..variable import Variable
from ._base import Example, implements, tensor_method


def batched_sum_to(arr: Any, shape: tuple[int, ...]) -> Any:
    """Sum `arr` of shape (B, *s) down to (B, *shape): broadcasting's adjoint, batch dimension kept."""
    target = (arr.shape[0], *shape)
    if arr.shape == target:
        return arr
    lead = arr.ndim - len(target)
    if lead > 0:
        arr = arr.sum(axis=tuple(range(1, 1 + lead)))
    keep = tuple(i for i in range(1, arr.ndim) if target[i] == 1 and arr.shape[i] != 1)
    if keep:
        arr = arr.sum(axis=keep, keepdims=True)
    return arr.reshape(target)


def batched_expand(arr: Any, shape: tuple[int, ...]) -> Any:
    """Broadcast `arr` of shape (B, *s) to (B, *shape), aligning s to the right of shape."""
    b = arr.shape[0]
    missing = len(shape) - (arr.ndim - 1)
    if missing > 0:
        arr = arr.reshape((b,) + (1,) * missing + arr.shape[1:])
    return xp_of(arr).broadcast_to(arr, (b, *shape))



class BroadcastBinary(Op):
    """Elementwise on two inputs that broadcast against each other. A subclass declares

    - ``compute(a, b)``: the forward on raw arrays (any broadcasting shapes), and
    - ``grads(ctx, g) -> (ga, gb)``: the gradients as if nothing were broadcast (of the output's shape; None
      for an input that needs none, see ``ctx.next``),

    and this base class builds `forward`, `backward` and the batch rule from them: forward keeps the two input
    shapes in ``ctx.state`` when they differ (None when they agree), backward sums each gradient back to its
    input's shape. (They are generated per subclass, so the hot path pays no extra call.)
    """

    kind = "broadcast_binary"

    #: the forward on raw arrays; subclasses set it (``compute = staticmethod(operator.add)``)
    compute: Callable[[Any, Any], Any]

    @staticmethod
    def grads(ctx: TapeNode, g: Any) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        compute: Callable[[Any, Any], Any] | None = getattr(cls, "compute", None)
        if compute is None:  # an intermediate base (`_Extremum`): its subclasses bring the forward
            return
        grads = cls.grads

        def forward(ctx: TapeNode, a: Any, b: Any) -> Any:
            if a.shape != b.shape:
                ctx.state = (a.shape, b.shape)
            return compute(a, b)

        def backward(ctx: TapeNode, g: Any) -> tuple:
            ga, gb = grads(ctx, g)
            shapes = ctx.state
            if shapes is None:
                return ga, gb
            return (None if ga is None else sum_to(ga, shapes[0]), None if gb is None else sum_to(gb, shapes[1]))

        def batched(ctx: TapeNode, g: Any) -> tuple:
            res = grads(ctx, Variable._wrap(g, None))
            shapes = ctx.state
            out = tuple(None if r is None else r.data for r in res)
            if shapes is None:
                return out
            return tuple(None if r is None else batched_sum_to(r, s) for r, s in zip(out, shapes, strict=True))

        def specialize(attrs: Any, a: Any, b: Any) -> Callable[[Any, Any], Any]:
            return compute  # the forward without the shapes it keeps for backward

        cls.forward = staticmethod(forward)  # type: ignore[method-assign]
        cls.backward = staticmethod(backward)  # type: ignore[method-assign,assignment]
        cls.batched = staticmethod(batched)
        cls.specialize = staticmethod(specialize)


def _sum_to_axes(in_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lead = len(in_shape) - len(shape)
    lead_axes = tuple(range(lead))
    keep_axes = tuple(i + lead for i, s in enumerate(shape) if s == 1 and in_shape[i + lead] != 1)
    return lead_axes, keep_axes


class SumTo(Op):
    """The sum over broadcast dims: what broadcasting's gradient needs."""

    name = "sum_to"
    kind = "gradient"
    rule = "dX = expand(dY, shape(X))"
    examples = (Example(lambda x: sum_to(x, (1, 3)), ((2, 4, 3),)), Example(lambda x: sum_to(x, (4, 1)), ((4, 5),)))

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        shape = ctx.attrs["shape"]
        ctx.state = x.shape
        lead_axes, keep_axes = _sum_to_axes(x.shape, shape)
        if keep_axes:
            x = x.sum(axis=keep_axes, keepdims=True)
        if lead_axes:
            x = x.sum(axis=lead_axes)
        return x

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (expand_to(g, ctx.state),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        return (batched_expand(g, ctx.state),)


def sum_to(x: Tensor, shape: tuple[int, ...]) -> Any:
    """Sum `x` down to `shape` (the reverse of broadcasting); `x` itself when already that shape."""
    if x.data.shape == shape:
        return x
    return apply(SumTo, (x,), {"shape": tuple(shape)})


class Expand(Op):
    name = "expand"
    kind = "shape"
    keeps_finite = True
    rule = "dX = sum_to(dY, shape(X))"

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = x.shape
        return xp_of(x).broadcast_to(x, ctx.attrs["shape"])

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (sum_to(g, ctx.state),)

    @staticmethod
    def batched(ctx: TapeNode, g: Any) -> tuple:
        return (batched_sum_to(g, ctx.state),)


def expand_to(x: Tensor, shape: tuple[int, ...]) -> Any:
    """`expand(x, shape)` for backward rules, whose `shape` is a tuple of ints that `x` broadcasts to by
    construction (an input's shape, a reduced gradient's): without the checks and -1 handling of the public
    function, which cost more than the op on a small gradient."""
    if x.data.shape == shape:
        return x
    return apply(Expand, (x,), {"shape": shape})


@tensor_method("expand", "broadcast_to")
@implements(Expand, call=lambda x, shape: expand(x, tuple(shape)))
def expand(x: Tensor, *shape: Any) -> Any:
    """Broadcast `x` to `shape` without copying (PyTorch's expand; -1 keeps a dim).

    >>> from rtxviz import Tensor
    >>> Tensor.ones([3]).expand(2, 3).shape
    (2, 3)
    """
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if len(shape) < x.ndim:
        raise ShapeError(f"expand: cannot expand shape {x.shape} to fewer dims {shape}")
    lead = len(shape) - x.ndim
    resolved = list(shape)
    for i, s in enumerate(x.shape):
        target = shape[i + lead]
        if target == -1:
            resolved[i + lead] = s
        elif s != 1 and s != target:
            raise ShapeError(f"expand: dim {i} of size {s} cannot expand to {target} (shape {x.shape} -> {shape})")
    resolved_t = tuple(resolved)
    if resolved_t == x.shape:
        return x
    return apply(Expand, (x,), {"shape": resolved_t})


@tensor_method("expand_as")
def expand_as(x: Tensor, other: Tensor) -> Any:
    """`x` broadcast to `other`'s shape (torch's ``x.expand_as(y)``)."""
    return expand(x, *other.shape)
