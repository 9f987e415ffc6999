"""The history's two ways in: events the server decoded already (its fast path, node events named inline) and the
same events as text (decoded by the tracker, named by _StepNames.node). Both must make the same rows and names."""

from __future__ import annotations

import json

from rtxviz.store.history import HistoryTracker


def _events() -> list[tuple[str, int | None, str]]:
    evs: list[dict] = [
        {"kind": "leaf", "id": 1, "name": "w"},
        {"kind": "step_begin", "step": 0},
        {"kind": "node", "step": 0, "id": 7, "op": "mul", "module": "fc"},
        {"kind": "node", "step": 0, "id": 8, "op": "mul", "module": "fc"},        # the 2nd mul of fc: fc|mul|2
        {"kind": "node", "step": 0, "id": 9, "op": 3, "module": None},             # odd fields: "|?"
        {"kind": "node", "step": 0, "id": True, "op": "add", "module": "fc"},      # a bool id names nothing
        {"kind": "node", "step": None, "id": 10, "op": "add"},                     # outside a step: no history
        {"kind": "checkpoint", "step": 0, "phase": "begin", "segment": 4},
        {"kind": "checkpoint", "step": 0, "phase": "recompute_begin", "segment": 4},
        {"kind": "node", "step": 0, "id": 11, "op": "mul", "module": "fc"},       # rc1:fc|mul|1
        {"kind": "checkpoint", "step": 0, "phase": "recompute_end", "segment": 4},
        {"kind": "node", "step": 1, "id": 12, "op": "mul", "module": "fc"},       # a new step without step_begin
        {"kind": "grad", "step": 1, "node": 12, "output": {"norm": 4.0}},
        {"kind": "node", "step": 0, "id": 13, "op": "exp", "module": "fc"},       # back to step 0: named afresh
    ]
    for i, n in enumerate((7, 8, 9, 10, 11, 13)):
        evs.append({"kind": "grad", "step": 0, "node": n, "output": {"norm": float(i), "nan": int(n == 9)}})
    evs.append({"kind": "leaf_grad", "step": 0, "leaf": 1, "stats": {"norm": 3.0}})
    return [(e["kind"], e.get("step"), json.dumps(e)) for e in evs]


def test_decoded_events_make_the_rows_and_names_their_texts_make() -> None:
    events = _events()
    from_text, from_decoded = HistoryTracker(), HistoryTracker()
    a = from_text.rows("r", events, 1)
    b = from_decoded.rows("r", events, 1, decoded=[json.loads(t) for *_, t in events])
    assert a == b
    # the names as the page keys them, worked out by hand from the events above
    # (step 1's node 12 has its grad; step 0's earlier nodes were forgotten when step 0 was named afresh)
    assert sorted(a) == [("L:w", 0), ("fc|exp|1", 0), ("fc|mul|1", 1)]
    assert a[("fc|mul|1", 1)] == [4.0, None, 0] and a[("fc|exp|1", 0)] == [5.0, None, 0]
    # the node names of the last step taken in (step 0, named afresh after step 1) agree too
    assert from_text._runs["r"].step.nodes == from_decoded._runs["r"].step.nodes
    assert from_text._runs["r"].step.key(13) == "fc|exp|1"


def test_in_one_step_ordinals_recomputation_and_odd_fields_name_alike() -> None:
    events = [e for e in _events() if e[1] != 1 and '"step": 1' not in e[2]]
    from_text, from_decoded = HistoryTracker(), HistoryTracker()
    a = from_text.rows("r", events, 1)
    b = from_decoded.rows("r", events, 1, decoded=[json.loads(t) for *_, t in events])
    assert a == b
    assert sorted(a) == [("L:w", 0), ("fc|exp|1", 0), ("fc|mul|1", 0), ("fc|mul|2", 0), ("rc1:fc|mul|1", 0),
                         ("|?|1", 0)]
    assert a[("|?|1", 0)] == [2.0, None, 1] and a[("rc1:fc|mul|1", 0)] == [4.0, None, 0]
    assert a[("fc|mul|1", 0)] == [0.0, None, 0] and a[("fc|mul|2", 0)] == [1.0, None, 0]
