"""The graph cache: run a function once under a recording hook, then replay its ops as a flat array program.

A training step (forward, loss, ``loss.backward()``) is captured once per input signature: every op it applies,
forward and the ops its backward rules run, becomes one line of a generated Python function that calls the op's
``forward`` on raw arrays. Replaying that function builds no Variables, no TapeNodes, runs no backward walk and
no argument checking, which is most of what a small step costs in eager mode.

>>> import rtxviz
>>> from rtxviz import Tensor, Variable
>>> from rtxviz.engine.graph_cache import init_graph_cache, cache_graph, get_cached_graph
>>> w = Variable(Tensor.ones([3]).data, requires_grad=True)
>>> def step(x):
...     loss = (x * w).sum()
...     loss.backward()
...     return loss
>>> init_graph_cache(16)
>>> graph = cache_graph(step, Tensor.ones([3]))        # runs `step` once, eagerly, and records it
>>> w.grad = None
>>> get_cached_graph((3,)) is graph
True
>>> graph.execute(Tensor.full([3], 2.0)).item(), w.grad.tolist()
(6.0, [2.0, 2.0, 2.0])

What a replay can and cannot see is in docs/graph_cache.md. In short: values flow in through the inputs,
parameters (leaf Variables that require grad, read afresh on each replay, so optimizer steps are fine),
constant tensors that existed before the capture (read by reference), and Python scalars (baked in). The training
flag and structure of every nn.Module fn called are checked on each replay (a change is a miss). Anything
else a captured function computes outside the engine's ops makes the capture refuse with `GraphCacheError`
instead of replaying a stale value.
"""

from __future__ import annotations

import gc
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable
from threading import get_ident
from typing import Any

import numpy as np

from . import backward as _backward
from . import hooks as _hooks
from .device import device_of
from .errors import GraphError
from .grad_mode import STATE
from .graph import _as_array
from .tensor import Tensor
from .variable import Variable

__all__ = [
    "CachedGraph", "GraphCacheError", "cache_graph", "get_cached_graph", "graph_cache_stats", "init_graph_cache",
    "run_cached",
]


class GraphCacheError(GraphError):
    """A function cannot be captured safely, or a cached graph does not fit the call (a miss).

    `result` holds what the function returned when a capture was refused after the function had already run
    once eagerly (its effects, such as gradients accumulated into parameters, have happened)."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


# ------------------------------------------------------------------------------------------------------------
# Bindings: where an array an op reads comes from, at replay time.
# ------------------------------------------------------------------------------------------------------------
_IN, _SLOT, _PARAM, _REF, _CONST, _STATE, _BAD = range(7)
_ATOMS = (int, float, bool, str, bytes, complex, slice, type(None), type(Ellipsis), np.generic, np.dtype, type)
# State entries never worth indexing by identity (small ints, dtypes and the like are shared singletons).
_STATE_SKIP = (int, bool, str, bytes, slice, type(None), type(Ellipsis), np.dtype, type)
_SLOT_ARRAY_MIN_BYTES = 4096  # intermediates at least this big are freed at their last use in the replay


def _is_array(v: Any) -> bool:
    return type(v) is np.ndarray or hasattr(v, "__cuda_array_interface__")


def _sig_of(t: Any) -> tuple:
    """One input's signature: shape, dtype, device, and what kind of value it is (Tensor, leaf Variable)."""
    d = t.data
    kind = "var" if t._is_var and t.requires_grad else ("const_var" if t._is_var else "tensor")
    return (tuple(d.shape), d.dtype, str(device_of(d)), kind)


def _checksum(a: Any) -> Any:
    """A cheap fingerprint of an array's bytes (numpy: CRC32 without a copy; cupy: none, identity only)."""
    if type(a) is not np.ndarray:
        return None
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return zlib.crc32(memoryview(a).cast("B"))


class _ReplayCtx:
    """What an op's forward receives during a replay: its attrs and a place for its state (TapeNode-like, but
    with no finalizer and no memory accounting: a replay records no graph)."""

    __slots__ = ("attrs", "state")


