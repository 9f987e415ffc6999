"""Chrome trace JSON (Perfetto, chrome://tracing): forward ops, backward rules and checkpoint recomputation as
timed "X" slices (``ts``/``dur`` in microseconds), steps and backward passes as enclosing slices.

Two sources:
- `trace_recorder()`: a live EngineHook that times each op's forward and each node's backward exactly;
- `chrome_trace(events)`: a recorded run. Events carry only their emission time, so a slice there spans from the
  previous event to its own (the op plus the recording around it): good for proportions, not for microbenchmarks.

>>> import rtxviz
>>> x = rtxviz.Variable.from_tensor(rtxviz.Tensor.ones([3]))
>>> with trace_recorder() as rec:
...     (x * x).sum().backward()
>>> sorted({e["cat"] for e in rec.trace()["traceEvents"] if e["ph"] == "X"})
['backward', 'forward']
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from ..engine import hooks as _hooks

PID = 1
TID_FORWARD, TID_BACKWARD, TID_RECOMPUTE, TID_STEP = 1, 2, 3, 4
_THREAD_NAMES = {TID_FORWARD: "forward", TID_BACKWARD: "backward", TID_RECOMPUTE: "recompute", TID_STEP: "steps"}


def _meta(process: str) -> list[dict]:
    out = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": process}}]
    for tid, name in _THREAD_NAMES.items():
        out.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": name}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}})
    return out


def _slice(name: str, cat: str, ts: float, dur: float, tid: int, args: dict | None = None) -> dict:
    ev = {"name": name, "cat": cat, "ph": "X", "ts": round(ts, 3), "dur": round(max(dur, 0.0), 3), "pid": PID,
          "tid": tid}
    if args:
        ev["args"] = args
    return ev


def chrome_trace(events: Iterable[dict], process: str = "rtxviz run") -> dict:
    """A Chrome trace dict from a run's events (as stored: dicts with ``kind`` and ``t`` in seconds)."""
    evs = [e for e in events if isinstance(e.get("t"), int | float)]
    if not evs:
        return {"traceEvents": _meta(process), "displayTimeUnit": "ms"}
    t0 = min(e["t"] for e in evs)

    def us(t: float) -> float:
        return (t - t0) * 1e6

    out = _meta(process)
    ops: dict[int, str] = {}
    prev = evs[0]["t"]
    open_step: dict[Any, float] = {}
    open_bwd: list[float] = []
    open_rec: dict[Any, float] = {}
    for e in evs:
        k, t = e["kind"], e["t"]
        if k == "node":
            ops[e["id"]] = e["op"]
            out.append(_slice(e["op"], "forward", us(prev), us(t) - us(prev), TID_FORWARD,
                              {"node": e["id"], "shape": e.get("shape"), "module": e.get("module"),
                               "step": e.get("step")}))
        elif k == "grad":
            name = ops.get(e["node"], f"node {e['node']}")
            out.append(_slice(f"{name} backward", "backward", us(prev), us(t) - us(prev), TID_BACKWARD,
                              {"node": e["node"], "grad_norm": (e.get("output") or {}).get("norm"),
                               "step": e.get("step")}))
        elif k == "step_begin":
            open_step[e.get("step")] = t
        elif k == "step_end" and e.get("step") in open_step:
            ts = open_step.pop(e.get("step"))
            out.append(_slice(f"step {e.get('step')}", "step", us(ts), us(t) - us(ts), TID_STEP))
        elif k == "backward_begin":
            open_bwd.append(t)
        elif k == "backward_end" and open_bwd:
            ts = open_bwd.pop()
            out.append(_slice("backward pass", "backward", us(ts), us(t) - us(ts), TID_STEP, {"step": e.get("step")}))
        elif k == "checkpoint":
            phase = e.get("phase")
            if phase == "recompute_begin":
                open_rec[e.get("segment")] = t
            elif phase == "recompute_end" and e.get("segment") in open_rec:
                ts = open_rec.pop(e.get("segment"))
                out.append(_slice(f"recompute segment {e.get('segment')}", "recompute", us(ts), us(t) - us(ts),
                                  TID_RECOMPUTE, {"segment": e.get("segment")}))
        elif k == "anomaly":
            out.append({"name": f"anomaly: {e.get('op')}", "cat": "anomaly", "ph": "i", "s": "g", "ts": us(t),
                        "pid": PID, "tid": TID_FORWARD if e.get("phase") == "forward" else TID_BACKWARD,
                        "args": {"message": e.get("message")}})
        prev = t
    return {"traceEvents": out, "displayTimeUnit": "ms"}


