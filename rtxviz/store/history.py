"""Per-step gradient summaries, taken from the stored events: the history the page draws as sparklines.

For every training step and every graph value the page draws, one row: the gradient norm, the update/weight
ratio (parameters, from ``optimizer_step``), and whether the gradient held NaN/Inf. The value is named as the page
names it (state.ts), so the page asks for the history of the node it shows:

- an op: ``module|op|k``, the k-th op of that name in that module within the step (``rc<s>:`` in front for a
  checkpoint segment's recomputation), the same key every step gives the same node;
- a named leaf (a parameter): ``L:<name>``.

Where the numbers come from: an op's ``grad`` event (the norm of dL/d(its output)); a leaf's ``leaf_grad``
(that backward's contribution), then the ``optimizer_step`` row for it, whose ``grad_norm`` is the ``.grad`` the
update used (so with gradient accumulation the history shows what the optimizer saw) and its ``update_ratio``.

`HistoryTracker` keeps, per run, what naming needs across batches: the leaf names (announced once per run) and,
for the step being received, the node ids seen so far. `SQLiteStore` feeds it the events stored since the
history was last read, when it is read; `PostgresStore` each appended batch, in the batch's transaction. Before a
batch it checks that the state has seen every event stored before it (`current`); if not (a restart, a batch
the store refused, a batch another process stored), it rebuilds the state from the stored leaf events and the last
step's node and checkpoint events before the batch (`restore`).

>>> t = HistoryTracker()
>>> rows = t.rows("r", [
...     ("leaf", None, '{"kind":"leaf","id":1,"name":"w"}'),
...     ("step_begin", 0, '{"kind":"step_begin","step":0}'),
...     ("node", 0, '{"kind":"node","id":7,"op":"mul","module":"fc","inputs":[{"leaf":1}]}'),
...     ("grad", 0, '{"kind":"grad","node":7,"output":{"norm":2.0,"nan":0}}'),
...     ("leaf_grad", 0, '{"kind":"leaf_grad","leaf":1,"stats":{"norm":3.0}}'),
...     ("optimizer_step", 0, '{"kind":"optimizer_step","params":[{"leaf":1,"grad_norm":3.0,"update_ratio":0.01}]}'),
... ])
>>> sorted(rows.items())
[(('L:w', 0), [3.0, 0.01, 0]), (('fc|mul|1', 0), [2.0, None, 0])]
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

# the store imports the standard library only (tests/store/test_layering.py); the server, which has orjson (about 4x
# faster on these events), hands it in through `use_decoder`
_loads: Callable[[str], Any] = json.loads


def use_decoder(loads: Callable[[str], Any]) -> None:
    """Decode the events the history reads with `loads` (a drop-in for `json.loads`: same values, ValueError on
    bad text). The server passes ``orjson.loads``: decoding is most of the history's ingest cost."""
    global _loads
    _loads = loads

#: The top-level fields the history reads of each kind it reads (`HistoryTracker.rows`): the server, which reads its
#: NDJSON lines straight from their bytes, decodes only these for it (`decoded` may hold just them).
FIELDS: dict[str, tuple[str, ...]] = {
    "leaf": ("id", "name"), "node": ("id", "op", "module"), "grad": ("node", "output"),
    "leaf_grad": ("leaf", "stats"), "optimizer_step": ("params",), "step_begin": (),
    "checkpoint": ("phase", "segment"),
}
#: The event kinds the history reads; every other kind is not even decoded.
KINDS = frozenset(FIELDS)

#: One history row being built: [grad_norm or None, update_ratio or None, nonfinite (0/1)].
Row = list[Any]


def _num(v: Any) -> float | None:
    """A number as float (ints too, not bools); None for anything else. Exact type checks: this runs per event."""
    t = type(v)
    return v if t is float else float(v) if t is int else None


def _bad(stats: Any) -> int:
    """1 when a gradient summary counts NaN or Inf."""
    if not isinstance(stats, dict):
        return 0
    return int(bool(stats.get("nan") or stats.get("inf")))


def _grad_fields(text: str, loads: Callable[[str], Any]) -> tuple[Any, dict] | None:
    """A grad event's node id and its output summary, without decoding the rest (its inputs' summaries, most of
    its text). Exact for an event the schema admits: a grad event has no text fields and no free keys, so
    ``"node":`` and ``"output":`` occur only as its own keys, and a `Stats` object holds no ``}`` (numbers, null,
    number lists). Anything else is decoded whole; None when it is no grad event with an output.

    >>> _grad_fields('{"kind":"grad","node":7,"output":{"norm":2.0,"values":[1]},"inputs":[{"norm":1.0}]}', json.loads)
    (7, {'norm': 2.0, 'values': [1]})
    """
    i, j = text.find('"node":'), text.find('"output":')
    if i >= 0 and j >= 0:
        end = text.find("}", j)
        try:
            node = loads(text[i + 7:text.index(",", i)].strip())
            out = loads(text[j + 9:end + 1])
        except ValueError:
            pass
        else:
            if type(node) is int and type(out) is dict:
                return node, out
    try:
        ev = loads(text)
    except ValueError:
        return None
    out = ev.get("output") if type(ev) is dict else None
    return (ev.get("node"), out) if type(out) is dict else None