# ------------------------------------------------------------------------------------------------------------
# Capture
# ------------------------------------------------------------------------------------------------------------
class _Capture(_hooks.EngineHook):
    """Records each op application of one run of fn as an instruction with bound inputs.

    Everything it learns comes through the hook interface: the per-op calls, and the trace events (`traces`):
    constants made from Python values, backward's ones seed, leaf-gradient accumulation, values read into Python.
    It listens to the thread that runs fn only (hooks are global; other threads' ops are no part of fn).
    """

    name = "graph_cache_capture"
    traces = True

    def __init__(self, inputs: tuple) -> None:
        self.inputs = inputs
        self.instrs: list[tuple] = []       # ("op", k, op, attrs_tpl, in_refs, out_slot, zero_d) | others below
        self.where: dict[int, tuple] = {}   # id(array or state object) -> binding
        self.keep: list[Any] = []           # keeps every indexed object alive, so ids stay unique
        self.n_slots = 0
        self.n_ops = 0
        self.params: list[Variable] = []
        self.param_ids: dict[int, int] = {}
        self.refs: list[Tensor] = []
        self.ref_ids: dict[int, int] = {}
        self.consts: list[Any] = []
        self.const_ids: dict[int, int] = {}
        self.scalar_consts: set[int] = set()
        self.nodes: dict[int, int] = {}     # id(TapeNode) -> instruction index of its forward
        self.pending: tuple | None = None
        self.suspended = 0
        self.leaf_pending: tuple | None = None
        self.grad_after: dict[int, Any] = {}  # id(leaf) -> the .grad object the last accumulation left
        self.grad_objs: dict[int, tuple] = {}  # id(a leaf's .grad Variable) -> that leaf (fn reads p.grad)
        self.param_sums: dict[int, Any] = {}
        self.refusals: list[str] = []
        self.in_objs = {id(t): j for j, t in enumerate(inputs)}
        self.in_arrays = {id(t.data): j for j, t in enumerate(inputs)}
        self.modules: dict[int, tuple] = {}  # id(module) -> (module, training at its first call)
        self.thread = get_ident()
        self._snapshot()

    # -- what existed before fn ran ---------------------------------------------------------------------------
    def _snapshot(self) -> None:
        """Every Tensor alive now (gc-tracked): an unknown array later is a pre-existing constant only if it is
        one of these. Holding them keeps their ids and their arrays' ids from being reused during capture."""
        self.pre_objs: dict[int, Tensor] = {}
        self.pre_arrays: dict[int, Tensor] = {}
        self.pre_leaves: list[tuple] = []  # (leaf Variable requiring grad, its data, its grad)
        for o in gc.get_objects():
            if isinstance(o, Tensor):
                self.pre_objs[id(o)] = o
                d = o.data
                if id(d) not in self.pre_arrays or (o._is_var and o.requires_grad and o._node is None):
                    self.pre_arrays[id(d)] = o
                if o._is_var and o.requires_grad and o._node is None:
                    self.pre_leaves.append((o, d, o.grad))
        self.pre_grads = {id(leaf): g for leaf, _, g in self.pre_leaves}

    # -- refusing -------------------------------------------------------------------------------------------
    def refuse(self, msg: str) -> tuple:
        if len(self.refusals) < 5:
            self.refusals.append(msg)
        return (_BAD,)

    # -- binding -------------------------------------------------------------------------------------------
    def _param(self, p: Variable) -> tuple:
        n = self.param_ids.get(id(p))
        if n is None:
            n = self.param_ids[id(p)] = len(self.params)
            self.params.append(p)
            self.param_sums[id(p)] = _checksum(p.data)
        return (_PARAM, n)

    def _ref(self, t: Tensor) -> tuple:
        n = self.ref_ids.get(id(t))
        if n is None:
            n = self.ref_ids[id(t)] = len(self.refs)
            self.refs.append(t)
        return (_REF, n)

    def const(self, a: Any) -> tuple:
        n = self.const_ids.get(id(a))
        if n is None:
            n = self.const_ids[id(a)] = len(self.consts)
            self.consts.append(a)
        return (_CONST, n)

    def bind_array(self, a: Any) -> tuple | None:
        i = id(a)
        j = self.in_arrays.get(i)
        if j is not None:
            return (_IN, j)
        r = self.where.get(i)
        if r is not None:
            return r
        o = self.pre_arrays.get(i)
        if o is not None:
            if o._is_var and o.requires_grad:
                if o._node is None:
                    return self._param(o)
                return self.refuse("a value computed before the capture with a graph of its own (grad_fn "
                                   f"{o._node.op.name}) is used inside fn; detach() it or pass it as an input")
            return self._ref(o)
        if i in self.scalar_consts:
            return self.const(a)
        return None

    def bind_tensor(self, t: Any, where: str, grads: bool = True) -> tuple:
        j = self.in_objs.get(id(t))
        if j is not None:
            return (_IN, j)
        if grads and id(t) in self.grad_objs:
            # fn reads p.grad after backward: read it at this point of the replay (it may have accumulated).
            m = self.n_slots
            self.n_slots += 1
            self.instrs.append(("grad", m, self.grad_objs[id(t)]))
            return (_SLOT, m)
        if t._is_var and t.requires_grad and t._node is None and id(t) not in self.pre_objs \
                and id(t.data) not in self.in_arrays:
            return self.refuse(f"{where}: a Variable that requires grad was created inside fn; create parameters "
                               "before capturing, or pass the value as an input")
        r = self.bind_array(t.data)
        if r is None:
            return self.refuse(f"{where}: its value was computed during capture outside the engine's ops (a "
                               f"{t.data.dtype} array of shape {tuple(t.data.shape)}, e.g. a mask a backward "
                               "rule built from data with raw numpy, a Tensor made inside fn with Tensor.randn/"
                               "zeros/from_slice, or a comparison result); a replay would reuse its captured "
                               "value, so the function is not cached")
        return r

    def bind_attr(self, v: Any, where: str, depth: int = 0) -> Any:
        """None when `v` is a constant; else a template that rebuilds it from bindings at replay."""
        if isinstance(v, _ATOMS):
            return None
        r = self.where.get(id(v))
        if r is not None and r[0] == _STATE:
            return ("bind", r)
        if isinstance(v, Tensor):
            return ("tensor", v._is_var, self.bind_tensor(v, where))
        if _is_array(v):
            b = self.bind_array(v)
            if b is None:
                b = self.refuse(f"{where}: an attribute holds an array computed during capture outside the "
                                f"engine's ops ({v.dtype} {tuple(v.shape)}); a replay would reuse it stale")
            return ("bind", b)
        if depth > 4:
            return None
        if type(v) in (tuple, list):
            subs = [self.bind_attr(e, where, depth + 1) for e in v]
            if all(s is None for s in subs):
                return None
            return ("seq", type(v), [(s, e) for s, e in zip(subs, v, strict=True)])
        if type(v) is dict:
            subs = {k: self.bind_attr(e, f"{where}[{k!r}]", depth + 1) for k, e in v.items()}
            if all(s is None for s in subs.values()):
                return None
            return ("dict", [(k, subs[k], e) for k, e in v.items()])
        slots = getattr(type(v), "__slots__", None)
        if slots and not callable(v):
            names = (slots,) if isinstance(slots, str) else tuple(slots)
            names = tuple(n for n in names if n != "__weakref__" and hasattr(v, n))
            subs = [self.bind_attr(getattr(v, n), where, depth + 1) for n in names]
            if all(s is None for s in subs):
                return None
            return ("obj", type(v), [(n, s, getattr(v, n)) for n, s in zip(names, subs, strict=True)])
        return None

    def new_slot(self, a: Any) -> tuple:
        m = self.n_slots
        self.n_slots += 1
        ref = (_SLOT, m)
        self.where[id(a)] = ref
        self.keep.append(a)
        return ref

    def _index_state(self, k: int, state: Any) -> None:
        """Make the state a forward left on its ctx addressable: backward rules hand it (or its parts) on."""
        self.keep.append(state)
        todo = [(state, ())]
        while todo:
            obj, path = todo.pop()
            if isinstance(obj, _STATE_SKIP):
                continue
            if id(obj) not in self.where:
                self.where[id(obj)] = (_STATE, k, path)
            if len(path) >= 2:
                continue
            if type(obj) is tuple:
                todo.extend((e, (*path, i)) for i, e in enumerate(obj))
            else:
                slots = getattr(type(obj), "__slots__", None)
                if slots and not _is_array(obj) and not isinstance(obj, Tensor):
                    names = (slots,) if isinstance(slots, str) else slots
                    todo.extend((getattr(obj, n), (*path, "." + n)) for n in names
                                if n != "__weakref__" and hasattr(obj, n))

    # -- hook methods ---------------------------------------------------------------------------------------
    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None:
        if get_ident() == self.thread:
            self.pending = (op, inputs, attrs)

    def forward_postprocess(self, node: Any, inputs: tuple, output: Any) -> None:
        if get_ident() != self.thread:
            return
        pending, self.pending = self.pending, None
        if pending is None or pending[1] is not inputs or self.suspended:
            return  # record_operation (no forward of its own), or an op inside accumulate_leaf_grad
        op, _, attrs = pending
        where = f"op {op.name}"
        in_refs = tuple(self.bind_tensor(t, f"{where} (input {i})") for i, t in enumerate(inputs))
        tpl = self.bind_attr(attrs, where) if attrs else None
        out = output.data
        k = len(self.instrs)
        ref = self.new_slot(out)
        self.instrs.append(("op", k, op, attrs, tpl, in_refs, ref[1], out.ndim == 0))
        self.n_ops += 1
        if node is not None:
            self.nodes[id(node)] = k
            self.keep.append(node)
            if node.state is not None:
                self._index_state(k, node.state)

    def backward_preprocess(self, node: Any, grad_output: Any) -> None:
        if get_ident() != self.thread:
            return
        if id(node) not in self.nodes and node.op.__class__.__name__ != "_UserOp":
            self.refuse(f"backward reaches node #{node.id} ({node.op.name}), recorded before the capture; fn must "
                        "compute everything it differentiates (detach values made outside it, or pass them in)")
        if node.pre_hooks:
            self.refuse(f"a hook (register_hook / retain_grad) on the output of {node.op.name} runs during backward;"
                        " a replay runs no Python hooks, so the function is not cached")

    def leaf_grad(self, variable: Any, grad: Any) -> None:
        if get_ident() != self.thread:
            return
        # Backward is about to add this pass's contribution into variable.grad; the ops that addition runs
        # (through `add` while hooks are attached) are not recorded: the replay calls accumulate_leaf_grad itself.
        before = self.grad_after.get(id(variable), self.pre_grads.get(id(variable), variable.grad))
        self.leaf_pending = (variable, grad, before, variable.grad)
        self.suspended += 1

    def event(self, kind: str, **fields: Any) -> None:
        if get_ident() != self.thread:
            return  # another thread's engine work is no part of fn
        if kind == "constant":
            self.constant(fields["tensor"])
        elif kind == "seed_grad":
            a = fields["grad"].data
            m = self.new_slot(a)[1]
            self.instrs.append(("seed", m, tuple(a.shape), a.dtype, type(a).__module__.split(".")[0]))
        elif kind == "value_read":
            self.guard(fields["how"], fields["tensor"])
        elif kind == "leaf_grad_accumulated":
            self.accumulated(fields["leaf"], fields["grad"], fields["create_graph"])
        elif kind == "module_call":
            self.module_call(fields["module"], fields["training"])

    # -- trace events (hooks.TRACE_KINDS) ----------------------------------------------------------------------
    def constant(self, t: Tensor) -> None:
        """A constant made from a Python/numpy value (an operand, a default weight, a rule's 0-d zero): baked into
        the program, as a tracer would. An operand that is (the data of) a tensor fn knows stays bound to it."""
        a = t.data
        self.keep.append(a)
        if id(a) not in self.in_arrays and id(a) not in self.where:
            self.scalar_consts.add(id(a))

    def accumulated(self, leaf: Any, g: Any, create_graph: bool) -> None:
        pend, self.leaf_pending = self.leaf_pending, None
        if pend is None or pend[0] is not leaf:  # pragma: no cover - the engine reports both, in this order
            self.refuse("internal: a leaf gradient was accumulated without the leaf_grad report before it")
            return
        self.suspended -= 1
        _, g, before, grad_then = pend
        j = self.in_objs.get(id(leaf))
        if j is not None:
            target = (_IN, j)
        elif id(leaf) in self.pre_objs:
            target = self._param(leaf)
        else:
            target = self.refuse("backward accumulates a gradient into a Variable created inside fn; create "
                                 "parameters before capturing")
        if target[0] != _BAD:
            if grad_then is not before:
                if grad_then is None:
                    self.instrs.append(("reset", target))  # zero_grad() inside fn: replayed as grad = None
                else:
                    self.refuse(f"fn set .grad of a {leaf.shape} Variable itself before backward; a replay "
                                "only repeats backward's accumulation (set grads to None, or zero them outside fn)")
            if leaf._hooks:
                self.refuse("a hook registered on a parameter (register_hook) runs during backward; a replay runs "
                            "no Python hooks, so the function is not cached")
            self.instrs.append(("leaf", target, self.bind_tensor(g, "a leaf gradient", grads=False),
                                bool(create_graph)))
        self.grad_after[id(leaf)] = leaf.grad
        if target[0] != _BAD and leaf.grad is not None:
            self.keep.append(leaf.grad)
            self.grad_objs[id(leaf.grad)] = target

    def module_call(self, module: Any, training: bool) -> None:
        """A Module was called (nn.Module.__call__): its training flag chose the Python path fn took (dropout on
        or off), so a replay is valid only while the flag and the module's structure stay as they were."""
        seen = self.modules.get(id(module))
        if seen is None:
            # setdefault: a module built without Module.__init__ (unpickled from an old file) gets a version now
            self.modules[id(module)] = (module, training, module.__dict__.setdefault("_version", 0))
        elif seen[1] != training:
            self.refuse(f"module {_module_name(module)} was called in both training and eval mode inside fn; a "
                        "replay does not repeat mode switches (set the mode outside the cached function)")

    def module_sig(self) -> tuple:
        """Per module fn called: (weakref, training, structure version, name). Refuses a module whose mode or
        structure fn itself changed (a replay would not repeat that)."""
        out = []
        for module, training, version in self.modules.values():
            d = module.__dict__
            if d.get("training") != training:
                self.refuse(f"fn switched module {_module_name(module)} to {_mode(d.get('training'))} mode after "
                            f"calling it in {_mode(training)} mode; a replay does not repeat mode switches (set "
                            "the mode outside the cached function)")
            if d.get("_version") != version:
                self.refuse(f"fn assigned a parameter, buffer, child module or tensor attribute of module "
                            f"{_module_name(module)} after calling it; a replay would not repeat that")
            out.append((weakref.ref(module), training, version, _module_name(module)))
        return tuple(out)

    def guard(self, how: str, t: Any) -> None:
        i = id(t.data)
        if id(t) in self.pre_objs and not (t._is_var and t.requires_grad) and i not in self.in_arrays \
                and i not in self.where:
            return  # a constant that existed before the capture: reading it cannot depend on the inputs
        self.refuse(f"fn reads a tensor's values into Python with Tensor.{how} during capture; control flow or "
                    "values that depend on data cannot be replayed (return the tensor instead, or compute the "
                    "Python value outside the cached function)")

    # -- the end of capture ------------------------------------------------------------------------------------
    def audit(self) -> None:
        """Effects on parameters that a replay would not repeat."""
        for leaf, data, grad in self.pre_leaves:
            if leaf.data is not data:
                self.refuse(f"fn replaced .data of a {tuple(data.shape)} parameter; a replay cannot repeat that "
                            "(run optimizer steps outside the cached function)")
            expected = self.grad_after.get(id(leaf), grad)
            if leaf.grad is not expected:
                self.refuse(f"fn changed .grad of a {tuple(data.shape)} parameter outside backward; a replay "
                            "cannot repeat that (zero or clip gradients outside the cached function)")
        for p in self.params:
            s = self.param_sums.get(id(p))
            if s is not None and _checksum(p.data) != s:
                self.refuse(f"fn changed the values of a {tuple(p.data.shape)} parameter in place; a replay "
                            "cannot repeat raw array writes (run optimizer steps outside the cached function)")