class TraceRecorder(_hooks.EngineHook):
    """Times the engine live: one slice per op forward, per node backward, per recomputed checkpoint segment,
    and per backward pass. Thread-aware (each thread's ops nest on their own track ids)."""

    name = "rtxviz.trace"

    def __init__(self, max_events: int = 1_000_000) -> None:
        self.events: list[dict] = []
        self.max_events = max_events
        self.dropped = 0
        self._t0 = time.perf_counter()
        self._local = threading.local()
        self._rec: dict[Any, float] = {}

    def _now(self) -> float:
        return (time.perf_counter() - self._t0) * 1e6

    def _stack(self) -> list:
        st = getattr(self._local, "stack", None)
        if st is None:
            st = self._local.stack = []
        return st

    def _add(self, ev: dict) -> None:
        if len(self.events) < self.max_events:
            self.events.append(ev)
        else:
            self.dropped += 1

    def _in_recompute(self) -> bool:
        return bool(self._rec)

    def forward_preprocess(self, op: Any, inputs: tuple, attrs: dict) -> None:
        self._stack().append(("f", self._now()))

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        st = self._stack()
        if not st or st[-1][0] != "f":
            return  # record_operation reports nodes without a forward_preprocess
        _, ts = st.pop()
        in_bwd = any(kind == "b" for kind, _ in st)
        cat, tid = ("recompute", TID_RECOMPUTE) if self._in_recompute() else \
            (("backward", TID_BACKWARD) if in_bwd else ("forward", TID_FORWARD))
        name = node.op.name if node is not None else "op"
        args = {"node": node.id, "module": node.module_path} if node is not None else None
        self._add(_slice(name, cat, ts, self._now() - ts, tid, args))

    def backward_begin(self, roots: list, create_graph: bool) -> None:
        self._stack().append(("B", self._now()))

    def backward_end(self) -> None:
        st = self._stack()
        if st and st[-1][0] == "B":
            _, ts = st.pop()
            self._add(_slice("backward pass", "backward", ts, self._now() - ts, TID_STEP))

    def backward_preprocess(self, node: Any, grad_output: Any) -> None:
        self._stack().append(("b", self._now()))

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None:
        st = self._stack()
        if st and st[-1][0] == "b":
            _, ts = st.pop()
            self._add(_slice(f"{node.op.name} backward", "backward", ts, self._now() - ts, TID_BACKWARD,
                             {"node": node.id}))

    def event(self, kind: str, **fields: Any) -> None:
        if kind != "checkpoint":
            return
        phase, seg = fields.get("phase"), fields.get("segment")
        if phase == "recompute_begin":
            self._rec[seg] = self._now()
        elif phase == "recompute_end" and seg in self._rec:
            ts = self._rec.pop(seg)
            self._add(_slice(f"recompute segment {seg}", "recompute", ts, self._now() - ts, TID_RECOMPUTE,
                             {"segment": seg}))

    def trace(self, process: str = "rtxviz") -> dict:
        return {"traceEvents": _meta(process) + self.events, "displayTimeUnit": "ms"}

    def save(self, path: str) -> str:
        return write_trace(self.trace(), path)

    def __exit__(self, *exc: object) -> None:
        _hooks.remove_hook(self)


def trace_recorder(max_events: int = 1_000_000) -> TraceRecorder:
    """`with trace_recorder() as rec: ...; rec.save("trace.json")` (open it in ui.perfetto.dev)."""
    return TraceRecorder(max_events)


def write_trace(trace: dict, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace, f, separators=(",", ":"))
    return path
