"""The recorded graph: TapeNode, the Op base class, `apply`, user-defined BackwardFunctions and AutogradTape.

Every op is single-output, so a TapeNode *is* the identity of the value it produced: its `next` tuple holds,
per input, the input's TapeNode (non-leaf), the input Variable itself (a leaf that requires grad), or None.
Nodes keep only what their backward rule needs (saved inputs and/or output), and drop it after backward
unless `retain_graph=True`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import hooks as _hooks
from . import memory as _memory
from . import versions as _versions
from .backward import topological_order
from .device import device_of
from .errors import DeviceError, DTypeError, GraphError, RtxvizError, ShapeError
from .grad_mode import STATE, no_grad
from .tensor import Tensor, as_tensor_like
from .variable import Variable
from .versions import node_ids as _node_ids

_NO_ATTRS: dict = {}


#: What sort of op an op is (`Op.kind`), and what that lets the engine and its watchers assume.
KINDS: dict[str, str] = {
    "elementwise": "each output element depends on the input elements at the same position (inputs of one "
                   "shape); the batched walk runs the op's own rule on a batch of gradients",
    "broadcast_binary": "elementwise on two inputs that broadcast; the base class `BroadcastBinary` records the "
                        "shapes and sums gradients back to them",
    "reduction": "reduces dims (sum, mean, max, norm...)",
    "scan": "a cumulative op along one dim (cumsum, cumprod, logcumsumexp)",
    "shape": "moves, copies or drops values without computing new ones (reshape, transpose, cat, flip...)",
    "index": "selects or scatters values by an index or mask (gather, index_select, where, masked_fill...)",
    "linalg": "linear algebra (matmul, solve, det...)",
    "nn": "a neural-network op (softmax, normalisation, attention, embedding, dropout)",
    "loss": "a loss function",
    "conv": "a convolution",
    "pool": "a pooling op",
    "convert": "moves a tensor to another device or dtype",
    "gradient": "an op that backward rules of other ops use (not part of the user vocabulary)",
    "comparison": "a comparison: a bool result, no gradient",
}

#: Every op class by its `name`, filled as op classes are defined (`Op.__init_subclass__`): the batched walk, the
#: event hook, the graph cache, the conformance runner and the docs read the declarations there.
OPS: dict[str, type[Op]] = {}


class Op:
    """One differentiable operation, declared in one place: its forward on raw arrays, its backward in
    differentiable ops, and the facts about it that the rest of rtxviz reads.

    Declarations (class attributes):

    - `name`: its name in graphs, events and the registry `OPS` (a subclass that sets one is registered).
    - `kind`: one of `KINDS` (elementwise, broadcast_binary, reduction, shape, ...); every op of rtxviz has one.
    - `rule`: the backward rule in one line for learners, e.g. ``dA = dC @ Bᵀ``.
    - `save_inputs` / `save_output`: what backward reads (``ctx.saved_inputs`` / ``ctx.output``); anything else
      it needs goes in ``ctx.state`` during forward (counted as activation memory).
    - `keeps_finite`: finite inputs always give a finite output (the output only moves, selects or drops input
      values, or zeros), so a NaN/Inf watcher may skip checking it.
    - `differentiable`: False for ops with no gradient at all (comparisons).
    - `batched`: optional ``batched(ctx, G) -> tuple`` of raw arrays: the op's rule for a batch of gradients
      (G has a leading batch dim), used by Jacobians and Hessians; elementwise and broadcasting ops get theirs
      from their base class, others fall back to running `backward` once per row.
    - `function` / `reference`: set by `ops.implements` on the op's public function: that function, and the
      name an ``rtx-reference/1`` program step calls it by (None: not in the reference vocabulary).
    - `examples`: for ops outside the reference vocabulary, calls the per-op test harness checks them with.
    - `specialize`: optional ``specialize(attrs, *arrays) -> kernel | None``: for inputs of exactly these shapes,
      dtypes and array types (any strides), a function of the raw input arrays alone returning what `forward`
      returns, bit for bit, without forward's checks and without a ctx. A graph-cache replay, whose fit check
      fixes all of those, calls the kernel for each op whose forward state nothing reads (a tenth of a small
      model's replayed step was forward's checks and dispatch); None where forward must run.

    Methods: ``forward(ctx, *arrays) -> array`` and ``backward(ctx, grad) -> tuple`` (one gradient or None per
    input). Backward is written with Tensor/Variable methods, so with ``create_graph=True`` it records a graph of
    its own and higher derivatives come for free. Masks and weights that backward computes from data must come
    from ops (or from ``ctx.state`` filled by forward), never raw arrays built in backward, so that a graph-cache
    replay recomputes them (the capture refuses otherwise). `docs/adding-an-op.md` walks through one op.
    """

    name = "op"
    kind = ""
    rule = ""
    save_inputs = False
    save_output = False
    keeps_finite = False
    differentiable = True
    batched: Any = None
    function: Any = None
    reference: str | None = None
    examples: tuple = ()
    specialize: Callable[..., Callable | None] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            return  # an abstract base (a kind's base class): not an op of its own
        other = OPS.get(cls.name)
        if other is not None and other.__qualname__ != cls.__qualname__:
            raise TypeError(f"op name {cls.name!r} is declared twice: {other.__qualname__} and {cls.__qualname__}")
        if cls.kind and cls.kind not in KINDS:  # an op of your own may leave it unset
            raise TypeError(f"op {cls.name!r} ({cls.__qualname__}): kind must be one of {sorted(KINDS)}, "
                            f"got {cls.kind!r}")
        OPS[cls.name] = cls

    @staticmethod
    def forward(ctx: TapeNode, *arrays: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx: TapeNode, grad: Any) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError


class TapeNode:
    """A recorded operation: the public view of one entry of the tape.

    Attributes: `op` (its Op class, or a BackwardFunction), `name`, `next` (edges to the inputs), `attrs`
    (the op's non-tensor arguments), `module_path` (the module that ran it), `id` (unique, increasing),
    `out_shape` / `out_dtype` (the shape and dtype of the value it produced: known before and after backward,
    even when nothing holds the output, so a renderer can label every node).

    >>> from rtxviz import Variable, Tensor
    >>> y = Variable.from_tensor(Tensor.ones([2, 3])).sum(dim=1)
    >>> y.grad_fn.out_shape, str(y.grad_fn.out_dtype)
    ((2,), 'float32')
    """

    __slots__ = ("op", "next", "inputs", "out_data", "attrs", "state", "module_path", "freed", "id",
                 "mem", "pre_hooks", "site", "out_shape", "out_dtype", "__weakref__")
    #: An edge is a node or a leaf Variable: the backward walk tells them apart by this flag.
    _is_var = False
    op: Any
    next: tuple
    inputs: tuple | None
    out_data: Any
    attrs: dict
    state: Any
    module_path: str | None
    freed: bool
    id: int
    mem: tuple | None
    pre_hooks: list | None
    site: str | None  # where in the user's code it was created, when recorded (detect_anomaly does)
    out_shape: tuple[int, ...] | None
    out_dtype: Any

    # -- what backward rules read ---------------------------------------------------------------------
    @property
    def saved_inputs(self) -> tuple:
        if self.freed or self.inputs is None:
            raise _freed_error(self)
        return self.inputs

    @property
    def output(self) -> Any:
        """The op's output as a Variable connected to this node (rebuilt: nodes never hold their output)."""
        if self.freed:
            raise _freed_error(self)
        return Variable._wrap(self.out_data, self)

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        return tuple(e is not None for e in self.next)

    # -- the public view --------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.op.name

    @property
    def rule(self) -> str:
        return self.op.rule

    @property
    def input_nodes(self) -> tuple:
        """Per input: its TapeNode, the leaf Variable, or None (an input that needs no gradient)."""
        return self.next

    def saved_nbytes(self) -> int:
        """Bytes of arrays this node holds for its backward."""
        total = 0
        if self.inputs is not None:
            total += sum(int(t.data.nbytes) for t in self.inputs if t is not None)
        if self.out_data is not None:
            total += int(self.out_data.nbytes)
        return total

    def saved_tensors(self) -> list[tuple[str, int | None, Any]]:
        """What this node keeps for its backward, as ``(role, index, array)`` in order: ``("input", i, a)`` for the
        op's i-th input, ``("output", None, a)``, and ``("state", j, a)`` for the j-th array of its ``ctx.state``
        (conv2d's columns, dropout's mask). Two entries may share a buffer (``x * x`` saves x twice; a view);
        `memory.root_of` tells. Empty once backward freed them.

        >>> from rtxviz import Variable, Tensor
        >>> x = Variable.from_tensor(Tensor.ones([2, 3]))
        >>> [(role, i, a.shape) for role, i, a in (x * x).grad_fn.saved_tensors()]
        [('input', 0, (2, 3)), ('input', 1, (2, 3))]
        >>> [(role, i) for role, i, a in x.exp().grad_fn.saved_tensors()]
        [('output', None)]
        """
        out: list[tuple[str, int | None, Any]] = []
        if self.inputs is not None:
            out.extend(("input", i, t.data) for i, t in enumerate(self.inputs) if t is not None)
        if self.out_data is not None:
            out.append(("output", None, self.out_data))
        if self.state is not None:
            out.extend(("state", j, a) for j, a in enumerate(_memory.state_arrays(self.state)))
        return out

    def release(self) -> None:
        """Free what backward needed; a later backward through this node raises GraphError."""
        if self.mem is not None:
            _memory.untrack(self.mem)
            self.mem = None
        self.inputs = None
        self.out_data = None
        self.state = None
        self.freed = True
        if self.op.__class__ is UserOp:  # a user BackwardFunction keeps its saved tensors on its context
            self.op.release()

    def __del__(self) -> None:
        # A graph dropped without backward still gives its activation bytes back.
        if self.mem is not None:
            _memory.untrack(self.mem)

    def __repr__(self) -> str:
        return f"<TapeNode #{self.id} {self.op.name}>"


def _freed_error(node: TapeNode) -> GraphError:
    return GraphError(
        f"backward: trying to go through the graph a second time at node #{node.id} ({node.op.name}); its "
        "saved tensors were freed after the first backward. Pass retain_graph=True to the first backward "
        "if you need to backward twice."
    )


def _new_node(op: Any, attrs: dict) -> TapeNode:
    node = object.__new__(TapeNode)
    node.op = op
    node.attrs = attrs
    node.state = None
    node.inputs = None
    node.out_data = None
    node.mem = None
    node.out_shape = None
    node.out_dtype = None
    return node


def _describe(inputs: Sequence[Tensor]) -> str:
    return ", ".join(f"{tuple(t.data.shape)} {t.data.dtype} on {device_of(t.data)}" for t in inputs)


def _check_compatible(op: Any, inputs: Sequence[Tensor]) -> None:
    """Every tensor input of an op must share dtype and device (the slow path of `apply`'s check)."""
    for t in inputs:
        if isinstance(t.data, np.generic):  # numpy hands back scalars for 0-d results: make them arrays again
            t.data = np.asarray(t.data)
    first = inputs[0].data
    for t in inputs[1:]:
        d = t.data
        if type(d) is not type(first) or (type(d) is not np.ndarray and d.device.id != first.device.id):
            raise DeviceError(f"{op.name}: inputs are on different devices: {_describe(inputs)}")
        if d.dtype != first.dtype:
            raise DTypeError(
                f"{op.name}: inputs have different dtypes: {_describe(inputs)}; convert one with .to(dtype=...)"
            )


def _forward_error(op: Any, inputs: Sequence[Tensor], attrs: dict, exc: Exception) -> RtxvizError:
    detail = f"{op.name}: {exc} (inputs: {_describe(inputs)}"
    if attrs:
        detail += f"; attrs: {attrs}"
    detail += ")"
    return ShapeError(detail)


class _ForwardCtx:
    """The context a forward gets when no graph is recorded for the call (grad mode off, as in a backward pass
    without create_graph, or no input requiring grad): what forwards read and write (`attrs`, `state`), without
    a TapeNode's other fields and its finaliser, since it is dropped as soon as the forward returns."""

    __slots__ = ("op", "attrs", "state")


def apply(op: Any, inputs: tuple, attrs: dict = _NO_ATTRS) -> Any:
    """Run `op` forward on `inputs` (Tensors/Variables); record a TapeNode when a graph is wanted.

    The result is a Variable when any input is one (recorded when grad mode is on and an input requires
    grad), else a plain Tensor. This is the hot path of the engine: keep it lean (the one- and two-input cases,
    nearly every op, are unrolled: a loop or a comprehension costs about 100 ns more per op).
    """
    n_in = len(inputs)
    if n_in == 2:
        t, u = inputs
        a, b = t.data, u.data
        if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype is not b.dtype:
            _check_compatible(op, inputs)  # the slow path: it may also turn numpy scalars into arrays
            a, b = t.data, u.data
        is_var = t._is_var or u._is_var
        wants_grad = t.requires_grad or u.requires_grad
    elif n_in == 1:
        t = inputs[0]
        a = t.data
        is_var = t._is_var
        wants_grad = t.requires_grad
    else:
        first = inputs[0].data
        ftype, fdtype = type(first), first.dtype
        for v in inputs:
            d = v.data
            if d.dtype is not fdtype or type(d) is not ftype:
                _check_compatible(op, inputs)
        if ftype is not np.ndarray:
            _check_compatible(op, inputs)
        is_var = wants_grad = False
        for v in inputs:
            if v._is_var:
                is_var = True
                if v.requires_grad:
                    wants_grad = True
    record = wants_grad and STATE.enabled
    hooks = _hooks.ACTIVE
    forward = op.forward
    if hooks:
        for h in hooks:
            h.forward_preprocess(op, inputs, attrs)
        if _hooks.OVERRIDING:  # a hook replaces this call's forward (checkpointing's SELECTIVE strategy)
            forward = _hooks.forward_for(op, inputs, attrs, forward)
    if record:
        node = _node_new(TapeNode)
        node.mem = None
    else:
        node = _node_new(_ForwardCtx)  # type: ignore[assignment]  # what a forward reads of a node, no more
    node.op = op
    node.attrs = attrs
    node.state = None
    try:
        if n_in == 2:
            out = forward(node, a, b)
        elif n_in == 1:
            out = forward(node, a)
        else:
            out = forward(node, *[v.data for v in inputs])
    except RtxvizError:
        raise
    except (ValueError, TypeError, IndexError) as exc:
        raise _forward_error(op, inputs, attrs, exc) from None
    if type(out) is not np.ndarray:
        out = as_array(out, inputs[0].data)
    if not is_var:
        result = _tensor_new(Tensor)
        result.data = out
        result._node = None
        result.requires_grad = False
        node = None  # type: ignore[assignment]  # no graph: hooks see node None
    else:
        result = _var_new(_Variable)
        result.data = out
        result._grad = None
        result.name = None
        result._retains_grad = False
        result._hooks = None
        if record:
            last_write = _versions.RECORDED_LAST
            if last_write:  # a graph's value was written in place: no input may be an outdated alias of it
                for i, v in enumerate(inputs):
                    if v._node is not None and v._node.id < last_write:
                        _versions.check_alias(v, op.name, i)
            # Per input: its node, the leaf itself when it requires grad, else None.
            if n_in == 2:
                node.next = (t._node if t._node is not None else (t if t.requires_grad else None),
                             u._node if u._node is not None else (u if u.requires_grad else None))
            elif n_in == 1:
                node.next = (t._node if t._node is not None else (t if t.requires_grad else None),)
            else:
                node.next = tuple([v._node if v._node is not None else (v if v.requires_grad else None)
                                   for v in inputs])
            if op.save_inputs:
                node.inputs = inputs
                node.out_data = out if op.save_output else None
                node.mem = _memory_track(inputs, node.out_data)
            elif op.save_output:
                node.inputs = None
                node.out_data = out
                node.mem = _memory_track(None, out)
            else:
                node.inputs = node.out_data = None
            if node.state is not None:  # op-private arrays (im2col columns, masks, x̂) are activations too
                node.mem = _memory_track_state(node.state, node.mem)
            node.out_shape = out.shape
            node.out_dtype = out.dtype
            node.module_path = STATE.module_path
            node.freed = False
            node.id = next(_node_ids)
            node.pre_hooks = None
            node.site = None
            result._node = node
            result.requires_grad = True
        else:
            result._node = None
            result.requires_grad = False
            node = None  # type: ignore[assignment]
    if hooks:
        for h in hooks:
            h.forward_postprocess(op, node, inputs, result)
    return result


_memory_track = _memory.track
_memory_track_state = _memory.track_state
_node_new = object.__new__
_tensor_new = object.__new__
_var_new = object.__new__
_Variable = Variable


def as_array(value: Any, like: Any) -> Any:
    """numpy returns scalars for 0-d results; keep everything an ndarray of the input's kind."""
    if type(like) is np.ndarray:
        return np.asarray(value)
    return value


# -- user-defined backward functions ------------------------------------------------------------------------
class BackwardContext:
    """What a BackwardFunction keeps between forward and backward.

    >>> ctx = BackwardContext()
    >>> ctx.save_for_backward(Tensor.ones([2]))
    >>> len(ctx.saved_tensors)
    1
    """

    def __init__(self) -> None:
        self._saved: tuple | None = ()
        self.needs_input_grad: tuple[bool, ...] = ()
        self.input_shapes: tuple[tuple[int, ...], ...] = ()

    def save_for_backward(self, *tensors: Tensor) -> None:
        self._saved = tuple(tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise GraphError("BackwardContext: saved tensors were freed after backward (use retain_graph=True)")
        return self._saved

    def free(self) -> None:
        self._saved = None


class BackwardFunction:
    """A user-defined op, the spec's way: subclass, implement `backward(grad_output)`, record it.

    `backward` receives the output gradient as a plain Tensor and returns one Tensor (or None) per input.
    Saved tensors live on the instance (as the spec's `MatMulBackward { a, b }`) or in `self.ctx`
    (`ctx.save_for_backward`). Optionally implement `forward(ctx, *tensors)` and call the instance on
    Variables, like a built-in op: each call runs on a shallow copy of the instance with a ctx of its own, so one
    instance may be called any number of times. Set `differentiable = True` when backward is written with Variable-safe
    ops and may itself be differentiated (create_graph); otherwise differentiating it twice raises.

    >>> class Square(BackwardFunction):
    ...     rule = "dX = 2·X·dY"
    ...     def forward(self, ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     def backward(self, grad_output):
    ...         (x,) = self.ctx.saved_tensors
    ...         return [grad_output * x * 2.0]
    """

    differentiable = False
    rule = "user-defined backward"

    def __init__(self) -> None:
        self.ctx = BackwardContext()

    @property
    def name(self) -> str:
        return type(self).__name__

    def forward(self, ctx: BackwardContext, *inputs: Tensor) -> Tensor:
        raise NotImplementedError(f"{self.name}: implement forward(ctx, *inputs) to call it on Variables")

    def backward(self, grad_output: Tensor) -> Sequence[Tensor | None]:
        raise NotImplementedError(f"{self.name}: implement backward(grad_output)")

    def __call__(self, *inputs: Any) -> Any:
        # Each call records its own node, so it runs on its own shallow copy with a fresh ctx: an instance called
        # twice (``f(x); f(w)``) must not hand the first node the second call's saved tensors. The instance's
        # `ctx` is the latest call's, to inspect.
        fn = copy.copy(self)
        fn.ctx = self.ctx = BackwardContext()
        ins = [as_tensor_like(x, inputs[0] if isinstance(inputs[0], Tensor) else None) for x in inputs]
        # A differentiable function sees the Variables themselves (its saved tensors keep their graph links,
        # so a second derivative flows through them); any other sees plain Tensors.
        args = ins if self.differentiable else [t.tensor for t in ins]
        with no_grad():
            out = fn.forward(fn.ctx, *args)
        if not isinstance(out, Tensor):
            raise TypeError(f"{self.name}.forward must return a Tensor, got {type(out).__name__}")
        return record_operation(ins, out, fn)


class Function:
    """`torch.autograd.Function`'s spelling of a user-defined op: static `forward(ctx, *args)` and
    `backward(ctx, *grad_outputs)`, called as ``MyFn.apply(*args)``.

    Arguments that are not Tensors (numbers, flags) are passed through to forward and get no gradient: backward
    returns one value per forward argument, None at those positions. Forward runs under no_grad on the Tensors
    themselves; backward is recorded when run under ``create_graph=True``, so a backward written in the engine's
    ops has a second derivative, as in PyTorch. One output Tensor per call (every rtxviz op has one output).

    >>> from rtxviz import tensor
    >>> class Double(Function):
    ...     @staticmethod
    ...     def forward(ctx, x, k):
    ...         ctx.k = k
    ...         return x * k
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g * ctx.k, None
    >>> x = tensor([1.0, 2.0], requires_grad=True)
    >>> Double.apply(x, 3.0).sum().backward(); x.grad.tolist()
    [3.0, 3.0]
    """

    @staticmethod
    def forward(ctx: BackwardContext, *args: Any) -> Tensor:
        raise NotImplementedError("Function: implement forward(ctx, *args) as a @staticmethod")

    @staticmethod
    def backward(ctx: BackwardContext, *grad_outputs: Tensor) -> Any:
        raise NotImplementedError("Function: implement backward(ctx, *grad_outputs) as a @staticmethod")

    def __call__(self, *args: Any) -> Any:
        raise TypeError(f"{type(self).__name__}: call a Function through its class, {type(self).__name__}.apply(...), "
                        "not on an instance (as torch.autograd.Function)")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run `forward` on `args` and record `backward` as the output's rule."""
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        if not positions:  # nothing to differentiate: forward alone, as torch runs it
            with no_grad():
                return cls.forward(BackwardContext(), *args)
        return _AppliedFunction(cls, args, positions)(*(args[i] for i in positions))


class _AppliedFunction(BackwardFunction):
    """A Function class with one call's non-Tensor arguments, as the BackwardFunction that records it."""

    # backward receives Variables and records its ops under create_graph, as PyTorch runs a Function's backward
    differentiable = True

    def __init__(self, cls: type[Function], args: tuple, positions: tuple[int, ...]) -> None:
        super().__init__()
        self.cls, self.args, self.positions = cls, args, positions
        self.needs = tuple(isinstance(a, Tensor) and bool(a.requires_grad) for a in args)
        self.rule = f"{cls.__name__}.backward (user-defined)"

    @property
    def name(self) -> str:
        return self.cls.__name__

    def _with_ctx_flags(self, ctx: BackwardContext) -> BackwardContext:
        ctx.needs_input_grad = self.needs  # one flag per forward argument, as torch's
        return ctx

    def forward(self, ctx: BackwardContext, *tensors: Tensor) -> Tensor:
        full = list(self.args)
        for i, t in zip(self.positions, tensors, strict=True):
            full[i] = t
        out = self.cls.forward(self._with_ctx_flags(ctx), *full)
        if not isinstance(out, Tensor):
            raise TypeError(f"{self.name}.forward must return one Tensor, got {type(out).__name__} "
                            "(rtxviz ops have one output)")
        return out

    def backward(self, grad_output: Tensor) -> Sequence[Tensor | None]:
        result = self.cls.backward(self._with_ctx_flags(self.ctx), grad_output)
        grads = list(result) if isinstance(result, tuple | list) else [result]
        if len(grads) != len(self.args):
            raise GraphError(f"{self.name}.backward returned {len(grads)} gradient(s), but forward took "
                             f"{len(self.args)} argument(s): return one per argument (None for non-Tensors)")
        for i, g in enumerate(grads):
            if g is not None and i not in self.positions:
                raise GraphError(f"{self.name}.backward returned a gradient for argument {i}, which is not a Tensor "
                                 f"({type(self.args[i]).__name__}): return None there")
        return [grads[i] for i in self.positions]


def record_operation(inputs: Sequence[Any], output: Any, backward_fn: BackwardFunction) -> Any:
    """Record that `output` was computed from `inputs`, with `backward_fn` as its backward rule.

    `output` (a Tensor, or a Variable with no graph of its own) becomes a non-leaf Variable; backward then
    calls ``backward_fn.backward(grad)`` and routes its results to `inputs`. Returns that Variable.

    >>> from rtxviz import Variable, Tensor
    >>> x = Variable.from_tensor(Tensor.from_slice([2.0], [1]))
    >>> class Double(BackwardFunction):
    ...     def backward(self, g):
    ...         return [g * 2.0]
    >>> y = record_operation([x], Tensor.from_slice([4.0], [1]), Double())
    >>> y.sum().backward(); x.grad.tolist()
    [2.0]
    """
    if not isinstance(backward_fn, BackwardFunction):
        raise TypeError(f"record_operation: backward_fn must be a BackwardFunction, got {type(backward_fn).__name__}")
    if "ctx" not in backward_fn.__dict__:
        backward_fn.ctx = BackwardContext()
    ins = tuple(inputs)
    for i, t in enumerate(ins):
        if not isinstance(t, Tensor):
            raise TypeError(f"record_operation({backward_fn.name}): input {i} is a {type(t).__name__}, not a Tensor")
    if not isinstance(output, Tensor):
        raise TypeError(f"record_operation({backward_fn.name}): output must be a Tensor, got {type(output).__name__}")
    if output._node is not None:
        raise GraphError(f"record_operation({backward_fn.name}): output already has a recorded op "
                         f"({output._node.op.name}); record a fresh value")
    backward_fn.ctx.needs_input_grad = tuple(bool(t.requires_grad) for t in ins)
    backward_fn.ctx.input_shapes = tuple(t.shape for t in ins)
    if not (STATE.enabled and any(t.requires_grad for t in ins)):
        return Variable._wrap(output.data, None)
    edges = tuple(t._node if t._node is not None else (t if t.requires_grad else None) for t in ins)
    node = _recorded_node(UserOp(backward_fn), edges, output.data)
    node.state = tuple((t.shape, t.dtype) for t in ins)
    result = Variable._wrap(output.data, node)
    if _hooks.ACTIVE:
        for h in _hooks.ACTIVE:
            h.forward_postprocess(node.op, node, ins, result)
    return result


class UserOp:
    """Adapts a BackwardFunction instance to the Op interface the backward walk calls."""

    __slots__ = ("fn",)
    kind = "user"
    save_inputs = False
    save_output = False
    keeps_finite = False

    def __init__(self, fn: BackwardFunction) -> None:
        self.fn = fn

    @property
    def name(self) -> str:
        return self.fn.name

    @property
    def rule(self) -> str:
        return self.fn.rule

    def backward(self, ctx: TapeNode, grad: Any) -> tuple:
        fn = self.fn
        edges = None
        if fn.differentiable:
            result = fn.backward(grad)
        elif STATE.enabled:
            # create_graph=True through a backward that is not differentiable: run it on plain tensors, and make
            # its gradients the outputs of a node that raises only if a second backward actually reaches it
            # (as PyTorch's once_differentiable), so first-order uses of create_graph still work.
            edges = _delayed_edges(grad, ctx)
            STATE.enabled = False
            try:
                result = fn.backward(grad.tensor)
            finally:
                STATE.enabled = True
        else:
            result = fn.backward(grad.tensor)
        if isinstance(result, Tensor):
            result = [result]
        result = list(result)
        if len(result) != len(ctx.next):
            raise GraphError(
                f"{fn.name}.backward returned {len(result)} gradient(s) for {len(ctx.next)} input(s)"
            )
        out: list[Any] = []
        for i, (g, (shape, dtype)) in enumerate(zip(result, ctx.state, strict=True)):
            if g is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise GraphError(f"{fn.name}.backward: gradient {i} is a {type(g).__name__}, not a Tensor")
            if g.shape != shape:
                raise GraphError(
                    f"{fn.name}.backward: gradient {i} has shape {g.shape}, but input {i} has shape {shape}"
                )
            if g.dtype != dtype:
                raise GraphError(f"{fn.name}.backward: gradient {i} has dtype {g.dtype}, input {i} is {dtype}")
            if edges is not None:
                out.append(_delayed_error_value(fn, g.data, edges))
            else:
                out.append(g if isinstance(g, Variable) else Variable._wrap(g.data, None))
        return tuple(out)

    def release(self) -> None:
        self.fn.ctx.free()


def _delayed_edges(grad: Any, ctx: TapeNode) -> tuple | None:
    """What the gradients of a user backward depend on (its incoming gradient and the op's inputs), as edges;
    None when nothing there requires grad (the gradients are then plain constants, as without create_graph)."""
    g_edge = grad._node if grad._node is not None else (grad if grad.requires_grad else None)
    edges = (g_edge,) + tuple(e if e is not None and getattr(e, "requires_grad", True) else None for e in ctx.next)
    return edges if any(e is not None for e in edges) else None


class _NotDifferentiable:
    """The op of a gradient returned by a non-differentiable BackwardFunction under create_graph: differentiating
    it (a second backward reaching it) raises the error that explains how to make the function differentiable."""

    __slots__ = ("fn_name",)
    kind = "gradient"
    save_inputs = False
    save_output = False
    keeps_finite = False
    rule = "not differentiable (a user backward without `differentiable = True`)"

    def __init__(self, fn_name: str) -> None:
        self.fn_name = fn_name

    @property
    def name(self) -> str:
        return f"{self.fn_name}_backward"

    def backward(self, ctx: TapeNode, grad: Any) -> tuple:
        raise GraphError(
            f"{self.fn_name}'s backward is not differentiable: a second backward reached a gradient it returned "
            "under create_graph=True (a higher-order derivative through it). Write its backward with "
            "Variable-safe ops and set `differentiable = True` on the class."
        )


def _delayed_error_value(fn: BackwardFunction, data: Any, edges: tuple) -> Any:
    return _Variable._wrap(data, _recorded_node(_NotDifferentiable(fn.name), edges, data))


def _recorded_node(op: Any, edges: tuple, data: Any) -> TapeNode:
    """A recorded node made outside `apply` (user ops, markers): edges, output metadata, a fresh id.
    (`apply` sets the same fields inline: it is the hot path.)"""
    node = _new_node(op, _NO_ATTRS)
    node.next = edges
    node.out_shape = data.shape
    node.out_dtype = data.dtype
    node.module_path = STATE.module_path
    node.freed = False
    node.id = next(_node_ids)
    node.pre_hooks = None
    node.site = None
    return node


# -- the tape: a recorder of nodes ---------------------------------------------------------------------------
class AutogradTape:
    """Records every TapeNode created while it is active, in creation order.

    >>> from rtxviz import Variable, Tensor
    >>> x = Variable.from_tensor(Tensor.ones([2]))
    >>> with AutogradTape() as tape:
    ...     y = (x * x).sum()
    >>> [node.name for node in tape.nodes]
    ['mul', 'sum']
    """

    def __init__(self) -> None:
        self.nodes: list[TapeNode] = []
        self._hook: _TapeHook | None = None

    def __enter__(self) -> AutogradTape:
        self._hook = _TapeHook(self)
        _hooks.add_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._hook is not None:
            _hooks.remove_hook(self._hook)

    def record_operation(self, inputs: Sequence[Any], output: Any, backward_fn: BackwardFunction) -> Any:
        """The spec's `tape.record_operation(inputs, output, backward)`; see `record_operation`."""
        result = record_operation(inputs, output, backward_fn)
        if result._node is not None and result._node not in self.nodes:
            self.nodes.append(result._node)
        return result

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __repr__(self) -> str:
        return f"AutogradTape({len(self.nodes)} nodes)"


class _TapeHook(_hooks.EngineHook):
    def __init__(self, tape: AutogradTape) -> None:
        self.tape = tape

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        if node is not None and (not self.tape.nodes or self.tape.nodes[-1] is not node):
            self.tape.nodes.append(node)


def walk_nodes(root: TapeNode) -> list[TapeNode]:
    """Every node reachable from `root`, each once, in topological order (root first)."""
    return topological_order([root])


def module_scope(path: str | None) -> Callable[[], Any]:
    """Set the module path that new nodes are tagged with; returns a function restoring the previous one."""
    prev = STATE.module_path
    STATE.module_path = path

    def restore() -> None:
        STATE.module_path = prev

    return restore
