"""The capture: an EngineHook that records one run of a function as a list of instructions whose every input is
bound to where its array comes from (an input, an earlier instruction's slot, a parameter, a pre-existing
constant, an op's saved state), or refuses with the reason a replay would be wrong."""

from __future__ import annotations

import weakref
from typing import Any

from .. import hooks as _hooks
from ..device import xp_of
from ..graph import UserOp
from ..tensor import Tensor, live_tensors
from ..variable import Variable
from .bindings import (
    ATOMS,
    BAD,
    CONST,
    IN,
    PARAM,
    REF,
    SLOT,
    STATE_PART,
    STATE_SKIP,
    checksum,
    is_array,
    mode_name,
    module_name,
)


class Capture(_hooks.EngineHook):
    """Records each op application of one run of fn as an instruction with bound inputs.

    Everything it learns comes through the hook interface: the per-op calls, and the trace events (`traces`):
    constants made from Python values, backward's ones seed, leaf-gradient accumulation, values read into Python.
    It is attached for the thread that runs fn only (other threads' ops are no part of fn).
    """

    name = "graph_cache_capture"
    traces = True
    this_thread_only = True  # hooks see every thread; the other threads' ops are no part of fn

    def __init__(self, inputs: tuple) -> None:
        self.inputs = inputs
        # ("op", k, op, attrs, attrs_tpl, in_refs, out_slot, zero_d, kernel) | others below
        self.instrs: list[tuple] = []
        self.where: dict[int, tuple] = {}   # id(array or state object) -> binding
        self.keep_by_slot: list[Any] = []   # per slot, the value it held at capture (filled when capture ends)
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
        self._snapshot()

    # -- what existed before fn ran ---------------------------------------------------------------------------
    def _snapshot(self) -> None:
        """Every Tensor alive now (gc-tracked): an unknown array later is a pre-existing constant only if it is
        one of these. Holding them keeps their ids and their arrays' ids from being reused during capture."""
        self.pre_objs: dict[int, Tensor] = {}
        self.pre_arrays: dict[int, Tensor] = {}
        self.pre_leaves: list[tuple] = []  # (leaf Variable requiring grad, its data, its grad)
        for o in live_tensors():
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
        return (BAD,)

    # -- binding -------------------------------------------------------------------------------------------
    def _param(self, p: Variable) -> tuple:
        n = self.param_ids.get(id(p))
        if n is None:
            n = self.param_ids[id(p)] = len(self.params)
            self.params.append(p)
            self.param_sums[id(p)] = checksum(p.data)
        return (PARAM, n)

    def _ref(self, t: Tensor) -> tuple:
        n = self.ref_ids.get(id(t))
        if n is None:
            n = self.ref_ids[id(t)] = len(self.refs)
            self.refs.append(t)
        return (REF, n)

    def const(self, a: Any) -> tuple:
        n = self.const_ids.get(id(a))
        if n is None:
            n = self.const_ids[id(a)] = len(self.consts)
            self.consts.append(a)
        return (CONST, n)

    def bind_array(self, a: Any) -> tuple | None:
        i = id(a)
        j = self.in_arrays.get(i)
        if j is not None:
            return (IN, j)
        r = self.where.get(i)
        if r is not None:
            return r
        o = self.pre_arrays.get(i)
        if o is not None:
            if o._is_var and o.requires_grad:
                if o._node is None:
                    return self._param(o)  # type: ignore[arg-type]  # a leaf Variable by _is_var
                return self.refuse("a value computed before the capture with a graph of its own (grad_fn "
                                   f"{o._node.op.name}) is used inside fn; detach() it or pass it as an input")
            return self._ref(o)
        if i in self.scalar_consts:
            return self.const(a)
        return None

    def bind_tensor(self, t: Any, where: str, grads: bool = True) -> tuple:
        j = self.in_objs.get(id(t))
        if j is not None:
            return (IN, j)
        if grads and id(t) in self.grad_objs:
            # fn reads p.grad after backward: read it at this point of the replay (it may have accumulated).
            m = self.n_slots
            self.n_slots += 1
            self.instrs.append(("grad", m, self.grad_objs[id(t)]))
            return (SLOT, m)
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
        if isinstance(v, ATOMS):
            return None
        r = self.where.get(id(v))
        if r is not None and r[0] == STATE_PART:
            return ("bind", r)
        if isinstance(v, Tensor):
            return ("tensor", v._is_var, self.bind_tensor(v, where))
        if is_array(v):
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
            subs_of = {k: self.bind_attr(e, f"{where}[{k!r}]", depth + 1) for k, e in v.items()}
            if all(s is None for s in subs_of.values()):
                return None
            return ("dict", [(k, subs_of[k], e) for k, e in v.items()])
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
        ref = (SLOT, m)
        self.where[id(a)] = ref
        self.keep.append(a)
        return ref

    def _index_state(self, k: int, state: Any) -> None:
        """Make the state a forward left on its ctx addressable: backward rules hand it (or its parts) on."""
        self.keep.append(state)
        todo: list[tuple[Any, tuple]] = [(state, ())]
        while todo:
            obj, path = todo.pop()
            if isinstance(obj, STATE_SKIP):
                continue
            if id(obj) not in self.where:
                self.where[id(obj)] = (STATE_PART, k, path)
            if len(path) >= 2:
                continue
            if type(obj) is tuple:
                todo.extend((e, (*path, i)) for i, e in enumerate(obj))
            else:
                slots = getattr(type(obj), "__slots__", None)
                if slots and not is_array(obj) and not isinstance(obj, Tensor):
                    names = (slots,) if isinstance(slots, str) else slots
                    todo.extend((getattr(obj, n), (*path, "." + n)) for n in names
                                if n != "__weakref__" and hasattr(obj, n))

    # -- hook methods ---------------------------------------------------------------------------------------
    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None:
        self.pending = (op, inputs, attrs)

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
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
        specialize = getattr(op, "specialize", None)  # Op.specialize: forward for these shapes, without a ctx
        kernel = specialize(attrs, *(t.data for t in inputs)) if specialize is not None and tpl is None else None
        self.instrs.append(("op", k, op, attrs, tpl, in_refs, ref[1], out.ndim == 0, kernel))
        self.n_ops += 1
        if node is not None:
            self.nodes[id(node)] = k
            self.keep.append(node)
            if node.state is not None:
                self._index_state(k, node.state)

    def backward_preprocess(self, node: Any, grad_output: Any) -> None:
        if id(node) not in self.nodes and not isinstance(node.op, UserOp):
            self.refuse(f"backward reaches node #{node.id} ({node.op.name}), recorded before the capture; fn must "
                        "compute everything it differentiates (detach values made outside it, or pass them in)")
        if node.pre_hooks:
            self.refuse(f"a hook (register_hook / retain_grad) on the output of {node.op.name} runs during backward;"
                        " a replay runs no Python hooks, so the function is not cached")

    def leaf_grad(self, variable: Any, grad: Any) -> None:
        # Backward is about to add this pass's contribution into variable.grad; the ops that addition runs
        # (through `add` while hooks are attached) are not recorded: the replay calls accumulate_leaf_grad itself.
        before = self.grad_after.get(id(variable), self.pre_grads.get(id(variable), variable.grad))
        self.leaf_pending = (variable, grad, before, variable.grad)
        self.suspended += 1

    def event(self, kind: str, **fields: Any) -> None:
        if kind == "constant":
            self.constant(fields["tensor"])
        elif kind == "seed_grad":
            a = fields["grad"].data
            m = self.new_slot(a)[1]
            self.instrs.append(("seed", m, tuple(a.shape), a.dtype, xp_of(a)))
        elif kind == "value_read":
            self.guard(fields["how"], fields["tensor"])
        elif kind == "leaf_grad_accumulated":
            self.accumulated(fields["leaf"], fields["grad"], fields["create_graph"])
        elif kind == "module_call":
            self.module_call(fields["module"], fields["training"])
        elif kind == "grad_assigned":
            self.grad_assigned(fields["variable"], fields["value"])

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
            target = (IN, j)
        elif id(leaf) in self.pre_objs:
            target = self._param(leaf)
        else:
            target = self.refuse("backward accumulates a gradient into a Variable created inside fn; create "
                                 "parameters before capturing")
        if target[0] != BAD:
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
        if target[0] != BAD and leaf.grad is not None:
            self.keep.append(leaf.grad)
            self.grad_objs[id(leaf.grad)] = target

    def grad_assigned(self, leaf: Any, value: Any) -> None:
        """fn set ``leaf.grad = value``. A reset to None (``zero_grad()``) is replayed where it happened, also when
        .grad was None already at capture, which comparing .grad before and after backward cannot see (replays
        then accumulated across steps). Any other value is judged when backward accumulates (`accumulated`)."""
        if value is not None or self.suspended:
            return
        j = self.in_objs.get(id(leaf))
        if j is not None:
            target = (IN, j)
        elif id(leaf) in self.pre_objs and leaf.requires_grad and leaf._node is None:
            target = self._param(leaf)
        else:  # a Variable made inside fn: nothing of it outlives a replay
            return
        self.instrs.append(("reset", target))
        self.grad_after[id(leaf)] = None

    def module_call(self, module: Any, training: bool) -> None:
        """A Module was called (nn.Module.__call__): its training flag chose the Python path fn took (dropout on
        or off), so a replay is valid only while the flag and the module's structure stay as they were."""
        seen = self.modules.get(id(module))
        if seen is None:
            # setdefault: a module built without Module.__init__ (unpickled from an old file) gets a version now
            self.modules[id(module)] = (module, training, module.structure_version)
        elif seen[1] != training:
            self.refuse(f"module {module_name(module)} was called in both training and eval mode inside fn; a "
                        "replay does not repeat mode switches (set the mode outside the cached function)")

    def module_sig(self) -> tuple:
        """Per module fn called: (weakref, training, structure version, name). Refuses a module whose mode or
        structure fn itself changed (a replay would not repeat that)."""
        out = []
        for module, training, version in self.modules.values():
            if module.training != training:
                self.refuse(f"fn switched module {module_name(module)} to {mode_name(module.training)} mode after "
                            f"calling it in {mode_name(training)} mode; a replay does not repeat mode switches (set "
                            "the mode outside the cached function)")
            if module.structure_version != version:
                self.refuse(f"fn assigned a parameter, buffer, child module or tensor attribute of module "
                            f"{module_name(module)} after calling it; a replay would not repeat that")
            out.append((weakref.ref(module), training, version, module_name(module)))
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
            if s is not None and checksum(p.data) != s:
                self.refuse(f"fn changed the values of a {tuple(p.data.shape)} parameter in place; a replay "
                            "cannot repeat raw array writes (run optimizer steps outside the cached function)")