# ------------------------------------------------------------------------------------------------------------
# Code generation: the instruction list becomes one straight-line Python function.
# ------------------------------------------------------------------------------------------------------------
class _Codegen:
    def __init__(self, cap: _Capture) -> None:
        self.cap = cap
        self.ns: dict[str, Any] = {"_new": object.__new__, "_C": _ReplayCtx, "_ndarray": np.ndarray,
                                   "_as_array": _as_array, "_wrapV": Variable._wrap, "_wrapT": Tensor._wrap,
                                   "_acc": _backward.accumulate_leaf_grad, "_mkobj": _mkobj}
        self.n_globals = 0
        self.ctx_used: set[int] = set()

    def glob(self, value: Any, prefix: str = "G") -> str:
        name = f"{prefix}{self.n_globals}"
        self.n_globals += 1
        self.ns[name] = value
        return name

    def ref(self, r: tuple) -> str:
        kind = r[0]
        if kind == _IN:
            return f"i{r[1]}"
        if kind == _SLOT:
            return f"s{r[1]}"
        if kind == _PARAM:
            return f"p{r[1]}"
        if kind == _REF:
            return f"r{r[1]}"
        if kind == _CONST:
            return f"K{r[1]}"
        if kind == _STATE:
            self.ctx_used.add(r[1])
            expr = f"c{r[1]}.state"
            for step in r[2]:
                expr += step if isinstance(step, str) else f"[{step}]"
            return expr
        raise GraphCacheError("internal: an unbound value reached code generation")

    def attr(self, tpl: Any, value: Any) -> str:
        if tpl is None:
            return self.glob(value, "A")
        kind = tpl[0]
        if kind == "bind":
            return self.ref(tpl[1])
        if kind == "tensor":
            return f"_wrapV({self.ref(tpl[2])}, None)" if tpl[1] else f"_wrapT({self.ref(tpl[2])})"
        if kind == "seq":
            items = ", ".join(self.attr(s, e) for s, e in tpl[2])
            return f"({items},)" if tpl[1] is tuple else f"[{items}]"
        if kind == "dict":
            items = ", ".join(f"{self.glob(k, 'N')}: {self.attr(s, e)}" for k, s, e in tpl[1])
            return "{" + items + "}"
        if kind == "obj":
            items = ", ".join(f"({n!r}, {self.attr(s, e)})" for n, s, e in tpl[2])
            return f"_mkobj({self.glob(tpl[1], 'T')}, ({items},))"
        raise GraphCacheError(f"internal: unknown attribute template {kind!r}")

    def build(self, out_tpl: Any, out_value: Any, n_inputs: int) -> Callable:
        cap = self.cap
        for n, c in enumerate(cap.consts):
            self.ns[f"K{n}"] = c
        for n, p in enumerate(cap.params):
            self.ns[f"P{n}"] = p
        for n, t in enumerate(cap.refs):
            self.ns[f"R{n}"] = t
        body: list[str] = []
        ctx_line: dict[int, int] = {}
        for ins in cap.instrs:
            kind = ins[0]
            if kind == "op":
                _, k, op, attrs, tpl, in_refs, m, zero_d = ins
                args = ", ".join(self.ref(r) for r in in_refs)
                a = self.attr(tpl, attrs) if tpl is not None else self.glob(attrs, "A")
                fwd = op.forward  # a SELECTIVE checkpoint's per-thread dispatcher, if installed, is not baked in
                f = self.glob(getattr(fwd, "__wrapped__", fwd), "F")
                ctx_line[k] = len(body)
                body.append(f"c{k} = _new(_C); c{k}.attrs = {a}; c{k}.state = None")
                body.append(f"s{m} = {f}(c{k}, {args})")
                if zero_d:
                    body.append(f"if type(s{m}) is not _ndarray: s{m} = _as_array(s{m}, {self.ref(in_refs[0])})")
            elif kind == "seed":
                _, m, shape, dtype, mod = ins
                body.append(f"s{m} = {self.glob(_xp_by_name(mod), 'X')}.ones({shape!r}, {self.glob(dtype, 'D')})")
            elif kind == "reset":
                body.append(f"{self._leaf(ins[1])}.grad = None")
            elif kind == "leaf":
                _, target, g_ref, cg = ins
                body.append(f"_acc({self._leaf(target)}, _wrapV({self.ref(g_ref)}, None), {cg})")
            elif kind == "grad":
                _, m, target = ins
                body.append(f"s{m} = {self._leaf(target)}.grad.data")
        ret = self._output(out_tpl, out_value)
        for k, i in ctx_line.items():  # a context no later line reads is a throwaway local
            if k not in self.ctx_used:
                body[i] = body[i].replace(f"c{k}", "c")
                body[i + 1] = body[i + 1].replace(f"(c{k}, ", "(c, ")
        body = self._free_dead(body, ret)
        head = [f"i{j} = ins[{j}].data" for j in range(n_inputs)]
        head += [f"p{n} = P{n}.data" for n in range(len(cap.params))]
        head += [f"r{n} = R{n}.data" for n in range(len(cap.refs))]
        src = "def _program(ins):\n" + "".join(f"    {line}\n" for line in head + body + [f"return {ret}"])
        code = compile(src, "<graph_cache program>", "exec")
        exec(code, self.ns)  # noqa: S102 - our own generated source, from the recorded op sequence
        fn = self.ns["_program"]
        fn.source = src
        return fn

    def _leaf(self, target: tuple) -> str:
        return f"ins[{target[1]}]" if target[0] == _IN else f"P{target[1]}"

    def _output(self, tpl: Any, value: Any) -> str:
        if tpl is None:
            return self.glob(value, "O")
        kind = tpl[0]
        if kind == "tensor":
            return f"_wrapV({self.ref(tpl[2])}, None)" if tpl[1] else f"_wrapT({self.ref(tpl[2])})"
        if kind == "bind":
            return self.ref(tpl[1])
        if kind == "seq":
            items = ", ".join(self._output(s, e) for s, e in tpl[2])
            return f"({items},)" if tpl[1] is tuple else f"[{items}]"
        if kind == "dict":
            return "{" + ", ".join(f"{self.glob(k, 'N')}: {self._output(s, e)}" for k, s, e in tpl[1]) + "}"
        return self.glob(value, "O")

    def _free_dead(self, body: list[str], ret: str) -> list[str]:
        """Delete each big intermediate after its last use, so the allocator can reuse its memory at once."""
        import re

        big = {f"s{id_}" for id_ in range(self.cap.n_slots)
               if int(getattr(self.cap.keep_by_slot[id_], "nbytes", 0)) >= _SLOT_ARRAY_MIN_BYTES}
        big |= {f"c{k}" for k in self.ctx_used}  # contexts hold forward state (masks, im2col columns)
        if not big:
            return body
        token = re.compile(r"\b([sc]\d+)\b")
        last: dict[str, int] = {}
        for i, line in enumerate(body):
            for name in token.findall(line):
                last[name] = i
        keep_to_end = set(token.findall(ret))
        out: list[str] = []
        dels: dict[int, list[str]] = {}
        for name, i in last.items():
            if name in big and name not in keep_to_end:
                dels.setdefault(i, []).append(name)
        for i, line in enumerate(body):
            out.append(line)
            if i in dels:
                out.append("del " + ", ".join(sorted(dels[i])))
        return out


