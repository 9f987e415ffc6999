"""EventHook: turns what the engine does into schema-v1 event dicts, handed to a sink (the emitter's queue).

It runs on every op while watching, so each method builds one plain dict (numbers, strings, lists) and calls
`sink(event)`; JSON encoding happens later in the emitter's sender thread. Leaves (parameters, data inputs,
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

from ..engine.graph import TapeNode
from ..engine.hooks import EngineHook
from .schema import CORE_KINDS, KIND_PATTERN, EventError, validate_event
from .stats import count_nonfinite, jsonable, tensor_stats

_now = time.time
_RESERVED = frozenset({"v", "kind", "t", "step", "seq"})


_DTYPE_NAMES: dict[Any, str] = {}


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
        self._op: Any = None
        self._in_backward = 0
        self._opt_snapshot: tuple | None = None
        # id(param) -> (weak ref to it, buffer): where each step's pre-update copy goes. Reused, because a fresh
        # copy of every parameter per step is freed again at once, and glibc then hands the memory back to the
        # OS (heap trimming) and page-faults it in anew on the next step: measured at 5-7x the copy itself.
        self._snap_bufs: dict[int, tuple[Any, Any]] = {}

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
    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None:
        self._op = op

    def forward_postprocess(self, node: Any, inputs: tuple, output: Any) -> None:
        if node is None and self._in_backward:
            return  # an op inside a backward rule: its result is reported as a gradient (grad event)
        out = output.data
        if node is not None:
            refs = []
            for t in inputs:
                n = t._node
                refs.append({"node": n.id} if n is not None else {"leaf": self.leaf_id(t)})
            op = node.op
            ev = {
                "v": 1, "kind": "node", "t": _now(), "step": self.step, "id": node.id, "op": op.name,
                "inputs": refs, "shape": list(out.shape), "dtype": _dtype_name(out.dtype), "device": _device(out),
                "module": node.module_path, "rule": op.rule, "saved_bytes": node.saved_nbytes(),
            }
            if node.attrs:
                ev["attrs"] = jsonable(node.attrs)
            if out.size <= self.values_max_numel:
                ev["values"] = _values(out)
            self.sink(ev)
        if self.check_anomalies and out.dtype.kind == "f":
            nan, inf = count_nonfinite(out)
            if nan or inf:
                op_name = node.op.name if node is not None else getattr(self._op, "name", "?")
                self._forward_anomaly(op_name, node, inputs, nan, inf)

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
        self.sink({"v": 1, "kind": "backward_begin", "t": _now(), "step": self.step,
                   "roots": [r for r in (self.ref(v) for v in roots) if r is not None],
                   "create_graph": bool(create_graph)})

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None:
        vm = self.values_max_numel
        cached = self._grad_cache.pop(id(node), None)
        out_stats = cached[1] if cached is not None and cached[0] is grad_output else \
            tensor_stats(grad_output.data, vm)
        ins: list = []
        cache = self._grad_cache
        bad_in = []
        for i, gi in enumerate(grad_inputs):
            if gi is None:
                ins.append(None)
                continue
            s = tensor_stats(gi.data, vm)
            ins.append(s)
            if s["nan"] or s["inf"]:
                bad_in.append(i)
            if i < len(node.next) and node.next[i] is not None:
                # a node: its grad_output, if nothing else adds to it; a leaf: its .grad, if it had none
                cache[id(node.next[i])] = (gi, s)
        self.sink({"v": 1, "kind": "grad", "t": _now(), "step": self.step, "node": node.id,
                   "output": out_stats, "inputs": ins})
        if bad_in and self.check_anomalies and self._anomalies < self.anomalies_per_step:
            self._anomalies += 1
            origin = not (out_stats["nan"] or out_stats["inf"])
            name = node.op.name
            self.sink({
                "v": 1, "kind": "anomaly", "t": _now(), "step": self.step, "phase": "backward", "op": name,
                "node": node.id, "nan": sum(ins[i]["nan"] for i in bad_in),
                "inf": sum(ins[i]["inf"] for i in bad_in), "origin": origin, "bad_inputs": bad_in,
                "message": (f"backward of {name} node #{node.id} produced NaN/Inf gradients for input(s) {bad_in}"
                            + (" from a finite output gradient" if origin else "")),
            })

    def leaf_grad(self, variable: Any, grad: Any) -> None:
        cached = self._grad_cache.pop(id(variable), None)
        stats = cached[1] if cached is not None and cached[0].data is grad.data else \
            tensor_stats(grad.data, self.values_max_numel)
        self.sink({"v": 1, "kind": "leaf_grad", "t": _now(), "step": self.step, "leaf": self.leaf_id(variable),
                   "stats": stats})

    def backward_end(self) -> None:
        self._in_backward = max(0, self._in_backward - 1)
        self._grad_cache.clear()
        self.sink({"v": 1, "kind": "backward_end", "t": _now(), "step": self.step})

    # -- everything else the engine reports ------------------------------------------------------------------
    def event(self, kind: str, **fields: Any) -> None:
        """Forward `hooks.emit(kind, **fields)` as an event of that kind, with JSON-safe fields.

        Values and nodes become Refs. A kind that collides with a core kind but does not fit its model, or a
        name that is not a valid kind, is wrapped as ``{"kind": "engine_event", "name": kind, "fields": ...}``.
        """
        if kind == "optimizer_step_begin" or kind == "optimizer_step_end":
            self._optimizer(kind, fields.get("optimizer"))
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

    def _optimizer(self, kind: str, optimizer: Any) -> None:
        """An optimizer's update, reported by the engine hooks: snapshot at begin, `optimizer_step` at end."""
        from .report import MAX_PARAMS, _params, report_update  # report imports the emitter, which imports this

        if optimizer is None:
            return
        if kind == "optimizer_step_begin":
            params = _params(optimizer)[:MAX_PARAMS]
            self._opt_snapshot = (optimizer, params, self.copy_params(params))
            return
        snap, self._opt_snapshot = self._opt_snapshot, None
        if snap is None or snap[0] is not optimizer:
            return
        _, params, before = snap
        report_update(self, params, before, [p.data for p in params], type(optimizer).__name__,
                      before_owned=True)

    def copy_params(self, params: list) -> list:
        """Copies of the parameters' arrays (before an update), in buffers this hook keeps for the next step."""
        bufs = self._snap_bufs
        out = []
        for p in params:
            a = p.data
            k = id(p)
            entry = bufs.get(k)
            buf = entry[1] if entry is not None and entry[0]() is p else None
            if buf is None or type(buf) is not type(a) or buf.shape != a.shape or buf.dtype != a.dtype:
                buf = a.copy()
                try:
                    bufs[k] = (weakref.ref(p, lambda _r, k=k: bufs.pop(k, None)), buf)
                except TypeError:  # no weak references to it: copy afresh each time
                    pass
            else:
                buf[...] = a
            out.append(buf)
        return out

    def new_step(self, step: int | None) -> None:
        """Called by the emitter at each step boundary."""
        self.step = step
        self._anomalies = 0
        self._in_backward = 0  # a backward that raised never reported its end
