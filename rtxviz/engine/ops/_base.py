"""What every op module builds on: the base classes of the op kinds, `implements` (an op's public function and
how a reference program calls it), attaching functions as Tensor methods, coercing operands, dims.

An op is one class (its declarations, forward and backward) with its public function right after it::

    class Atan2(BroadcastBinary):          # ops/broadcast.py
        name = "atan2"
        rule = "dA = dC · B / (A² + B²), dB = -dC · A / (A² + B²)"
        save_inputs = True
        compute = staticmethod(np.arctan2)

        @staticmethod
        def grads(ctx, g):
            a, b = ctx.saved_inputs
            r = a * a + b * b
            return g * b / r, -g * a / r


    @tensor_method("atan2")
    @implements(Atan2)
    def atan2(a, b):
        return binary(Atan2, a, b)

`docs/adding-an-op.md` walks through it.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .. import hooks as _hooks
from ..backward import grad
from ..device import xp_of
from ..dtypes import get_default_dtype
from ..errors import DimError
from ..graph import OPS, Op, TapeNode, apply
from ..tensor import Tensor, as_tensor_like
from ..variable import Variable

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["OPS", "REFERENCE", "Elementwise", "Example", "Op", "binary", "cast_dtype", "constant", "floating",
           "implements", "promote", "tensor_method", "unary"]

#: rtx-reference op name -> how a program step calls the engine: ``call(*args, **attrs)`` (args are Tensors in
#: the step's order, attrs the step's attrs). Filled by `implements`; the conformance runner dispatches from it.
REFERENCE: dict[str, Callable[..., Any]] = {}
#: rtx-reference op name -> the Op class whose public function it calls (None for a composite of several ops).
REFERENCE_OPS: dict[str, type[Op] | None] = {}


def implements(op: type[Op] | str, reference: str | None = "", *, rename: dict[str, str] | None = None,
               call: Callable[..., Any] | None = None) -> Callable[[F], F]:
    """Declare the decorated function the public function of `op` (an Op class, or the name of a composite
    made of several ops), and how an ``rtx-reference/1`` program step calls it.

    reference: the step's op name ("" means the op's own name; None: not in the reference vocabulary).
    rename: attr names that differ from the function's keyword names (``{"dims": "dim"}``).
    call: when positions or results differ too, ``call(*args, **attrs)`` in full (e.g. keep max's values).
    """

    def deco(fn: F) -> F:
        name = op if isinstance(op, str) else op.name
        ref = name if reference == "" else reference
        if not isinstance(op, str):
            op.function = fn
            op.reference = ref
        if ref is not None:
            if call is not None:
                REFERENCE[ref] = call
            elif rename:
                table = dict(rename)

                def renamed(*args: Any, **attrs: Any) -> Any:
                    return fn(*args, **{table.get(k, k): v for k, v in attrs.items()})

                REFERENCE[ref] = renamed
            else:
                REFERENCE[ref] = fn
            REFERENCE_OPS[ref] = None if isinstance(op, str) else op
        return fn

    return deco


def tensor_method(*names: str) -> Callable[[F], F]:
    """Attach a functional op to Tensor (and so Variable) under `names` (declared for tools in `Tensor`'s body)."""

    def deco(fn: F) -> F:
        for name in names:
            setattr(Tensor, name, fn)
        return fn

    return deco


@dataclass(frozen=True)
class Example:
    """A call of an op for the per-op test harness, for ops outside the reference vocabulary: ``call(*inputs)``
    on float64 inputs. Each entry of `inputs` is a shape (random values in [low, high]) or an array.
    `differentiable` False: the harness checks forward only (a comparison, a random mask)."""

    call: Callable[..., Any]
    inputs: tuple[Any, ...]
    low: float = -1.0
    high: float = 1.0
    eps: float = 1e-6   # the finite-difference step
    atol: float = 1e-5  # gradcheck's tolerances
    rtol: float = 1e-3


def first_grad(f: Callable[..., Any], *xs: Any) -> Any:
    """The gradient of Σ w·f(*xs) in xs[0], recorded (create_graph) for a fixed, non-uniform weight w: an example
    for a gradient op (a backward rule's helper op), whose own backward a second-order check then exercises."""
    y = f(*xs)
    xp = xp_of(y.data)
    w = constant(xp.asarray(np.linspace(0.5, 1.5, y.data.size).reshape(y.shape), dtype=y.data.dtype))
    (g,) = grad((y * w).sum(), xs[0], create_graph=True)
    return g


def constant(array: Any) -> Tensor:
    """A data-independent constant made inside an op's rule or wrapper (a 0-d zero, a default weight of ones),
    as a Tensor; announced to tracing hooks so that the graph cache bakes it into a replay.

    Only for arrays whose values do not depend on any tensor's data: a mask or weight computed from data must
    come out of an op's forward (or its ctx.state), so that a replay recomputes it.

    >>> import numpy as np
    >>> constant(np.zeros((), dtype=np.float32)).shape
    ()
    """
    t = Tensor._wrap(array)
    if _hooks.TRACING:
        _hooks.trace("constant", tensor=t)
    return t


# -- batch rules --------------------------------------------------------------------------------------------
def own_rule_batched(ctx: TapeNode, g: Any) -> tuple:
    """The batch rule of an op whose backward multiplies the gradient by values of the input's shape (or moves it
    whole): its own backward, run on the batched gradient as a constant (grad mode is off in the batched walk)."""
    res = ctx.op.backward(ctx, Variable._wrap(g, None))
    return tuple(None if r is None else r.data for r in res)


# -- the kinds with a base class ------------------------------------------------------------------------------
class Elementwise(Op):
    """Each output element depends only on the inputs' elements at the same position (one shape for all).

    A one-input op that is one function of the array module declares it by name, ``ufunc = "tanh"``: its
    forward (``xp.tanh(x)``) and its replay kernel (`Op.specialize`) are built from that name.
    """

    kind = "elementwise"
    batched = staticmethod(own_rule_batched)
    ufunc: str | None = None
    #: True for an op without an integer form (exp, sin, true division...): int64 and bool inputs are cast to the
    #: default float dtype first, as torch gives float32 for ``torch.exp(int_tensor)`` (`unary`, `binary`)
    floating: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("ufunc")
        if name is None:
            return
        numpy_fn = getattr(np, name)

        def forward(ctx: Any, x: Any) -> Any:
            if type(x) is np.ndarray:  # numpy's function resolved once, not looked up on each call
                return numpy_fn(x)
            return getattr(xp_of(x), name)(x)

        def specialize(attrs: Any, x: Any) -> Callable[[Any], Any]:
            return numpy_fn if type(x) is np.ndarray else getattr(xp_of(x), name)

        cls.forward = staticmethod(forward)  # type: ignore[method-assign]
        cls.specialize = staticmethod(specialize)


# -- calling ops ----------------------------------------------------------------------------------------------
def unary(op: type, x: Tensor, attrs: dict | None = None) -> Any:
    """Apply a one-input op; an int64 or bool input of a `floating` op is cast to the default float dtype first."""
    if not isinstance(x, Tensor):
        x = as_tensor_like(x, None)
    if x.data.dtype.kind != "f" and op.floating:  # type: ignore[attr-defined]  # every unary op is Elementwise
        x = floating(x)
    return apply(op, (x,), attrs) if attrs is not None else apply(op, (x,))


def binary(op: type, a: Any, b: Any) -> Any:
    """Apply a two-input op, turning a scalar or array operand into a constant of the other's dtype, and operands
    of different dtype kinds into torch's result type (`promote`)."""
    if a.__class__ not in _TENSOR_TYPES and not isinstance(a, Tensor):
        a = as_tensor_like(a, b)
    if b.__class__ not in _TENSOR_TYPES and not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    dtype = a.data.dtype
    if dtype is not b.data.dtype or dtype.kind != "f":
        a, b = promote(op, a, b)
    return apply(op, (a, b))


def floating(x: Tensor) -> Tensor:
    """`x` itself when it is float, else `x` cast to the default float dtype (by the cast op, which a graph-cache
    capture sees).

    >>> floating(Tensor(np.arange(2))).dtype.name
    'float32'
    """
    if x.data.dtype.kind == "f":
        return x
    return cast_dtype(x, get_default_dtype())


def promote_all(tensors: list[Tensor]) -> list[Tensor]:
    """Operands of one op that joins many (cat, stack) brought to torch's result type, as `promote` brings two:
    the float dtype among them if there is one, else int64 if int64 and bool meet. Two float widths are left as
    they are (the op raises, naming them).

    >>> [t.dtype.name for t in promote_all([Tensor(np.arange(2)), Tensor(np.ones(2, np.float32))])]
    ['float32', 'float32']
    """
    dtypes = {t.data.dtype for t in tensors}
    if len(dtypes) == 1:
        return tensors
    floats = {d for d in dtypes if d.kind == "f"}
    if len(floats) > 1:
        return tensors
    target = next(iter(floats)) if floats else np.dtype(np.int64)
    return [t if t.data.dtype == target else cast_dtype(t, target) for t in tensors]


def promote(op: type, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Two operands brought to torch's result type where their dtype kinds differ: an int64 or bool tensor meeting
    a float one takes its dtype, a bool meeting an int64 becomes int64; two non-float operands of a `floating` op
    (true division, atan2...) become the default float dtype. Two float dtypes are left as they are: float32 with
    float64 raises DTypeError in the op, as the engine never promotes silently between float widths.

    >>> x, i = Tensor(np.ones(2, dtype=np.float32)), Tensor(np.arange(2))
    >>> [t.dtype.name for t in promote(Op, x, i)], [t.dtype.name for t in promote(Op, i, Tensor(np.ones(2, bool)))]
    (['float32', 'float32'], ['int64', 'int64'])
    """
    ka, kb = a.data.dtype.kind, b.data.dtype.kind
    if ka == "f" or kb == "f":
        if ka == kb:
            return a, b
        return (a, _cast_like(b, a)) if ka == "f" else (_cast_like(a, b), b)
    if getattr(op, "floating", False):
        return floating(a), floating(b)
    if ka != kb:  # int64 and bool
        return (a, _cast_like(b, a)) if ka == "i" else (_cast_like(a, b), b)
    return a, b


def _cast_like(x: Tensor, like: Tensor) -> Tensor:
    """`x` cast to `like`'s dtype (by the cast op)."""
    return cast_dtype(x, like.data.dtype)


def cast_dtype(x: Tensor, dtype: Any) -> Tensor:
    """`x` cast to `dtype` by the registered cast op (ops/convert.py's "to", found in OPS at call time: convert
    builds on this module, so importing it here would close a circle). Promotion casts a non-float operand to a
    float dtype or a bool to int64, never a Variable to an integer, so this is what `to_device_dtype` would do."""
    return apply(OPS["to"], (x,), {"device": None, "dtype": np.dtype(dtype)})


_TENSOR_TYPES: set = {Tensor, Variable}


def as_dim(op: str, dim: Any) -> int:
    """`dim` as a Python int: any integral (int, numpy.int64, a 0-d integer array) via operator.index."""
    if dim.__class__ is int:
        return dim
    try:
        return operator.index(dim)
    except TypeError:
        raise TypeError(f"{op}: dim must be an int, got {dim!r} ({type(dim).__name__})") from None


def norm_dim(op: str, dim: int, ndim: int, extra: int = 0) -> int:
    """A possibly negative dim (any integral) as an index into `ndim` (+`extra`, for unsqueeze) dims, checked."""
    if dim.__class__ is not int:
        dim = as_dim(op, dim)
    size = ndim + extra
    if size == 0 and dim in (0, -1):
        return 0
    if not -size <= dim < size:
        raise DimError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dim(s) "
                       f"(expected {-size}..{size - 1})")
    return dim + size if dim < 0 else dim


def norm_dims(op: str, dims: Any, ndim: int) -> tuple[int, ...] | None:
    """None (all dims), an integral (int, numpy.int64...), or a sequence of them: normalised, checked for repeats."""
    if dims is None:
        return None
    if isinstance(dims, int):
        dims = (dims,)
    elif not isinstance(dims, list | tuple):
        try:
            dims = (operator.index(dims),)
        except TypeError:
            if not hasattr(dims, "__iter__"):
                raise TypeError(f"{op}: dim must be an int, a sequence of ints or None, got {dims!r}") from None
            # else a sequence of integrals (a 1-d int array, a range), checked one by one below
    out = tuple(norm_dim(op, d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise DimError(f"{op}: dim {list(dims)} repeats a dimension")
    return out


def signature_text(fn: Callable[..., Any]) -> str:
    """The call signature of a public op function, for the docs table (``(x, dim=None, keepdim=False)``)."""
    try:
        return str(inspect.signature(fn)).replace("'", "")
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return "(...)"