def _module_name(module: Any) -> str:
    path = module.__dict__.get("_path")
    return f"{path} ({type(module).__name__})" if path else type(module).__name__


def _mode(training: Any) -> str:
    return "training" if training else "eval"


def _modules_key(modules: tuple) -> tuple:
    return tuple((id(ref()), training, version) for ref, training, version, _ in modules)


def _mkobj(cls: type, fields: tuple) -> Any:
    obj = object.__new__(cls)
    for name, value in fields:
        setattr(obj, name, value)
    return obj


def _xp_by_name(mod: str) -> Any:
    if mod == "numpy":
        return np
    import cupy  # noqa: PLC0415 - only when a capture ran on the GPU

    return cupy


# ------------------------------------------------------------------------------------------------------------
# The cached graph
# ------------------------------------------------------------------------------------------------------------
class CachedGraph:
    """One captured function for one input signature: `execute(*inputs)` replays it.

    Attributes: `signature` (per input: shape, dtype, device, kind), `ops` (op applications replayed),
    `key`, `source` (the generated replay function, for the curious).
    """

    def __init__(self, fn: Callable, key: tuple, signature: tuple, program: Callable, params: list,
                 refs: list, ops: int, grad_enabled: bool, hook_ids: tuple, user_key: Any,
                 modules: tuple = ()) -> None:
        self.fn = fn
        self.base_key = key
        self.modules = modules  # (weakref(module), training, structure version, name) per module fn called
        self.key = (*key, _modules_key(modules))
        self.signature = signature
        self.input_shapes = tuple(s[0] for s in signature)
        self.ops = ops
        self.source: str = getattr(program, "source", "")
        self._program = program
        self._params = tuple(params)
        self._param_sig = tuple((p.data.shape, p.data.dtype, type(p.data)) for p in params)
        self._refs = tuple(refs)
        self._ref_sig = tuple((t.data.shape, t.data.dtype, type(t.data)) for t in refs)
        self._in_sig = tuple((s[0], s[1], s[3]) for s in signature)
        self._in_types = None
        self._grad_enabled = grad_enabled
        self._hook_ids = hook_ids
        self.user_key = user_key
        self.param_ids: tuple | None = None
        self.replays = 0

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"<CachedGraph {name} {list(self.input_shapes)}: {self.ops} ops>"

    def _mismatch(self, inputs: tuple) -> str | None:
        """Why this graph does not fit the call, or None when it does."""
        if len(inputs) != len(self._in_sig):
            return f"it was captured for {len(self._in_sig)} input(s), got {len(inputs)}"
        for j, (t, (shape, dtype, kind)) in enumerate(zip(inputs, self._in_sig, strict=True)):
            if not isinstance(t, Tensor):
                return f"input {j} is a {type(t).__name__}, not a Tensor"
            d = t.data
            if d.shape != shape:
                return f"input {j} has shape {tuple(d.shape)}, captured with {shape}"
            if d.dtype != dtype:
                return f"input {j} has dtype {d.dtype}, captured with {dtype}"
            s = _sig_of(t)
            if s[2] != self.signature[j][2]:
                return f"input {j} is on {s[2]}, captured on {self.signature[j][2]}"
            if s[3] != kind:
                return f"input {j} is a {s[3]}, captured as a {kind}"
            if t._node is not None:
                return f"input {j} has a graph of its own (grad_fn {t._node.op.name}); pass a leaf or detach() it"
        for n, (p, (shape, dtype, ty)) in enumerate(zip(self._params, self._param_sig, strict=True)):
            d = p.data
            if d.shape != shape or d.dtype != dtype or type(d) is not ty:
                return (f"parameter {n} is now {tuple(d.shape)} {d.dtype}, captured as {shape} {dtype}")
            if not p.requires_grad or p._node is not None:
                return f"parameter {n} no longer is a leaf that requires grad"
        for n, (t, (shape, dtype, ty)) in enumerate(zip(self._refs, self._ref_sig, strict=True)):
            d = t.data
            if d.shape != shape or d.dtype != dtype or type(d) is not ty:
                return f"constant tensor {n} is now {tuple(d.shape)} {d.dtype}, captured as {shape} {dtype}"
        if STATE.enabled != self._grad_enabled:
            return f"grad mode is {'on' if STATE.enabled else 'off'}, captured with it " \
                   f"{'on' if self._grad_enabled else 'off'}"
        if _hook_ids() != self._hook_ids:
            return "the attached engine hooks differ from those at capture (a replay runs no per-op hooks)"
        return self._modules_changed()

    def _modules_changed(self) -> str | None:
        """Why a module fn called no longer is as it was at capture (None when every one is)."""
        for ref, training, version, name in self.modules:
            m = ref()
            if m is None:
                return f"module {name}, called by fn at capture, no longer exists"
            d = m.__dict__
            if d["training"] != training:
                return f"module {name} is in {_mode(d['training'])} mode, captured in {_mode(training)} mode"
            if d["_version"] != version:
                return (f"module {name} had a parameter, buffer, child module or tensor attribute assigned since "
                        "the capture (a replay would still use the old objects)")
        return None

    def _stale(self) -> bool:
        """True when this graph can never fit again (a module it called died or changed its structure)."""
        for ref, _, version, _ in self.modules:
            m = ref()
            if m is None or m.__dict__["_version"] != version:
                return True
        return False

    def _fits(self, inputs: tuple) -> bool:
        # The fast path of validation: exact shapes/dtypes of inputs and parameters, grad mode, hooks.
        sig = self._in_sig
        if len(inputs) != len(sig):
            return False
        for t, (shape, dtype, kind) in zip(inputs, sig, strict=True):
            d = t.data
            if d.shape != shape or d.dtype is not dtype or type(d) is not np.ndarray:
                return False
            if kind == "tensor":
                if t._is_var:
                    return False
            elif not t._is_var or t._node is not None or t.requires_grad != (kind == "var"):
                return False
        for p, (shape, dtype, ty) in zip(self._params, self._param_sig, strict=True):
            d = p.data
            if d.shape != shape or d.dtype is not dtype or type(d) is not ty or p._node is not None \
                    or not p.requires_grad:
                return False
        for t, (shape, dtype, ty) in zip(self._refs, self._ref_sig, strict=True):
            d = t.data
            if d.shape != shape or d.dtype is not dtype or type(d) is not ty:
                return False
        if STATE.enabled is not self._grad_enabled:
            return False
        for ref, training, version, _ in self.modules:
            m = ref()
            if m is None:
                return False
            d = m.__dict__
            if d["training"] is not training or d["_version"] != version:
                return False
        return not (_hooks.ACTIVE or self._hook_ids) or _hook_ids() == self._hook_ids

    def execute(self, *inputs: Any, params: Any = None) -> Any:
        """Replay the captured ops on `inputs` (same signature as at capture) and return fn's result.

        The result carries no graph: if fn called backward, that backward already ran inside the replay and
        its gradients are in the parameters' `.grad`. Raises GraphCacheError (counted as a miss) when the
        call does not fit the captured signature; `params`, when given, must be the captured parameter objects.
        """
        if params is not None and self.param_ids is not None and _param_ids(params) != self.param_ids:
            _CACHE.misses += 1
            _emit("miss", self, why="params")
            raise GraphCacheError("graph cache: params= are not the parameter objects this graph was captured with")
        if not self._fits(inputs):
            why = self._mismatch(inputs)
            if why is not None:
                _CACHE.misses += 1
                _emit("miss", self, why=why)
                raise GraphCacheError(f"graph cache: this cached graph does not fit the call: {why}")
        out = self._program(inputs)
        self.replays += 1
        _CACHE.hits += 1
        if _hooks.ACTIVE:
            _emit("hit", self)
        return out


