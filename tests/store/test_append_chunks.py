"""`SQLiteStore.append_chunks` (issue 15) against `append` of the same batch: the same seqs, texts, rows, run record and
per-step history, whatever the batch's size against the part size; the parts handed over in order, each once
committed; a batch over a bound stores nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rtxviz.store import AppendsInChunks, SQLiteStore, StoreFull

from .test_contract import ev

CHUNK = 7


def step_batch(n: int) -> list[tuple[str, int | None, str]]:
    """`n` events of a training step as the engine sends them: run_start, leaves, nodes, their grads."""
    out = [ev("run_start", None, name="named by run_start", meta={"lr": 0.1}), ev("leaf", None, id=1, name="w"),
           ev("step_begin", 3)]
    i = 0
    while len(out) < n:
        i += 1
        out.append(ev("node", 3, id=i, op="mul", module="fc", inputs=[{"leaf": 1}]))
        out.append(ev("grad", 3, node=i, output={"norm": float(i), "nan": int(i % 5 == 0)}))
    return out[:n]


def _everything(store: SQLiteStore, run_id: str) -> dict[str, Any]:
    run = store.get_run(run_id)
    assert run is not None
    keys = [f"fc|mul|{k}" for k in range(1, 12)] + ["L:w"]
    return {"events": store.events(run_id, limit=10_000), "steps": store.steps(run_id),
            "history": {k: store.history(run_id, k) for k in keys},
            "run": {k: run[k] for k in ("name", "status", "meta", "n_events", "dropped", "last_step", "owner")}}


@pytest.mark.parametrize("n", [1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 2])
@pytest.mark.parametrize("existing", [False, True])
def test_parts_store_what_one_append_stores(tmp_path, n, existing):
    store = SQLiteStore(str(tmp_path / "runs.db"))
    assert isinstance(store, AppendsInChunks)
    batch = step_batch(n)
    decoded = [json.loads(text) for _, _, text in batch]
    for run_id in ("whole", "parts"):
        if existing:  # a run that already holds events (and a step): the batch goes on from seq 3
            store.append(run_id, "query name", [ev("log"), ev("step_begin", 2)], dropped=1, owner="ada")
    whole = store.append("whole", "query name", batch, dropped=4, owner="ada", decoded=decoded)
    handed: list[tuple[int, list[str], int]] = []
    parts = store.append_chunks("parts", "query name", batch, CHUNK, lambda f, t, last: handed.append((f, t, last)),
                                dropped=4, owner="ada", decoded=decoded)
    assert parts == whole
    first = whole[0]
    # the parts, in order, consecutive, each at most CHUNK, each saying where the batch ends
    assert [f for f, _, _ in handed] == list(range(first, first + n, CHUNK))
    assert [t for _, ts, _ in handed for t in ts] == whole[1]
    assert all(0 < len(ts) <= CHUNK for _, ts, _ in handed)
    assert {last for _, _, last in handed} == {first + n - 1}
    a, b = _everything(store, "whole"), _everything(store, "parts")
    assert a == b and a["events"] and a["run"]["name"] == "named by run_start"


def test_each_part_is_committed_before_it_is_handed_over(tmp_path):
    store = SQLiteStore(str(tmp_path / "runs.db"))
    reader = SQLiteStore(str(tmp_path / "runs.db"), read_only=True)  # another connection: sees commits only
    seen: list[tuple[int, int]] = []

    def check(first: int, texts: list[str], last: int) -> None:
        end = first + len(texts) - 1  # the part's last seq, as the other connection reads it now
        seen.append((end, (reader.events("r", after=end - 1, limit=1) or [(0, "")])[0][0]))

    store.append_chunks("r", None, step_batch(3 * CHUNK + 2), CHUNK, check)
    assert seen and all(stored == last for last, stored in seen), seen
    reader.close()
    store.close()


def test_a_batch_over_a_bound_stores_no_part(tmp_path):
    store = SQLiteStore(str(tmp_path / "runs.db"), max_events_per_run=20)
    handed: list[int] = []
    with pytest.raises(StoreFull, match="max_events_per_run=20") as info:
        store.append_chunks("r", None, step_batch(21), CHUNK, lambda f, t, last: handed.append(f))
    assert info.value.stored == 0 and info.value.first_seq is None
    assert handed == [] and not store.has_run("r")
    store.append_chunks("r", None, step_batch(20), CHUNK, lambda f, t, last: handed.append(f))
    assert handed == [1, 8, 15] and store.last_seq("r") == 20
