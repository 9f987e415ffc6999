"""The reverse walk: topological order, accumulation, leaf gradients, freeing, create_graph.

Iterative throughout (a 100,000-op chain needs no recursion). Each node runs once, after every consumer
has sent it its gradient; gradients that meet at a node are summed there.

The walk sits below `Variable` and `TapeNode` and knows them by what they offer, not by import: an edge of
a node is a recorded node or a leaf Variable (``e._is_var`` tells them apart), a node's backward rule is
``node.op.backward(node, grad)``, and gradients are wrapped as Variables with the root's own ``_wrap``. So
`Variable.backward` can call `run_backward` with no import circle.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import hooks as _hooks
from . import versions as _versions
from .device import device_of, xp_of
from .errors import GraphError
from .grad_mode import STATE
from .memory import root_of
from .tensor import Tensor, as_tensor_like

if TYPE_CHECKING:  # for annotations only: at run time the walk knows both by protocol
    from .graph import TapeNode
    from .variable import Variable


def _initial_grad(root: Variable, grad: Any) -> Variable:
    if grad is None:
        if root.data.size != 1:
            raise GraphError(
                f"backward: grad_output can be omitted only for a one-element output; this output has shape "
                f"{root.shape}. Pass grad_output of that shape (e.g. Tensor.ones({list(root.shape)}))"
            )
        data = root.data
        if type(data) is np.ndarray and data.ndim == 0:  # the usual loss: one C call instead of numpy's ones()
            seed = root._wrap(np.array(1, dtype=data.dtype), None)
        else:
            seed = root._wrap(xp_of(data).ones(data.shape, dtype=data.dtype), None)
        if _hooks.TRACING:
            _hooks.trace("seed_grad", root=root, grad=seed)
        return seed
    g = as_tensor_like(grad, root)
    if g.shape != root.shape:
        raise GraphError(f"backward: grad_output has shape {g.shape}, but the output has shape {root.shape}")
    if g.dtype != root.dtype:
        raise GraphError(f"backward: grad_output has dtype {g.dtype}, but the output has dtype {root.dtype}")
    if type(g.data) is not type(root.data):
        raise GraphError(f"backward: grad_output is on {g.device}, but the output is on {root.device}")
    return g if g._is_var else root._wrap(g.data, None)  # type: ignore[return-value]  # a Variable by _is_var


def _is_broadcast_view(array: Any) -> bool:
    """A view whose elements alias one another (np.broadcast_to's): numpy marks it read-only; cupy's flags have
    no `writeable`, so there a zero stride over a dim longer than 1 says it."""
    if type(array) is np.ndarray:
        return not array.flags.writeable
    return any(st == 0 and n > 1 for st, n in zip(array.strides, array.shape, strict=True))


def _accumulate(prev: Any, new: Any, create_graph: bool) -> Any:
    if prev is None:
        return new
    if create_graph or _hooks.ACTIVE:
        # Through the add op: differentiable with create_graph, and visible to hooks (graph-cache capture).
        return prev + new
    total = prev.data + new.data
    if type(total) is not np.ndarray and isinstance(total, np.generic):
        total = np.asarray(total)  # numpy returns a scalar for 0-d sums
    return prev._wrap(total, None)


def _run_pre_hooks(pre_hooks: list, g: Any) -> Any:
    """User hooks first (each may replace the gradient), retain_grad last: as PyTorch, `.grad` of a non-leaf
    sees the replaced gradient whatever the registration order."""
    retains = []
    for fn in list(pre_hooks):
        if fn.__class__ is RetainGrad:
            retains.append(fn)
            continue
        replaced = fn(g)
        if replaced is not None:
            g = _checked_replacement(fn, g, replaced)
    for fn in retains:
        fn(g)
    return g


def _checked_replacement(fn: Any, g: Any, new: Any) -> Variable:
    """A hook's replacement gradient must look like the gradient it replaces (as PyTorch: "hook has changed
    the size/type of value"); a silently reshaped gradient would reach `.grad` with the wrong shape."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    if not isinstance(new, Tensor):
        raise GraphError(f"hook {name} returned a {type(new).__name__}; a gradient hook must return a Tensor or None")
    if new.shape != g.shape:
        raise GraphError(f"hook {name} has changed the size of the gradient: it received shape {g.shape} and "
                         f"returned shape {new.shape}")
    if new.dtype != g.dtype:
        raise GraphError(f"hook {name} has changed the type of the gradient: it received dtype {g.dtype} and "
                         f"returned dtype {new.dtype}")
    if device_of(new.data) != device_of(g.data):
        raise GraphError(f"hook {name} has changed the device of the gradient: it received a gradient on "
                         f"{device_of(g.data)} and returned one on {device_of(new.data)}")
    return new if new._is_var else g._wrap(new.data, None)  # type: ignore[return-value]  # likewise


class RetainGrad:
    """A node pre-hook that stores the arriving gradient on a non-leaf Variable."""

    def __init__(self, var: Variable) -> None:
        self.ref = weakref.ref(var)

    def __call__(self, grad: Any) -> None:
        var = self.ref()
        if var is not None:
            var.grad = grad if var.grad is None else var.grad + grad


def topological_order(roots: Sequence[TapeNode]) -> list[TapeNode]:
    """Every node reachable from `roots`, each once, consumers before producers (the order backward runs in).

    Reverse post-order of an iterative depth-first search: no recursion, so a 100,000-op chain is fine.
    """
    visited: set[int] = set()
    order: list[TapeNode] = []
    stack: list[Any] = [(r, False) for r in reversed(roots)]
    add = visited.add
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        nid = id(node)
        if nid in visited:
            continue
        add(nid)
        stack.append((node, True))
        for e in node.next:
            if e is not None and not e._is_var and id(e) not in visited:
                stack.append((e, False))
    order.reverse()
    return order


def accumulate_leaf_grad(leaf: Variable, g: Any, create_graph: bool, claimed: set[int] | None = None) -> None:
    """Add one backward pass's gradient into `leaf.grad` (a fresh array: gradients are never updated in place).

    `claimed`: the buffers already handed out in this pass (to other leaves, retained gradients, the caller's
    grad_output). A gradient that reads one of them is copied, so no two tensors ever share a gradient buffer
    (a rule like add's passes one gradient to both inputs; scaling one leaf's .grad in place must not scale the
    other's)."""
    data = g.data
    if type(data) is np.ndarray:  # the usual case, tested with the fewest lookups
        if not create_graph and not data.flags.writeable:
            g = leaf._wrap(data.copy(), None)  # a broadcast view repeats its elements: own the gradient
            data = g.data
    else:
        if isinstance(data, np.generic):
            g = leaf._wrap(np.asarray(data), g._node)
            data = g.data
        if not create_graph and _is_broadcast_view(data):
            g = leaf._wrap(data.copy(), None)
            data = g.data
    dtype = leaf.data.dtype
    if data.dtype is not dtype and data.dtype != dtype:
        g = leaf._wrap(data.astype(dtype), None)
        data = g.data
    if leaf._grad is None:
        if claimed is not None:
            root = id(data) if data.base is None else id(root_of(data))
            if root in claimed:
                g = leaf._wrap(data.copy(), g._node)
                root = id(g.data)
            claimed.add(root)
        leaf._grad = g  # not through the setter: backward reports its accumulation as leaf_grad
    else:
        leaf._grad = _accumulate(leaf._grad, g, create_graph)



def accumulate_leaf_array(leaf: Variable, data: Any, claimed: set[int]) -> None:
    """`accumulate_leaf_grad(leaf, leaf._wrap(data, None), False, claimed)` for a graph-cache replay, which holds
    its gradients as raw arrays: the Variable is built once, for `.grad`, not first to carry the array here (six
    wrappers and lookups per step of a small MLP). Keep the two in step: same copies, same claimed rule."""
    if type(data) is not np.ndarray:  # numpy scalars, cupy arrays: the general path
        accumulate_leaf_grad(leaf, leaf._wrap(data, None), False, claimed)
        return
    if not data.flags.writeable:
        data = data.copy()  # a broadcast view repeats its elements: own the gradient
    dtype = leaf.data.dtype
    if data.dtype is not dtype and data.dtype != dtype:
        data = data.astype(dtype)
    if leaf._grad is None:
        root = id(data) if data.base is None else id(root_of(data))
        if root in claimed:
            data = data.copy()
            root = id(data)
        claimed.add(root)
        leaf._grad = leaf._wrap(data, None)
    else:
        leaf._grad = _accumulate(leaf._grad, leaf._wrap(data, None), False)

_NONE_WANTED: dict[int, int] = {}  # what a walk without `inputs` looks up in (never written)


def run_backward(
    outputs: Sequence[Variable],
    grad_outputs: Sequence[Any],
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Sequence[Variable] | None = None,
    allow_unused: bool = False,
    plan: dict | None = None,
) -> list[Any] | None:
    """Backpropagate from `outputs`. Without `inputs`, accumulate into every reachable leaf's `.grad`;
    with `inputs`, return their gradients instead (as `rtxviz.grad`) and touch no `.grad`.

    `plan`: a dict the caller keeps across repeated walks of one unchanged retained graph (a Hessian's or
    Jacobian's row loop); the walk's order and pruning are computed on the first walk, stored there, and reused,
    so each later row pays only for the backward rules."""
    if retain_graph is None:
        retain_graph = create_graph
    claimed: set[int] = set()  # buffers handed out this pass (see accumulate_leaf_grad)
    roots: list[TapeNode] = []
    grads: dict[int, Any] = {}
    leaf_grads: dict[int, list] = {}
    for out, g in zip(outputs, grad_outputs, strict=True):
        if not getattr(out, "_is_var", False) or not out.requires_grad:
            raise GraphError(
                "backward: this value does not require grad and has no recorded op; make its inputs "
                "Variables with requires_grad=True (and check it was not computed under no_grad)"
            )
        g0 = _initial_grad(out, g)
        if g is not None:
            claimed.add(id(root_of(g0.data)))  # the caller's array: no leaf's .grad may be it
        if out._node is None:  # a leaf: its gradient is the seed itself
            entry = leaf_grads.get(id(out))
            leaf_grads[id(out)] = [out, g0 if entry is None else _accumulate(entry[1], g0, create_graph)]
            continue
        roots.append(out._node)
        key = id(out._node)
        grads[key] = _accumulate(grads.get(key), g0, create_graph)

    wanted_nodes: dict[int, int] = _NONE_WANTED
    wanted_leaves: dict[int, int] = _NONE_WANTED
    selecting = inputs is not None
    if inputs is not None:
        wanted_nodes, wanted_leaves = {}, {}
        for i, v in enumerate(inputs):
            if not getattr(v, "_is_var", False) or not v.requires_grad:
                raise GraphError(f"grad: input {i} does not require grad")
            if v._node is None:
                wanted_leaves[id(v)] = i
            else:
                wanted_nodes[id(v._node)] = i
    results: list[Any] = [None] * (len(inputs) if inputs is not None else 0)

    if plan:
        order, must_run = plan["order"], plan["must_run"]
    else:
        order = topological_order(roots)
        must_run = set()
        if inputs is not None:
            order, must_run = _prune(order, wanted_nodes, wanted_leaves)
        if plan is not None:
            plan["order"], plan["must_run"] = order, must_run
    hooks = _hooks.ACTIVE
    if hooks:
        for h in hooks:
            h.backward_begin(list(outputs), create_graph)
    prev_mode = STATE.enabled
    STATE.enabled = create_graph
    node: Any = None
    try:
        for node in order:
            key = id(node)
            g = grads.pop(key, None)
            if g is None:
                continue
            if node.pre_hooks:
                g = _run_pre_hooks(node.pre_hooks, g)
                claimed.add(id(root_of(g.data)))  # a retained gradient, or one a hook kept
            if selecting:
                if key in wanted_nodes:
                    results[wanted_nodes[key]] = g
                if key not in must_run:
                    continue
            if node.id < _versions.LAST_STAMP:  # something was written in place since this node was recorded
                _versions.check(node)
            if node.freed:
                raise GraphError(
                    f"backward: trying to go through the graph a second time at node #{node.id} "
                    f"({node.op.name}); its saved tensors were freed after the first backward. Pass "
                    "retain_graph=True to the first backward if you need to backward twice."
                )
            if hooks:
                for h in hooks:
                    h.backward_preprocess(node, g)
            in_grads = node.op.backward(node, g)
            if hooks:
                for h in hooks:
                    h.backward_postprocess(node, g, in_grads)
            if not retain_graph:
                node.release()
            for e, gi in zip(node.next, in_grads, strict=False):
                if e is None or gi is None:
                    continue
                ek = id(e)
                if not e._is_var:  # a node
                    prev = grads.get(ek)
                    grads[ek] = gi if prev is None else _accumulate(prev, gi, create_graph)
                else:
                    entry = leaf_grads.get(ek)
                    if entry is None:
                        leaf_grads[ek] = [e, gi]
                    else:
                        entry[1] = _accumulate(entry[1], gi, create_graph)
    except Exception as exc:
        if hooks:  # the pass ends here: watchers hear why (the page marks the node) and that it ended
            _hooks.emit("backward_error", node=node, error=type(exc).__name__, message=str(exc))
            for h in hooks:
                h.backward_end()
        raise
    finally:
        STATE.enabled = prev_mode

    for leaf, g in leaf_grads.values():
        if leaf._hooks:
            for fn in list(leaf._hooks):
                replaced = fn(g)
                if replaced is not None:
                    g = _checked_replacement(fn, g, replaced)
        if selecting:
            idx = wanted_leaves.get(id(leaf))
            if idx is not None:
                results[idx] = g
            continue
        if hooks:
            for h in hooks:
                h.leaf_grad(leaf, g)  # the contribution of this pass, before it joins .grad
        accumulate_leaf_grad(leaf, g, create_graph, claimed)
        if _hooks.TRACING:
            _hooks.trace("leaf_grad_accumulated", leaf=leaf, grad=g, create_graph=create_graph)
    if hooks:
        for h in hooks:
            h.backward_end()
    if inputs is None:
        return None
    for i, r in enumerate(results):
        if r is None and not allow_unused:
            raise GraphError(
                f"grad: input {i} was not used to compute the outputs (pass allow_unused=True to get None)"
            )
    return results


def _prune(order: list[TapeNode], wanted_nodes: dict, wanted_leaves: dict) -> tuple[list[TapeNode], set[int]]:
    """Keep the nodes on a path to a wanted input; also say which of them must run their backward (those
    that feed a wanted input below them, as opposed to wanted intermediates that only collect)."""
    useful: set[int] = set()
    run: set[int] = set()
    for node in reversed(order):  # producers first
        feeds = False
        for e in node.next:
            if e is not None and ((not e._is_var and id(e) in useful) or id(e) in wanted_leaves):
                feeds = True
                break
        if feeds:
            run.add(id(node))
        if feeds or id(node) in wanted_nodes:
            useful.add(id(node))
    return [n for n in order if id(n) in useful], run


def grad(
    outputs: Variable | Sequence[Variable],
    inputs: Variable | Sequence[Variable],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[Any, ...]:
    """The gradients of `outputs` with respect to `inputs`, as `torch.autograd.grad`; `.grad` is untouched.

    >>> from rtxviz import Variable, Tensor
    >>> x = Variable.from_tensor(Tensor.from_slice([3.0], [1], dtype="float64"))
    >>> (g,) = grad((x * x * x).sum(), x, create_graph=True)
    >>> (g2,) = grad(g.sum(), x)
    >>> g.tolist(), g2.tolist()
    ([27.0], [18.0])
    """
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        gouts = [None] * len(outs)
    elif isinstance(grad_outputs, list | tuple):
        gouts = list(grad_outputs)
    else:
        gouts = [grad_outputs]
    results = run_backward(outs, gouts, retain_graph, create_graph, ins, allow_unused)
    assert results is not None  # with `inputs`, run_backward returns their gradients
    return tuple(results)