def _hook_ids() -> tuple:
    return tuple(id(h) for h in _hooks.ACTIVE)


def _emit(action: str, graph: CachedGraph | None, **extra: Any) -> None:
    if _hooks.ACTIVE:
        key = None if graph is None else _describe_key(graph)
        _hooks.emit("graph_cache", action=action, key=key, ops=None if graph is None else graph.ops, **extra)


def _describe_key(graph: CachedGraph) -> str:
    name = getattr(graph.fn, "__qualname__", type(graph.fn).__name__)
    ins = ", ".join(f"{list(s[0])} {s[1]}" + ("" if s[2] == "cpu" else f" {s[2]}") for s in graph.signature)
    extra = "" if graph.user_key is None else f" key={graph.user_key!r}"
    return f"{name}({ins}){extra}"


# ------------------------------------------------------------------------------------------------------------
# The cache: LRU over signatures
# ------------------------------------------------------------------------------------------------------------
class _Cache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.graphs: OrderedDict[tuple, CachedGraph] = OrderedDict()
        # base key (fn, signature, grad mode, hooks, key=, params=) -> keys of its variants, one per state of
        # the modules fn called (training / eval graphs of one step live side by side).
        self.by_base: dict[tuple, list[tuple]] = {}
        self.hits = self.misses = self.evictions = self.captures = self.refusals = 0

    def insert(self, graph: CachedGraph) -> None:
        self.remove(graph.key)
        self.graphs[graph.key] = graph
        self.by_base.setdefault(graph.base_key, []).append(graph.key)
        while len(self.graphs) > self.capacity:
            old = self.graphs[next(iter(self.graphs))]
            self.remove(old.key)
            self.evictions += 1
            _emit("evict", old)

    def remove(self, key: tuple) -> CachedGraph | None:
        graph = self.graphs.pop(key, None)
        if graph is not None:
            keys = self.by_base.get(graph.base_key)
            if keys is not None:
                keys.remove(key)
                if not keys:
                    del self.by_base[graph.base_key]
        return graph

    def lookup(self, base: tuple) -> tuple[CachedGraph | None, str | None]:
        """The variant of `base` whose modules are as they were at its capture, else (None, why the most recent
        one does not fit). Variants that can never fit again (a module died or changed structure) are dropped."""
        keys = self.by_base.get(base)
        if not keys:
            return None, None
        why = None
        for key in reversed(list(keys)):
            graph = self.graphs[key]
            reason = graph._modules_changed()
            if reason is None:
                self.graphs.move_to_end(key)
                return graph, None
            why = why or reason
            if graph._stale():
                self.remove(key)
                _emit("evict", graph, why=reason)
        return None, why