class _StepNames:
    """How the page names the values of one step: ordinals per module|op, node id -> key, checkpoint segments."""

    __slots__ = ("step", "ordinals", "nodes", "segments", "recompute", "rc")

    def __init__(self, step: int) -> None:
        self.step = step
        # a node's key, ``<rc>module|op|k``, is kept as its parts and written out only for a node that gets a history
        # row (`key`): most nodes of a big graph never do, and the two strings per node were a tenth of the ingest
        self.ordinals: dict[tuple[str, str, str], int] = {}  # (rc, module, op) -> how many so far
        self.nodes: dict[int, tuple[tuple[str, str, str], int]] = {}  # node id -> ((rc, module, op), k)
        self.segments: dict[Any, int] = {}  # engine segment id -> ordinal within the step (1, 2, ...)
        self.recompute: int | None = None   # the ordinal of the segment being recomputed
        self.rc = ""                        # the key's prefix while it is: "rc<ordinal>:"

    def node(self, ev: dict) -> None:
        module, op = ev.get("module"), ev.get("op")
        base = (self.rc, module if type(module) is str else "", op if type(op) is str else "?")
        k = self.ordinals.get(base, 0) + 1
        self.ordinals[base] = k
        nid = ev.get("id")
        if type(nid) is int:
            self.nodes[nid] = (base, k)

    def key(self, node_id: Any) -> str | None:
        """The page's key of node `node_id` of this step (``<rc>module|op|k``), None for a node not seen."""
        got = self.nodes.get(node_id)
        if got is None:
            return None
        (rc, module, op), k = got
        return f"{rc}{module}|{op}|{k}"

    def checkpoint(self, ev: dict) -> None:
        phase, seg = ev.get("phase"), ev.get("segment", -1)
        if phase == "begin":
            self.segments[seg] = len(self.segments) + 1
        elif phase == "recompute_begin" and seg in self.segments:
            self.recompute = self.segments[seg]
            self.rc = f"rc{self.recompute}:"
        elif phase == "recompute_end" and self.recompute == self.segments.get(seg):
            self.recompute = None
            self.rc = ""


class _RunNames:
    __slots__ = ("leaves", "step", "next_seq")

    def __init__(self) -> None:
        self.leaves: dict[int, str] = {}  # leaf id -> name (named leaves only)
        self.step: _StepNames | None = None
        self.next_seq: int | None = None  # the seq the run's next batch starts at, if this state has seen it all


