"""The `optimizer_step` events of an EventHook: per parameter, its gradient norm, its norm, the norm of its update
and the update/weight ratio (the number a practitioner watches for a learning rate that is too high or low).

Two ways in: an optimizer that reports through the engine hooks (``optimizer_step_begin`` / ``_end`` events),
either handing the updates it applied (``exposes_updates``: nothing more to compute) or not (the parameters are
copied at begin and differenced at end, in buffers kept across steps); and the explicit calls of
`rtxviz.events.report` (`optimizer_step`, `report_optimizer_step`).
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Sequence
from typing import Any

from ..schema import MAX_PARAMS
from ..summary import norm, tensor_stats
from .fields import params_of


def _root(squares: float) -> float | None:
    """√ of a sum of squares; None when it is not finite (NaN/Inf somewhere, or overflow)."""
    return math.sqrt(squares) if squares - squares == 0.0 else None


def _forget(table: dict, key: int) -> Any:
    """A weakref callback dropping `key` from `table` when the referent dies."""
    def callback(_ref: Any) -> None:
        table.pop(key, None)

    return callback


class OptimizerReporter:
    """Builds the `optimizer_step` events of one EventHook (`hook`: its leaf ids, sink, step, size limits)."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self._snapshot: tuple | None = None
        # id(param) -> (weak ref to it, buffer): where each step's pre-update copy goes. Reused, because a fresh
        # copy of every parameter per step is freed again at once, and glibc then hands the memory back to the
        # OS (heap trimming) and page-faults it in anew on the next step: measured at 5-7x the copy itself.
        self._bufs: dict[int, tuple[Any, Any]] = {}
        # id(leaf) -> (its gradient's array, that gradient's summary): the report's grad_norm reuses it when
        # `.grad` is still that array (the hook fills it as backward reaches each leaf).
        self.leaf_stats: dict[int, tuple[Any, Any]] = {}

    def _send(self, name: str, rows: list) -> None:
        hook = self.hook
        hook.sink({"v": 1, "kind": "optimizer_step", "t": time.time(), "step": hook.step, "optimizer": name[:200],
                   "params": rows})

    def on_event(self, kind: str, optimizer: Any, fields: dict) -> None:
        """An optimizer's update, reported by the engine hooks as one `optimizer_step` event at end.

        An optimizer that says ``exposes_updates=True`` at begin hands ``updates=[(param, update array,
        squares), ...]`` at end (the arrays it added to the parameters, and ‖p‖², ‖u‖² when it measured them
        while adding): the report then costs nothing more, or two dot products per parameter.
        Any other optimizer gets the general path: a snapshot of the parameters at begin, the difference at end.
        """
        if optimizer is None:
            return
        if kind == "optimizer_step_begin":
            if fields.get("exposes_updates"):
                self._snapshot = (optimizer, None, None)
                return
            params = params_of(optimizer)[:MAX_PARAMS]
            self._snapshot = (optimizer, params, self.copy_params(params))
            return
        snap, self._snapshot = self._snapshot, None
        if snap is None or snap[0] is not optimizer:
            return
        _, params, before = snap
        try:
            if params is None:
                updates = fields.get("updates")
                if updates is not None:
                    self.report_updates(params_of(optimizer)[:MAX_PARAMS], updates, type(optimizer).__name__)
                return
            self.report_difference(params, before, [p.data for p in params], type(optimizer).__name__,
                                   before_owned=True)
        finally:
            # let go of this backward's gradient arrays now: held until the next backward, they are not freed
            # by the user's zero_grad, and the next forward's activations land in colder memory
            self.leaf_stats.clear()

    def report_updates(self, params: list, updates: list, name: str) -> None:
        """One `optimizer_step` event from the updates an optimizer applied (``p += u`` for each (p, u[, squares])):
        ‖u‖ and ‖p‖ now (both arrays change in place at the next step), from the squares the optimizer measured
        while adding when it did, the gradient norm from the gradient's summary. A parameter without an update
        (no gradient) moved by 0."""
        by_id = {id(e[0]): e for e in updates}
        rows = []
        for p in params:
            e = by_id.get(id(p))
            pn: float | None
            un: float | None
            if e is None:  # no gradient: not moved
                pn, un = norm(p.data), 0.0
            elif len(e) > 2 and e[2] is not None:
                psq, usq = e[2]
                pn, un = _root(psq), _root(usq)
            else:
                pn = norm(p.data)
                un = None if e[1] is None else norm(e[1])  # None: the optimizer did not say
            rows.append({
                "leaf": self.hook.leaf_id(p), "name": getattr(p, "name", None), "grad_norm": self.grad_norm(p),
                "param_norm": pn, "update_norm": un, "update_ratio": (un / pn) if un is not None and pn else None,
            })
        self._send(name, rows)

    def grad_norm(self, p: Any) -> Any:
        """‖p.grad‖ now (clipping may have replaced it since backward): the norm of the summary this backward
        made, when `.grad` is still that array; else a new summary's."""
        grad = getattr(p, "grad", None)
        if grad is None:
            return None
        data = grad.data
        entry = self.leaf_stats.get(id(p))
        s = entry[1] if entry is not None and entry[0] is data else tensor_stats(data, self.hook.values_max_numel)
        return s["norm"]

    def copy_params(self, params: list) -> list:
        """Copies of the parameters' arrays (before an update), in buffers this hook keeps for the next step."""
        bufs = self._bufs
        out = []
        for p in params:
            a = p.data
            k = id(p)
            entry = bufs.get(k)
            buf = entry[1] if entry is not None and entry[0]() is p else None
            if buf is None or type(buf) is not type(a) or buf.shape != a.shape or buf.dtype != a.dtype:
                buf = a.copy()
                try:
                    bufs[k] = (weakref.ref(p, _forget(bufs, k)), buf)
                except TypeError:  # no weak references to it: copy afresh each time
                    pass
            else:
                buf[...] = a
            out.append(buf)
        return out

    def report_difference(self, params: list, before: Sequence[Any], after: Sequence[Any], name: str,
                          before_owned: bool = False) -> None:
        """One `optimizer_step` event from the parameter arrays before and after an update.

        before_owned: the `before` arrays are private copies that may be overwritten (the difference is then
        computed in place, saving an allocation and a pass per parameter).
        """
        rows = []
        for p, b, a in zip(params, before, after, strict=False):
            pn = norm(a)
            if before_owned and type(b) is type(a) and b.shape == a.shape and b.dtype == a.dtype:
                b -= a  # ‖b - a‖ = ‖a - b‖, without a temporary (numpy and cupy alike)
                un = norm(b)
            else:
                un = norm(a - b)
            lid = self.hook.leaf_id(p)
            rows.append({
                "leaf": lid, "name": getattr(p, "name", None), "grad_norm": self.grad_norm(p), "param_norm": pn,
                "update_norm": un,
                "update_ratio": (un / pn) if un is not None and pn else None,
            })
        self._send(name, rows)