_CACHE = _Cache(1024)


def init_graph_cache(capacity: int = 1024) -> None:
    """Start an empty graph cache holding up to `capacity` graphs (least recently used evicted first); resets
    the statistics.

    >>> init_graph_cache(4)
    >>> graph_cache_stats()["capacity"]
    4
    """
    global _CACHE
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise ValueError(f"init_graph_cache: capacity must be a positive int, got {capacity!r}")
    _CACHE = _Cache(capacity)


def graph_cache_stats() -> dict[str, int]:
    """hits (replays served), misses (lookups or calls that found no fitting graph), evictions, captures,
    refusals (captures refused as unsafe), size and capacity."""
    c = _CACHE
    return {"hits": c.hits, "misses": c.misses, "evictions": c.evictions, "captures": c.captures,
            "refusals": c.refusals, "size": len(c.graphs), "capacity": c.capacity}


def _make_key(fn: Callable, signature: tuple, user_key: Any, params: tuple | None) -> tuple:
    return (fn, signature, STATE.enabled, _hook_ids(), user_key, params)


def _param_ids(params: Any) -> tuple | None:
    if params is None:
        return None
    ps = tuple(params)
    for i, p in enumerate(ps):
        if not (isinstance(p, Variable) and p.requires_grad and p._node is None):
            raise GraphCacheError(f"params: entry {i} is not a leaf Variable that requires grad")
    return tuple(id(p) for p in ps)