class HistoryTracker:
    """Turns appended events into history rows, keyed ``(name, step)``; keeps each run's naming state."""

    def __init__(self) -> None:
        self._runs: dict[str, _RunNames] = {}

    def current(self, run_id: str, first_seq: int) -> bool:
        """Whether this state has taken in every event of the run before seq `first_seq` (False after a restart,
        a refused batch, or a batch that another process stored): if not, `restore` first."""
        run = self._runs.get(run_id)
        return run is not None and run.next_seq == first_seq

    def forget(self, run_id: str) -> None:
        """Drop a run's state (a batch that was not stored, a deleted run): `restore` rebuilds it from the store."""
        self._runs.pop(run_id, None)

    def restore(self, run_id: str, events: Iterable[tuple[str, int | None, str]], next_seq: int) -> None:
        """Rebuild a run's naming state from what is stored before seq `next_seq`: its ``leaf`` events and its last
        step's ``step_begin``, ``node`` and ``checkpoint`` events, in seq order; no rows are made."""
        self._runs.pop(run_id, None)
        self.rows(run_id, events)
        self._runs[run_id].next_seq = next_seq

    def rows(self, run_id: str, events: Iterable[tuple[str, int | None, str]],
             first_seq: int | None = None, decoded: Iterable[Any] | None = None) -> dict[tuple[str, int], Row]:
        """The history rows of a batch of ``(kind, step, json text)`` events (stored from seq `first_seq` on, when
        given: `current` then expects the next batch after it); several events about one value in one step merge
        into one row (later numbers win, NaN/Inf is kept once seen).

        `decoded`, when given, holds each event's text already decoded, one per event in order: then no text is
        decoded a second time. An entry may hold only the event's `FIELDS` (what the server's scan of the bytes
        decodes), and for a kind the history does not read anything (None). The rows are the same:

        >>> ev = [("step_begin", 0, '{"kind":"step_begin","step":0}'),
        ...       ("node", 0, '{"kind":"node","id":7,"op":"exp","module":"m"}'),
        ...       ("grad", 0, '{"kind":"grad","node":7,"output":{"norm":0.5,"inf":1}}')]
        >>> HistoryTracker().rows("r", ev) == HistoryTracker().rows("r", ev, decoded=[json.loads(t) for *_, t in ev])
        True
        """
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _RunNames()
        count = 0
        out: dict[tuple[str, int], Row] = {}
        loads, kinds = _loads, KINDS
        objs: Iterable[Any] = itertools.repeat(None) if decoded is None else decoded
        for (kind, step, text), ev in zip(events, objs, strict=False):  # repeat(None) never ends
            count += 1
            if kind not in kinds:
                continue
            if kind == "grad":  # the most frequent kind: read its node and output only, inlined (_put, _num, _bad)
                names = run.step
                if names is None or names.step != step:
                    continue
                if ev is None:
                    got = _grad_fields(text, loads)
                else:
                    o = ev.get("output") if type(ev) is dict else None
                    got = (ev.get("node"), o) if type(o) is dict else None
                if got is None:
                    continue
                key = names.key(got[0])
                if key is None:
                    continue
                o = got[1]
                n = o.get("norm")
                g = n if type(n) is float else float(n) if type(n) is int else None
                bad = 1 if o.get("nan") or o.get("inf") else 0
                row = out.get((key, step))
                if row is None:
                    out[(key, step)] = [g, None, bad]
                else:
                    if g is not None:
                        row[0] = g
                    row[2] = row[2] or bad
                continue
            if kind == "node" and type(ev) is dict:  # the other frequent kind, its step's names at hand: named
                names = run.step
                if names is not None and names.step == step:
                    names.node(ev)
                    continue
            if ev is None:
                try:
                    ev = loads(text)
                except ValueError:
                    continue
            if type(ev) is not dict:
                continue
            if kind == "leaf":
                lid, name = ev.get("id"), ev.get("name")
                if isinstance(lid, int) and isinstance(name, str) and name:
                    run.leaves[lid] = name
                continue
            if not isinstance(step, int):
                continue  # outside training steps (evaluation): not part of the history
            names = run.step
            if kind == "step_begin" or names is None or names.step != step:
                names = run.step = _StepNames(step)
            if kind == "node":
                names.node(ev)
            elif kind == "checkpoint":
                names.checkpoint(ev)
            elif kind == "leaf_grad":
                lid, stats = ev.get("leaf"), ev.get("stats")
                name = run.leaves.get(lid) if isinstance(lid, int) else None
                if name is not None and isinstance(stats, dict):
                    self._put(out, (f"L:{name}", step), _num(stats.get("norm")), None, _bad(stats))
            elif kind == "optimizer_step":
                for p in ev.get("params") or ():
                    if not isinstance(p, dict):
                        continue
                    lid = p.get("leaf")
                    name = run.leaves.get(lid) if isinstance(lid, int) else None
                    name = name or (p.get("name") if isinstance(p.get("name"), str) else None)
                    if not name:
                        continue
                    g = _num(p.get("grad_norm"))
                    # a null grad_norm beside a gradient is NaN/Inf (the reporter sends null for a non-finite √)
                    self._put(out, (f"L:{name}", step), g, _num(p.get("update_ratio")), 0)
        run.next_seq = None if first_seq is None else first_seq + count
        return out

    @staticmethod
    def _put(out: dict[tuple[str, int], Row], key: tuple[str, int], grad: float | None, ratio: float | None,
             bad: int) -> None:
        row = out.get(key)
        if row is None:
            out[key] = [grad, ratio, bad]
            return
        if grad is not None:
            row[0] = grad
        if ratio is not None:
            row[1] = ratio
        row[2] = row[2] or bad


def history_columns(rows: Sequence[tuple[int, float | None, float | None, int]]) -> dict[str, list[Any]]:
    """`RunStore.history`'s rows as columns (what GET /api/runs/{id}/history sends: compact for 10,000 steps).

    >>> history_columns([(0, 1.5, None, 0), (2, None, None, 1)])
    {'steps': [0, 2], 'grad_norm': [1.5, None], 'update_ratio': [None, None], 'nonfinite': [0, 1]}
    """
    return {"steps": [r[0] for r in rows], "grad_norm": [r[1] for r in rows],
            "update_ratio": [r[2] for r in rows], "nonfinite": [r[3] for r in rows]}
