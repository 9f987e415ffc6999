"""EventHook: turns what the engine does into schema-v1 event dicts, handed to a sink (the emitter's queue).

It runs on every op while watching, so each method builds one plain dict (numbers, strings, lists) and calls
`sink(event)` (the emitter's sink encodes it to JSON at once and queues the bytes). Leaves (parameters, data inputs,
constants) get small stable ids of their own, kept in an id map with weak references, and a `leaf` event the
first time they are seen.

>>> from rtxviz import Tensor, Variable
>>> events = []
>>> x = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2]), name="x")
>>> with EventHook(events.append):
...     y = (x * x).sum()
...     y.backward()
>>> [e["kind"] for e in events]
['leaf', 'node', 'node', 'backward_begin', 'grad', 'grad', 'leaf_grad', 'backward_end']
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ..accel import saved_entries as _native_saved_entries
from ..engine import hooks as _hooks
from ..engine.grad_mode import STATE as _GRAD_STATE
from ..engine.graph import TapeNode
from ..engine.hooks import EngineHook
from ..engine.memory import root_of as _root_of
from ..engine.memory import state_arrays as _state_arrays
from ..engine.variable import Variable
from ..schema import CORE_KINDS, KIND_PATTERN, EventError, validate_event
from ..summary import count_nonfinite, tensor_stats
from .fields import jsonable
from .optimizer import OptimizerReporter

_now = time.time
_weakref = weakref.ref
_RESERVED = frozenset({"v", "kind", "t", "step", "seq"})


#: node ids remembered as checked finite, for ops that keep finite values finite (`Op.keeps_finite`); cleared at
#: each step, this bounds a stepless run
_FINITE_MAX = 1 << 16

#: buffers remembered for the saved tensors' aliases; past this many the map starts again (aliases of a buffer
#: first saved before that are not reported)
_BUFFERS_MAX = 1 << 16

_DTYPE_NAMES: dict[Any, str] = {}
_ATTRS: dict[tuple, Any] = {}
_ATTRS_MAX = 4096
_PLAIN = frozenset({int, bool, str, type(None)})
#: Op kinds whose backward multiplies the output gradient element by element by d(output)/d(input): their rule
#: run on ones is that local derivative (see `EventHook.local_derivatives`).
_LOCAL_KINDS = frozenset({"elementwise", "broadcast_binary"})


def _attrs_json(attrs: dict) -> Any:
    """`jsonable(attrs)`, cached by content when every value is a plain int/bool/str/None, a tuple of ints
    (nearly every op's attrs: dims, keepdim, shapes) or an array-like, which `jsonable` reduces to its shape and
    dtype (class targets, indices); the result is shared, so sinks must not change it."""
    parts: list[tuple] = []
    for k, v in attrs.items():
        tv = type(v)
        if tv in _PLAIN or (tv is tuple and all(type(x) is int for x in v)):
            parts.append((k, tv, v))  # the type too: True == 1 and hash alike, but must not share a result
        elif hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, np.generic):
            parts.append((k, "array", tuple(v.shape), v.dtype))
        else:
            return jsonable(attrs)
    key = tuple(parts)
    out = _ATTRS.get(key)
    if out is None:
        if len(_ATTRS) >= _ATTRS_MAX:
            _ATTRS.clear()
        out = _ATTRS[key] = jsonable(attrs)
    return out


def _dtype_name(dtype: Any) -> str:
    """numpy's dtype.name is a Python-level property, slow enough to matter per op: cache it."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def _device(array: Any) -> str:
    return "cpu" if type(array) is np.ndarray else f"cuda:{array.device.id}"


def _values(array: Any) -> list:
    flat = array.ravel()
    if type(flat) is not np.ndarray:
        flat = flat.get()
    return [v if isinstance(v, int) or math.isfinite(v) else None for v in flat.tolist()]


def _hook_lists() -> tuple[list, list, list]:
    """The engine's hook lists (attached, tracing, overriding), for detaching them all for a moment."""
    return _hooks.ACTIVE, _hooks.TRACING, _hooks.OVERRIDING


class EventHook(EngineHook):
    """An EngineHook that reports every engine happening as an event dict to `sink`.

    values_max_numel: outputs, leaves and gradients with at most this many elements carry their values.
    anomalies_per_step: at most this many `anomaly` events per step (NaN tends to spread to every op after).
    """

    name = "rtxviz.events"

    def __init__(self, sink: Callable[[dict], None], values_max_numel: int = 16, check_anomalies: bool = True,
                 anomalies_per_step: int = 20) -> None:
        self.sink = sink
        self.values_max_numel = int(values_max_numel)
        self.check_anomalies = check_anomalies
        self.anomalies_per_step = anomalies_per_step
        self.step: int | None = None
        self._anomalies = 0
        self._leaves: dict[int, tuple[int, Any]] = {}
        self._leaf_count = 0
        # id(producer node) -> (gradient Variable, its stats): a gradient that flows unchanged from a consumer's
        # input to its producer's output is summarised once, not twice.
        self._grad_cache: dict[int, tuple[Any, dict]] = {}
        # ids of nodes whose outputs were checked and hold no NaN/Inf, this step (see Op.keeps_finite)
        self._finite: set[int] = set()
        # id(root buffer) -> (weak reference to it, where it was first saved): the `alias` of node events' `saved`
        self._buffers: dict[int, tuple[Any, dict]] = {}
        self._in_backward = 0
        self._anomalous: set[int] = set()  # id(node) of the nodes reported anomalous in backward, this step
        self.optimizer = OptimizerReporter(self)  # the optimizer_step events

    # -- leaves and references ------------------------------------------------------------------------------
    def leaf_id(self, t: Any) -> int:
        """The stable id of a leaf value (a Variable with no node, or a constant Tensor); emits `leaf` once."""
        key_obj = t if t._is_var else t.data  # plain Tensors have no weakref slot; their arrays do
        k = id(key_obj)
        entry = self._leaves.get(k)
        if entry is not None and entry[1]() is key_obj:
            return entry[0]
        self._leaf_count += 1
        lid = self._leaf_count
        leaves = self._leaves

        def forget(ref: Any, k: int = k) -> None:
            e = leaves.get(k)
            if e is not None and e[1] is ref:
                del leaves[k]

        leaves[k] = (lid, weakref.ref(key_obj, forget))
        self._emit_leaf(lid, t)
        return lid

    def _emit_leaf(self, lid: int, t: Any) -> None:
        data = t.data
        name = getattr(t, "name", None)
        rg = bool(t.requires_grad)
        ev = {
            "v": 1, "kind": "leaf", "t": _now(), "step": self.step, "id": lid, "name": name,
            "shape": list(data.shape), "dtype": _dtype_name(data.dtype), "device": _device(data), "requires_grad": rg,
            "param": bool(getattr(t, "is_parameter", False)) or type(t).__name__ == "Parameter"
            or (rg and name is not None),
        }
        if data.size <= self.values_max_numel:
            ev["values"] = _values(data)
        self.sink(ev)

    def ref(self, v: Any) -> dict | None:
        """A Ref dict for a graph value: ``{"node": id}`` or ``{"leaf": id}``."""
        if v is None:
            return None
        if isinstance(v, TapeNode):
            return {"node": v.id}
        node = getattr(v, "_node", None)
        if node is not None:
            return {"node": node.id}
        if hasattr(v, "data") and hasattr(v, "_is_var"):
            return {"leaf": self.leaf_id(v)}
        return None

    # -- forward --------------------------------------------------------------------------------------------
    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        if node is None:
            if self._in_backward:
                return  # an op inside a backward rule: its result is reported as a gradient (grad event)
            out = output.data
            if self.check_anomalies and out.dtype.kind == "f":
                nan, inf = count_nonfinite(out)
                if nan or inf:
                    self._forward_anomaly(op.name, None, inputs, nan, inf)
            return
        out = output.data
        refs = []
        saved = 0
        finite = self._finite
        all_finite = True  # every input is known to hold no NaN/Inf (a checked node output, or not floating)
        for t in inputs:
            n = t._node
            if n is not None:
                nid = n.id
                refs.append({"node": nid})
                if all_finite and nid not in finite:
                    all_finite = False
            else:
                refs.append({"leaf": self.leaf_id(t)})
                if all_finite and t.data.dtype.kind == "f":
                    all_finite = False
        saved_list = None
        if node.inputs is not None or node.out_data is not None or node.state is not None:
            saved_list = self._saved(node)
            for e in saved_list:
                saved += e["bytes"]
        ev = {
            "v": 1, "kind": "node", "t": _now(), "step": self.step, "id": node.id, "op": op.name,
            "inputs": refs, "shape": list(out.shape), "dtype": _dtype_name(out.dtype), "device": _device(out),
            "module": node.module_path, "rule": op.rule, "saved_bytes": saved,
        }
        if node.attrs:
            ev["attrs"] = _attrs_json(node.attrs)
        if saved_list:
            ev["saved"] = saved_list
        if out.size <= self.values_max_numel:
            ev["values"] = _values(out)
        self.sink(ev)
        if self.check_anomalies and out.dtype.kind == "f":
            if all_finite and op.keeps_finite:
                # its values are some of its inputs' (or zeros): finite inputs make a finite output, no pass needed
                finite.add(node.id)
                return
            nan, inf = count_nonfinite(out)
            if nan or inf:
                self._forward_anomaly(op.name, node, inputs, nan, inf)
            else:
                if len(finite) >= _FINITE_MAX:
                    finite.clear()
                finite.add(node.id)

    def _saved(self, node: Any) -> list[dict]:
        """The `saved` field of a node event: per tensor the node keeps for backward (`TapeNode.saved_tensors`),
        its role, index, bytes, shape and dtype, and `alias`: the first saved tensor seen (this node's or an
        earlier node's) that reads the same buffer, so that totals can count a buffer once.

        It runs once per recorded op, so it reads the node's fields in `saved_tensors`' order itself (no list of
        tuples in between), follows `.base` only for views, and names dtypes from the module's cache. With the compiled
        module, `saved_entries` builds the same list in one call (tests/events/test_saved_tensors.py compares the
        two)."""
        if _native_saved_entries is not None:
            state = node.state
            return _native_saved_entries(node.id, node.inputs, node.out_data,
                                         None if state is None else _state_arrays(state), self._buffers,
                                         _DTYPE_NAMES, _BUFFERS_MAX)
        return self._saved_python(node)

    def _saved_python(self, node: Any) -> list[dict]:
        """`_saved` without the compiled module."""
        out: list[dict] = []
        nid = node.id
        inputs = node.inputs
        if inputs is not None:
            i = 0
            for t in inputs:
                if t is not None:
                    out.append(self._saved_entry(nid, "input", i, t.data))
                i += 1
        if node.out_data is not None:
            out.append(self._saved_entry(nid, "output", None, node.out_data))
        if node.state is not None:
            j = 0
            for a in _state_arrays(node.state):
                out.append(self._saved_entry(nid, "state", j, a))
                j += 1
        return out

    def _saved_entry(self, nid: int, role: str, index: int | None, a: Any) -> dict:
        """One `saved` entry; the first time its buffer is seen, remember it for later entries' `alias`."""
        dtype = a.dtype
        name = _DTYPE_NAMES.get(dtype)
        if name is None:
            name = _DTYPE_NAMES[dtype] = dtype.name
        e: dict[str, Any] = {"role": role, "bytes": a.nbytes, "shape": list(a.shape), "dtype": name}
        if index is not None:
            e["index"] = index
        root = a if a.base is None else _root_of(a)  # most saved arrays own their buffer: no call for them
        k = id(root)
        buffers = self._buffers
        seen = buffers.get(k)
        if seen is not None and seen[0]() is root:
            e["alias"] = seen[1]
            return e
        if len(buffers) >= _BUFFERS_MAX:
            buffers.clear()
        here: dict[str, Any] = {"node": nid, "role": role} if index is None else \
            {"node": nid, "role": role, "index": index}
        try:  # a held buffer keeps its id; the weak reference tells a later buffer at the same id apart
            buffers[k] = (_weakref(root), here)
        except TypeError:  # an array type without weak references: no alias is reported for it
            pass
        return e

    def _forward_anomaly(self, op_name: str, node: Any, inputs: tuple, nan: int, inf: int) -> None:
        if self._anomalies >= self.anomalies_per_step:
            return
        self._anomalies += 1
        bad = [i for i, t in enumerate(inputs) if any(count_nonfinite(t.data))]
        where = f"node #{node.id} " if node is not None else ""
        msg = (f"{op_name} {where}produced {nan} NaN and {inf} Inf from finite inputs" if not bad else
               f"{op_name} {where}passed on NaN/Inf from input(s) {bad}")
        self.sink({
            "v": 1, "kind": "anomaly", "t": _now(), "step": self.step, "phase": "forward", "op": op_name,
            "node": node.id if node is not None else None, "nan": nan, "inf": inf, "origin": not bad,
            "bad_inputs": bad, "message": msg,
        })

    # -- backward -------------------------------------------------------------------------------------------
    def backward_begin(self, roots: list, create_graph: bool) -> None:
        self._in_backward += 1
        self._grad_cache.clear()
        self.optimizer.leaf_stats.clear()
        self.sink({"v": 1, "kind": "backward_begin", "t": _now(), "step": self.step,
                   "roots": [r for r in (self.ref(v) for v in roots) if r is not None],
                   "create_graph": bool(create_graph)})

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None:
        vm = self.values_max_numel
        cache = self._grad_cache
        out_data = grad_output.data
        cached = cache.pop(id(node), None)
        out_stats = cached[1] if cached is not None and cached[0].data is out_data else tensor_stats(out_data, vm)
        ins: list = []
        bad_in = []
        nxt = node.next
        prev = None  # (array, stats) of the last input gradient summarised here
        for i, gi in enumerate(grad_inputs):
            if gi is None:
                ins.append(None)
                continue
            d = gi.data
            # a rule that passes its gradient through unchanged (add, sub's first input, reshape of the same
            # buffer) or sends one array to two inputs: one summary, not two
            if d is out_data:
                s = out_stats
            elif prev is not None and prev[0] is d:
                s = prev[1]
            else:
                s = tensor_stats(d, vm)
                prev = (d, s)
            ins.append(s)
            if s["nan"] or s["inf"]:
                bad_in.append(i)
            if i < len(nxt) and nxt[i] is not None:
                # a node: its grad_output, if nothing else adds to it; a leaf: its .grad, if it had none
                cache[id(nxt[i])] = (gi, s)
        ev = {"v": 1, "kind": "grad", "t": _now(), "step": self.step, "node": node.id,
              "output": out_stats, "inputs": ins}
        if out_data.size <= vm and getattr(node.op, "kind", None) in _LOCAL_KINDS:
            local = self.local_derivatives(node, out_data)
            if local is not None:
                ev["local"] = local
        self.sink(ev)
        if bad_in and self.check_anomalies and self._anomalies < self.anomalies_per_step:
            self._anomalies += 1
            self._anomalous.add(id(node))
            origin = not (out_stats["nan"] or out_stats["inf"])
            name = node.op.name
            self.sink({
                "v": 1, "kind": "anomaly", "t": _now(), "step": self.step, "phase": "backward", "op": name,
                "node": node.id, "nan": sum(ins[i]["nan"] for i in bad_in),
                "inf": sum(ins[i]["inf"] for i in bad_in), "origin": origin, "bad_inputs": bad_in,
                "message": (f"backward of {name} node #{node.id} produced NaN/Inf gradients for input(s) {bad_in}"
                            + (" from a finite output gradient" if origin else "")),
            })

    @staticmethod
    def local_derivatives(node: Any, out_grad: Any) -> list | None:
        """d(output)/d(input i) of an elementwise node at its inputs, as value lists (None for an input that needs
        no gradient, or whose shape differs from the output's: a broadcast input's gradient is a sum, not a
        product). The node's own backward rule run on ones: the engine's arithmetic, not a restatement of it.

        Runs with every engine hook detached and grad mode off, so the extra rule is neither recorded (a graph
        cache capture, this hook) nor checked (detect_anomaly): it is not part of the user's computation.

        >>> from rtxviz import Tensor, Variable
        >>> x = Variable.from_tensor(Tensor.from_slice([0.5, -1.0], [2]), name="x")
        >>> y = x.tanh()
        >>> [round(v, 4) for v in EventHook.local_derivatives(y._node, y.data)[0]]  # 1 - tanh(x)^2
        [0.7864, 0.42]
        """
        saved = (_hooks.ACTIVE[:], _hooks.TRACING[:], _hooks.OVERRIDING[:])
        prev = _GRAD_STATE.enabled
        for hook_list in _hook_lists():
            hook_list.clear()
        _GRAD_STATE.enabled = False
        try:
            seed = out_grad.copy()  # numpy or cupy alike
            seed.fill(1)
            ones = Variable._wrap(seed, None)
            rule = node.op.backward(node, ones)
        except Exception:  # a rule that cannot run twice (it freed what it saved): no local derivative then
            return None
        finally:
            _GRAD_STATE.enabled = prev
            for hook_list, kept in zip(_hook_lists(), saved, strict=True):
                hook_list[:] = kept
        out: list = []
        for r in rule:
            d = None if r is None else r.data
            out.append(None if d is None or d.shape != out_grad.shape else _values(d))
        return out

    def leaf_grad(self, variable: Any, grad: Any) -> None:
        cached = self._grad_cache.pop(id(variable), None)
        data = grad.data
        stats = (cached[1] if cached is not None and cached[0].data is data
                 else tensor_stats(data, self.values_max_numel))
        self.optimizer.leaf_stats[id(variable)] = (data, stats)
        self.sink({"v": 1, "kind": "leaf_grad", "t": _now(), "step": self.step, "leaf": self.leaf_id(variable),
                   "stats": stats})

    def backward_end(self) -> None:
        self._in_backward = max(0, self._in_backward - 1)
        self._grad_cache.clear()
        self.sink({"v": 1, "kind": "backward_end", "t": _now(), "step": self.step})

    def _backward_error(self, node: Any, error: str, message: str) -> None:
        """A backward that raised at `node` (a saved tensor modified in place, a NaN under detect_anomaly): an
        `anomaly` event with reason "error", so the page marks the node and lists the message."""
        if node is None or id(node) in self._anomalous:
            return  # already reported (a NaN/Inf this hook saw at that node: detect_anomaly raised on it)
        op = getattr(getattr(node, "op", None), "name", "?")
        self.sink({"v": 1, "kind": "anomaly", "t": _now(), "step": self.step, "phase": "backward", "reason": "error",
                   "op": op, "node": getattr(node, "id", None), "nan": 0, "inf": 0, "origin": True,
                   "bad_inputs": [], "message": f"{error}: {message}"[:2000]})

    # -- everything else the engine reports ------------------------------------------------------------------
    def event(self, kind: str, **fields: Any) -> None:
        """Forward `hooks.emit(kind, **fields)` as an event of that kind, with JSON-safe fields.

        Values and nodes become Refs. A kind that collides with a core kind but does not fit its model, or a
        name that is not a valid kind, is wrapped as ``{"kind": "engine_event", "name": kind, "fields": ...}``.
        """
        if kind == "optimizer_step_begin" or kind == "optimizer_step_end":
            self.optimizer.on_event(kind, fields.get("optimizer"), fields)
            return
        if kind == "backward_error":
            self._backward_error(fields.get("node"), str(fields.get("error", "")), str(fields.get("message", "")))
            return
        body = {}
        for k, v in fields.items():
            if k in _RESERVED:
                k = k + "_"  # never let a field overwrite the envelope
            r = self.ref(v) if isinstance(v, TapeNode) or hasattr(v, "_is_var") else None
            body[k] = r if r is not None else jsonable(v)
        ev = {"v": 1, "kind": kind, "t": _now(), "step": self.step, **body}
        if kind in CORE_KINDS or not isinstance(kind, str) or not KIND_PATTERN.match(kind):
            try:
                if kind not in CORE_KINDS:
                    raise EventError("not a valid kind")
                validate_event(ev)
            except EventError:
                ev = {"v": 1, "kind": "engine_event", "t": ev["t"], "step": self.step,
                      "name": str(kind)[:200], "fields": body}
        self.sink(ev)

    def new_step(self, step: int | None) -> None:
        """Called by the emitter at each step boundary."""
        self.step = step
        self._anomalies = 0
        self._finite.clear()
        self.optimizer.leaf_stats.clear()
        self._in_backward = 0  # a backward that raised never reported its end
        self._anomalous.clear()