def _capture(fn: Callable, inputs: tuple, user_key: Any, params: Any = None) -> tuple[CachedGraph, Any]:
    pids = _param_ids(params)
    for j, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise GraphCacheError(f"cache_graph: input {j} is a {type(t).__name__}; inputs must be Tensors or leaf "
                                  "Variables (Python values belong in the function or in key=)")
        if t._node is not None:
            raise GraphCacheError(f"cache_graph: input {j} has a graph of its own (grad_fn {t._node.op.name}); "
                                  "pass a leaf or detach() it")
    arrays = [id(t.data) for t in inputs]
    if len(set(arrays)) != len(arrays):
        raise GraphCacheError("cache_graph: two inputs share one array; pass distinct tensors")
    signature = tuple(_sig_of(t) for t in inputs)
    grad_enabled = STATE.enabled
    hook_ids = _hook_ids()
    cap = _Capture(inputs)
    _hooks.add_hook(cap)
    try:
        result = fn(*inputs)
    finally:
        _hooks.remove_hook(cap)
    cap.audit()
    modules = cap.module_sig()
    if pids is not None:
        allowed = set(pids)
        for p in cap.params:
            if id(p) not in allowed:
                cap.refuse(f"fn reads a {tuple(p.data.shape)} parameter that is not in params=; list every "
                           "parameter, so that swapping one for another object is noticed as a miss")
    out_tpl = None if result is None else cap.bind_attr(result, "fn's result")
    if isinstance(result, Tensor) and out_tpl is None:  # pragma: no cover - Tensors always bind or refuse
        out_tpl = ("tensor", result._is_var, cap.bind_tensor(result, "fn's result"))
    if cap.refusals:
        _CACHE.refusals += 1
        name = getattr(fn, "__qualname__", type(fn).__name__)
        msg = f"graph cache: cannot capture {name}: " + "; ".join(cap.refusals)
        msg += " (fn ran once eagerly; its result is on this error's .result)"
        raise GraphCacheError(msg, result)
    cap.keep_by_slot = _slot_values(cap)
    program = _Codegen(cap).build(out_tpl, result, len(inputs))
    key = _make_key(fn, signature, user_key, pids)
    graph = CachedGraph(fn, key, signature, program, cap.params, cap.refs, cap.n_ops, grad_enabled, hook_ids,
                        user_key, modules)
    graph.param_ids = pids
    _CACHE.captures += 1
    _CACHE.insert(graph)
    _emit("capture", graph)
    return graph, result


