"""detect_anomaly(): stop at the first op that makes NaN or Inf, in forward *or* backward, and say where.

PyTorch checks only backward and often blames an op far from the cause. Here, while the context is active, an
EngineHook checks every op's forward output and every backward rule's input gradients; the first non-finite
value raises `AnomalyError` naming the op, the file and line in *your* code that created the node (frames inside
the rtxviz package are skipped), and statistics of the op's inputs. The same finding goes to the event stream as
an `anomaly` event, so the page marks the node.

>>> import rtxviz
>>> from rtxviz.debug import detect_anomaly, AnomalyError
>>> x = rtxviz.Variable.from_tensor(rtxviz.Tensor.from_slice([0.0, 1.0], [2]))
>>> try:
...     with detect_anomaly():
...         y = x.log()
... except AnomalyError as e:
...     print(e.op, e.phase)
log forward
"""

from __future__ import annotations

import weakref
from typing import Any

from ..engine import hooks as _hooks
from ..engine.errors import RtxvizError
from ..engine.graph import TapeNode
from ..engine.sites import Site, user_site
from ..summary import count_nonfinite, describe


class AnomalyError(RtxvizError, FloatingPointError):
    """An op produced NaN or Inf. Attributes: `op`, `phase` ("forward"/"backward"), `site` (a Site or None),
    `node_id`, `nan`, `inf`, `inputs` (per input: a stats dict or None)."""

    def __init__(self, message: str, op: str, phase: str, site: Site | None, node_id: int | None, nan: int,
                 inf: int, inputs: list[dict | None]) -> None:
        super().__init__(message)
        self.op, self.phase, self.site, self.node_id = op, phase, site, node_id
        self.nan, self.inf, self.inputs = nan, inf, inputs


def _fmt_stats(i: int, s: dict | None, name: str | None = None) -> str:
    if s is None:
        return f"  input {i}: not kept for backward (no statistics)"
    who = f" ({name})" if name else ""
    text = f"  input {i}{who}: shape {s['shape']} {s['dtype']}"
    if "min" in s:
        text += f", min {s['min']:.4g}, max {s['max']:.4g}, mean {s['mean']:.4g}"
    if s.get("nan") or s.get("inf"):
        text += f", {s.get('nan', 0)} NaN, {s.get('inf', 0)} Inf"
    return text


class AnomalyHook(_hooks.EngineHook):
    """The EngineHook behind `detect_anomaly`: records creation sites, checks forward outputs and gradients."""

    name = "rtxviz.anomaly"

    def __init__(self, check_forward: bool = True, check_backward: bool = True) -> None:
        self.check_forward, self.check_backward = check_forward, check_backward
        self.sites: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._in_backward = 0
        self.tripped = False

    # -- forward -------------------------------------------------------------------------------------------
    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        if self._in_backward:
            return  # ops inside a backward rule: judged as that rule's gradients in backward_postprocess
        site = None
        if node is not None:
            site = user_site(2)
            self.sites[node] = site
            if site is not None:
                node.site = site.short  # the engine's own errors (an in-place write, say) name it too
        if not self.check_forward or self.tripped:
            return
        nan, inf = count_nonfinite(output.data)
        if nan or inf:
            ins = [describe(t.data) for t in inputs]
            names = [getattr(t, "name", None) for t in inputs]
            self._raise("forward", op.name, node, site or user_site(2), nan, inf, ins, names)

    # -- backward ------------------------------------------------------------------------------------------
    def backward_begin(self, roots: list, create_graph: bool) -> None:
        self._in_backward += 1

    def backward_end(self) -> None:
        self._in_backward = max(0, self._in_backward - 1)

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None:
        if not self.check_backward or self.tripped:
            return
        nan = inf = 0
        for g in grad_inputs:
            if g is not None:
                a, b = count_nonfinite(g.data)
                nan, inf = nan + a, inf + b
        if not (nan or inf):
            return
        ins: list[dict | None] = []
        names: list[str | None] = []
        saved = node.inputs if not node.freed and node.inputs is not None else None
        for i, e in enumerate(node.next):
            leaf = e is not None and e.__class__ is not TapeNode
            if saved is not None and i < len(saved) and saved[i] is not None:
                ins.append(describe(saved[i].data))
            elif leaf:
                ins.append(describe(e.data))
            elif e is not None and e.out_data is not None:
                ins.append(describe(e.out_data))
            else:
                ins.append(None)
            names.append(getattr(e, "name", None) if leaf else None)
        out_bad = count_nonfinite(grad_output.data)
        extra = ("" if not any(out_bad) else
                 f"\nThe gradient arriving at it already held {out_bad[0]} NaN, {out_bad[1]} Inf.")
        bad = [i for i, g in enumerate(grad_inputs) if g is not None and any(count_nonfinite(g.data))]
        self._raise("backward", node.op.name, node, self.sites.get(node), nan, inf, ins, names,
                    f"the gradient(s) it computed for input(s) {bad}" + extra, bad)

    # -- reporting -----------------------------------------------------------------------------------------
    def _raise(self, phase: str, op: str, node: Any, site: Site | None, nan: int, inf: int, ins: list,
               names: list, what: str = "its output", bad: list[int] | None = None) -> None:
        self.tripped = True
        nid = node.id if node is not None else None
        where = f"node #{nid}" if nid is not None else "an unrecorded op"
        head = f"detect_anomaly: {op} ({where}) produced {nan} NaN and {inf} Inf in {phase} ({what})."
        if bad is None:
            bad = [i for i, s in enumerate(ins) if s is not None and (s.get("nan") or s.get("inf"))]
            if bad:
                head += f" Its input(s) {bad} already held NaN/Inf: the cause is earlier (in the data or an op " \
                        "run before anomaly detection began)."
        created = (f"\nThe {op} was created at:\n  {site}" if site is not None else
                   f"\nThe {op} node was created before detect_anomaly() was entered (its source line is unknown).")
        lines = [head + created, "Its inputs:"] + [_fmt_stats(i, s, n) for i, (s, n) in
                                                  enumerate(zip(ins, names, strict=False))]
        message = "\n".join(lines)
        if _hooks.ACTIVE:
            _hooks.emit("anomaly", phase=phase, op=op, node=nid, nan=nan, inf=inf,
                        origin=not (phase == "forward" and bool(bad)), bad_inputs=list(bad or []),
                        message=message[:1900])
        raise AnomalyError(message, op, phase, site, nid, nan, inf, ins)


class detect_anomaly:
    """Within this context, the first NaN or Inf made by an op (forward) or a backward rule raises AnomalyError.

    forward / backward: which passes to check (both by default). Costs one sum per op output and one frame walk
    per recorded node while active; nothing when not.
    """

    def __init__(self, forward: bool = True, backward: bool = True) -> None:
        self.hook = AnomalyHook(forward, backward)

    def __enter__(self) -> AnomalyHook:
        _hooks.add_hook(self.hook)
        return self.hook

    def __exit__(self, *exc: object) -> None:
        _hooks.remove_hook(self.hook)
