"""The SQLite store's layout (issue 21, point 2): a run of node, grad or leaf_grad events of one step shares a row
of `events`, and the per-step history is made when it is read. What a reader gets must not change: every read is
checked against the plain list of the events as appended, filtered in Python, and the history against the norms
the events carry. The rows themselves are counted with sqlite3, as the file holds them."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from rtxviz.store import SQLiteStore, StoreFull
from rtxviz.store.sqlite import PACK_MAX

from .test_contract import ev

LEAVES = 3  # w0, w1, w2: each step's nodes use them


def training_step(step: int, ops: int = 6) -> list[tuple[str, int | None, str]]:
    """One step as the engine sends it: nodes, then grads (norm 10*step + k for the k-th op), then leaf grads."""
    out = [ev("step_begin", step)]
    out += [ev("node", step, id=100 * step + k, op="mul", module="fc", inputs=[{"leaf": 1 + k % LEAVES}])
            for k in range(1, ops + 1)]
    out.append(ev("backward_begin", step))
    out += [ev("grad", step, node=100 * step + k, output={"norm": 10.0 * step + k, "nan": 0, "inf": 0})
            for k in range(ops, 0, -1)]
    out += [ev("leaf_grad", step, leaf=1 + j, stats={"norm": step + j / 10, "nan": 0, "inf": 0})
            for j in range(LEAVES)]
    out += [ev("backward_end", step), ev("step_end", step)]
    return out


def stream(steps: int) -> list[tuple[str, int | None, str]]:
    leaves = [ev("leaf", None, id=1 + j, name=f"w{j}") for j in range(LEAVES)]
    return [ev("run_start", None, name="packed")] + leaves + [e for s in range(steps) for e in training_step(s)]


def append_in_batches(store: SQLiteStore, run_id: str, events: list, sizes: list[int]) -> list[tuple[int, str]]:
    """Append `events` in batches of the given sizes (cycled); the (seq, stored text) of each, as append answered."""
    out: list[tuple[int, str]] = []
    at = 0
    for size in itertools.cycle(sizes):
        if at >= len(events):
            return out
        first, texts = store.append(run_id, None, events[at:at + size])
        out += list(enumerate(texts, first))
        at += size
    return out


def count_in_file(path: Path, table: str) -> int:
    """The rows of `table` in the file, read with sqlite3 (not through the store)."""
    con = sqlite3.connect(path)
    try:
        return int(con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


def rows_in_file(path: Path) -> int:
    return count_in_file(path, "events")


def expected(stored: list[tuple[int, str]], kinds_of: dict[int, tuple[str, int | None]], after: int = 0,
             upto: int | None = None, limit: int = 1000, kinds: list[str] | None = None,
             step: int | None = None) -> list[tuple[int, str]]:
    out = [(seq, text) for seq, text in stored if seq > after and (upto is None or seq <= upto)
           and (kinds is None or kinds_of[seq][0] in kinds) and (step is None or kinds_of[seq][1] == step)]
    return out[:limit]


@pytest.mark.parametrize("sizes", [[10_000], [7], [5, 23, 1], [40, 3]])
def test_a_training_stream_takes_fewer_rows_and_every_read_gives_its_events_one_by_one(tmp_path: Path,
                                                                                      sizes: list[int]) -> None:
    path = tmp_path / "runs.db"
    events = stream(12)
    store = SQLiteStore(str(path))
    stored = append_in_batches(store, "r", events, sizes)
    kinds_of = {seq: (kind, step) for (seq, _), (kind, step, _) in zip(stored, events, strict=True)}
    assert [seq for seq, _ in stored] == list(range(1, len(events) + 1))
    if sizes == [10_000]:  # one batch: a step is 7 rows (begin, nodes, backward_begin, grads, leaf grads, 2 ends)
        assert rows_in_file(path) == 1 + LEAVES + 12 * 7
    else:  # a batch boundary may split a run of one kind into two rows, never join two runs
        assert rows_in_file(path) < len(events)
    last = len(events)
    for after, upto, limit, kinds, step in [
            (0, None, 1000, None, None), (0, None, 5, None, None), (6, None, 1000, None, None),
            (9, 11, 1000, None, None), (10, None, 3, None, None), (last - 1, None, 1000, None, None),
            (last, None, 1000, None, None), (0, None, 1000, ["grad"], None), (7, None, 4, ["node", "leaf_grad"], 2),
            (0, None, 1000, None, 5), (33, 70, 1000, ["grad", "step_end"], None), (0, None, 1, ["leaf_grad"], 11)]:
        got = store.events("r", after=after, upto=upto, limit=limit, kinds=kinds, step=step)
        assert got == expected(stored, kinds_of, after, upto, limit, kinds, step), (after, upto, limit, kinds, step)
    # every start and every size of page, as the page's catch-up and the WebSocket's replay read
    for after in range(0, last + 1):
        assert store.events("r", after=after, limit=4) == expected(stored, kinds_of, after, limit=4)
    assert store.last_seq("r") == last
    store.close()


def test_a_run_longer_than_a_row_holds_splits_and_a_restart_counts_to_its_last_event(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    nodes = [ev("node", 0, id=k, op="add", module="m", inputs=[]) for k in range(1, 3 * PACK_MAX + 10)]
    store = SQLiteStore(str(path))
    first, texts = store.append("r", None, [ev("step_begin", 0)] + nodes)
    assert first == 1
    assert rows_in_file(path) == 1 + 4  # 202 nodes: rows of 64, 64, 64 and 10
    store.close()
    again = SQLiteStore(str(path))  # the last seq comes from the last row and the events packed in it
    assert again.last_seq("r") == len(texts) == 3 * PACK_MAX + 10
    assert again.append("r", None, [ev("step_end", 0)])[0] == len(texts) + 1
    assert again.events("r", after=PACK_MAX + 3, limit=3) == list(enumerate(texts, 1))[PACK_MAX + 3:PACK_MAX + 6]
    assert [seq for seq, _ in again.events("r", limit=10_000)] == list(range(1, len(texts) + 2))
    again.close()


def history_in_file(path: Path) -> int:
    return count_in_file(path, "history")


def test_the_history_is_made_when_read_from_the_norms_the_events_carry(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(str(path))
    append_in_batches(store, "r", stream(4), [9])
    assert history_in_file(path) == 0  # storing makes none of it
    # the k-th mul of each step: its grad event's norm, 10*step + k; leaf w_j: its leaf_grad's, step + j/10
    assert store.history("r", "fc|mul|2") == [(s, 10.0 * s + 2, None, 0) for s in range(4)]
    assert store.history("r", "L:w1") == [(s, s + 0.1, None, 0) for s in range(4)]
    made = history_in_file(path)
    assert made == 4 * (6 + LEAVES)
    append_in_batches(store, "r", [e for s in (4, 5) for e in training_step(s)], [11])
    assert history_in_file(path) == made  # not until it is read again
    assert store.history("r", "fc|mul|6") == [(s, 10.0 * s + 6, None, 0) for s in range(6)]
    store.close()


def test_a_history_read_after_a_restart_in_the_middle_of_a_step_names_that_step_s_nodes(tmp_path: Path) -> None:
    """The history's naming state is rebuilt from what is stored (the leaves, the last step's packed node rows)
    when a process that did not follow the run reads it."""
    path = tmp_path / "runs.db"
    step3 = training_step(3)
    half = step3.index(ev("backward_begin", 3))
    store = SQLiteStore(str(path))
    append_in_batches(store, "r", stream(3) + step3[:half], [13])
    assert store.history("r", "fc|mul|1") == [(s, 10.0 * s + 1, None, 0) for s in range(3)]  # read mid-step 3
    store.close()
    again = SQLiteStore(str(path))
    again.append("r", None, step3[half:])
    assert again.history("r", "fc|mul|1") == [(s, 10.0 * s + 1, None, 0) for s in range(4)]
    assert again.history("r", "L:w2") == [(s, s + 0.2, None, 0) for s in range(4)]
    again.close()
    fresh = SQLiteStore(str(tmp_path / "fresh.db"))  # the same events read by one process, no restart
    append_in_batches(fresh, "r", stream(4), [10_000])
    assert fresh.history("r", "fc|mul|4") == [(s, 10.0 * s + 4, None, 0) for s in range(4)]
    fresh.close()


def test_a_catch_up_in_many_transactions_makes_the_same_history_and_lets_appends_in_between(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    store = SQLiteStore(str(tmp_path / "runs.db"))
    append_in_batches(store, "r", stream(5), [10_000])
    monkeypatch.setattr(store, "HISTORY_CHUNK_ROWS", 3)  # a step is 7 rows: chunks end inside steps and packs
    chunk = store._catch_up_chunk
    calls: list[bool] = []

    def chunk_then_append_from_another_thread(run_id: str) -> bool:
        more = chunk(run_id)
        if len(calls) == 1:  # between two transactions the write lock is free: another thread's append goes in
            other = threading.Thread(target=store.append, args=("other", None, [ev("step_begin", 0)]))
            other.start()
            other.join(10)
            assert not other.is_alive()
        calls.append(more)
        return more

    monkeypatch.setattr(store, "_catch_up_chunk", chunk_then_append_from_another_thread)
    assert store.history("r", "fc|mul|3") == [(s, 10.0 * s + 3, None, 0) for s in range(5)]
    assert store.history("r", "L:w0") == [(s, float(s), None, 0) for s in range(5)]
    assert len(calls) > 10 and calls[-1] is False and store.last_seq("other") == 1
    store.close()


def test_a_catch_up_that_fails_part_way_keeps_what_it_committed_and_the_next_read_completes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    append_in_batches(store, "r", stream(4), [10_000])
    monkeypatch.setattr(store, "HISTORY_CHUNK_ROWS", 7)
    made = store._append_history
    calls = []

    def fail_the_third(run_id: str, events: list, first: int) -> None:
        calls.append(first)
        if len(calls) == 3:
            raise StoreFull("the disk is full")
        made(run_id, events, first)

    monkeypatch.setattr(store, "_append_history", fail_the_third)
    # the read answers what the history holds so far (two transactions' worth), and says why in the log
    partial = store.history("r", "fc|mul|1")
    assert partial and partial == [(s, 10.0 * s + 1, None, 0) for s in range(len(partial))] and len(partial) < 4
    assert store._broken is None
    assert store.history("r", "fc|mul|1") == [(s, 10.0 * s + 1, None, 0) for s in range(4)]
    store.close()


def test_an_event_text_holding_the_row_separator_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    store.append("r", None, [ev("step_begin", 0)])
    with pytest.raises(ValueError, match="event 1 of the batch .node. holds the character U.001E"):
        store.append("r", None, [ev("node", 0, id=1), ("node", 0, '{"kind":"node","op":"a\x1eb"}')])
    assert store.last_seq("r") == 1 and [seq for seq, _ in store.events("r")] == [1]
    store.close()