def _slot_values(cap: _Capture) -> list:
    vals: list[Any] = [None] * cap.n_slots
    for obj_id, ref in cap.where.items():
        if ref[0] == _SLOT:
            vals[ref[1]] = obj_id
    by_id = {id(o): o for o in cap.keep}
    return [by_id.get(i) for i in vals]


def cache_graph(fn: Callable, *example_inputs: Any, key: Any = None, params: Any = None) -> CachedGraph:
    """Run `fn(*example_inputs)` once, eagerly, recording its ops; cache and return the replayable graph.

    `fn` typically runs a forward pass, a loss and ``loss.backward()`` and returns the loss; the capture's own
    run counts as one real step (gradients accumulate as usual). `key` is any hashable that tells apart
    captures of the same function and signature that take different Python-level branches (a training flag).
    `params` (e.g. ``model.parameters()``), when given, lists every parameter fn may read; their identities
    join the cache key, so `run_cached` with a swapped parameter object misses instead of replaying the old one.
    Raises GraphCacheError when the function cannot be replayed safely (the message says which op and why).
    """
    return _capture(fn, example_inputs, key, params)[0]


def get_cached_graph(input_shape: Any, fn: Callable | None = None, key: Any = None) -> CachedGraph | None:
    """The most recently used cached graph whose first input has `input_shape` (or whose inputs have exactly
    the shapes, or the `signature`, given as a tuple of those), captured in the current grad mode and with the
    currently attached hooks; None when there is none (counted as a miss). `fn` / `key` narrow the search.
    """
    want = tuple(input_shape) if input_shape is not None else ()
    full = bool(want) and all(isinstance(s, tuple | list) for s in want)
    if full:
        want = tuple(tuple(s[0]) if s and isinstance(s[0], tuple | list) else tuple(s) for s in want)
        sig = tuple(input_shape)
    hooks_now, grad_now = _hook_ids(), STATE.enabled
    fallback = None  # fits but for the state of its modules: returned when nothing fits fully (execute says why)
    for graph in reversed(_CACHE.graphs.values()):
        if fn is not None and graph.fn is not fn:
            continue
        if key is not None and graph.user_key != key:
            continue
        if graph._grad_enabled != grad_now or graph._hook_ids != hooks_now:
            continue
        if full:
            if graph.input_shapes != want:
                continue
            if isinstance(sig[0], tuple | list) and len(sig[0]) > 1 and isinstance(sig[0][0], tuple | list) \
                    and tuple(tuple(s[:3]) for s in graph.signature) != tuple(
                        (tuple(s[0]), *s[1:3]) for s in sig):
                continue
        elif not graph.input_shapes or graph.input_shapes[0] != want:
            continue
        if graph.modules and graph._modules_changed() is not None:
            fallback = fallback or graph
            continue
        _CACHE.graphs.move_to_end(graph.key)
        return graph
    if fallback is not None:
        return fallback
    _CACHE.misses += 1
    _emit("miss", None, shape=want)
    return None


def run_cached(fn: Callable, *inputs: Any, key: Any = None, params: Any = None) -> Any:
    """`fn(*inputs)`, replayed from the cache when a graph fits the call, captured (run eagerly) otherwise.

    >>> from rtxviz import Tensor
    >>> init_graph_cache()
    >>> double = lambda x: x * 2.0
    >>> run_cached(double, Tensor.ones([2])).tolist(), run_cached(double, Tensor.ones([2])).tolist()
    ([2.0, 2.0], [2.0, 2.0])
    >>> graph_cache_stats()["hits"], graph_cache_stats()["captures"]
    (1, 1)
    """
    try:
        signature = tuple(_sig_of(t) for t in inputs)
    except AttributeError:
        raise GraphCacheError("run_cached: inputs must be Tensors or leaf Variables") from None
    graph, why = _CACHE.lookup(_make_key(fn, signature, key, _param_ids(params)))
    if graph is not None:
        return graph.execute(*inputs)
    _CACHE.misses += 1
    if why is None:
        _emit("miss", None, fn=getattr(fn, "__qualname__", None))
    else:
        _emit("miss", None, fn=getattr(fn, "__qualname__", None), why=why)
    return _capture(fn, inputs, key, params)[1]

