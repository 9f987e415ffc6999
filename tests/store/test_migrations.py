"""Versioned migrations (rtxviz/store/migrations.py) on SQLite files: a database made by the code before versioning
upgrades in place when a writer opens it, a reader reads it as it is, and one newer than the code is refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rtxviz.store import SQLiteStore, StoreOpenError, hash_token, open_store
from rtxviz.store.migrations import LATEST

#: The schema SQL of rtxviz/store/sqlite.py before migrations (commit bbde5c5), as it made every existing file.
BEFORE_VERSIONING = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'running', meta TEXT NOT NULL DEFAULT '{}',
    n_events INTEGER NOT NULL DEFAULT 0, dropped INTEGER NOT NULL DEFAULT 0, last_step INTEGER
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, step INTEGER, body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_kind ON events (run_id, kind, seq);
"""


def old_file(path: Path) -> None:
    """A runs database as the code before versioning left it: one run of two events."""
    con = sqlite3.connect(path)
    con.executescript(BEFORE_VERSIONING)
    con.execute("INSERT INTO runs (id, name, created, updated, meta, n_events, last_step) "
                "VALUES ('old', 'before', 1.0, 2.0, '{\"lr\": 0.1}', 2, 0)")
    for seq, kind in ((1, "step_begin"), (2, "step_end")):
        con.execute("INSERT INTO events VALUES ('old', ?, ?, 0, ?)",
                    (seq, kind, json.dumps({"seq": seq, "v": 1, "kind": kind, "t": 0, "step": 0})))
    con.commit()
    con.close()


def version_of(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT version FROM schema_version").fetchone()[0])
    finally:
        con.close()


def columns(path: Path, table: str) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
    finally:
        con.close()


def test_a_new_file_is_made_at_the_latest_version(tmp_path: Path) -> None:
    SQLiteStore(str(tmp_path / "new.db")).close()
    assert version_of(tmp_path / "new.db") == LATEST == 4
    assert "owner" in columns(tmp_path / "new.db", "runs")


def test_a_file_from_before_versioning_upgrades_in_place_keeping_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_file(path)
    assert "owner" not in columns(path, "runs")
    reader = open_store(str(path), read_only=True)  # a reader reads it as it is, and changes nothing
    run = reader.get_run("old")
    assert run is not None and (run["name"], run["meta"], run["owner"]) == ("before", {"lr": 0.1}, None)
    assert reader.list_runs(owner="ada") == [] and reader.list_users() == [] and reader.find_user("x") is None
    reader.close()
    assert "owner" not in columns(path, "runs")

    store = open_store(str(path))  # a writer upgrades it
    assert version_of(path) == LATEST and "owner" in columns(path, "runs") and "token_hash" in columns(path, "users")
    assert "grad_norm" in columns(path, "history") and "name" in columns(path, "history_names")  # migration 3
    run = store.get_run("old")
    assert run is not None and (run["name"], run["n_events"], run["owner"]) == ("before", 2, None)
    assert [seq for seq, _ in store.events("old")] == [1, 2] and store.last_seq("old") == 2
    assert store.append("old", None, [("log", None, '{"v":1,"kind":"log","t":0}')])[0] == 3
    store.add_user("ada", hash_token("t"))
    store.close()
    again = open_store(str(path))  # opening an upgraded file again applies nothing more
    assert version_of(path) == LATEST and again.find_user(hash_token("t"))["name"] == "ada"  # type: ignore[index]
    again.close()


def test_a_file_newer_than_the_code_is_refused_by_writers_and_readers(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    SQLiteStore(str(path)).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_version SET version = 99")
    con.commit()
    con.close()
    for read_only in (False, True):
        with pytest.raises(StoreOpenError) as info:
            open_store(str(path), read_only=read_only)
        message = str(info.value)
        assert str(path) in message and "schema version 99" in message and "Upgrade rtxviz" in message
    assert version_of(path) == 99  # untouched
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_version SET version = ?", (LATEST,))
    con.commit()
    con.close()
    open_store(str(path)).close()  # the refusal left no writer's lock behind


def page_size_of(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("PRAGMA page_size").fetchone()[0])
    finally:
        con.close()


def test_a_new_file_gets_16_kib_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    from rtxviz.store.sqlite import PAGE_SIZE

    SQLiteStore(str(tmp_path / "new.db")).close()
    assert page_size_of(tmp_path / "new.db") == PAGE_SIZE == 16384
    old_file(tmp_path / "old.db")  # made by sqlite3 with its default pages
    assert page_size_of(tmp_path / "old.db") == 4096
    store = SQLiteStore(str(tmp_path / "old.db"))
    try:
        store.append("old", None, [("step_begin", 1, '{"v":1,"kind":"step_begin","t":0,"step":1}')])
        assert [seq for seq, _ in store.events("old")] == [1, 2, 3]
    finally:
        store.close()
    assert page_size_of(tmp_path / "old.db") == 4096


def test_a_version_3_file_keeps_its_history_and_the_history_goes_on_from_its_last_event(tmp_path: Path) -> None:
    """Version 3 made the history as it stored the events; version 4 makes it when it is read, from
    ``runs.history_seq``, which the upgrade sets to each run's last seq (so nothing is taken in twice)."""
    from .test_contract import ev

    path = tmp_path / "v3.db"
    step = [ev("step_begin", 0), ev("node", 0, id=5, op="exp", module="m", inputs=[]),
            ev("grad", 0, node=5, output={"norm": 2.5, "nan": 0, "inf": 0})]
    store = SQLiteStore(str(path))
    store.append("r", None, step)
    assert store.history("r", "m|exp|1") == [(0, 2.5, None, 0)]
    store.close()
    con = sqlite3.connect(path)  # as version 3 left it: no history_seq; and a history row only it had made
    con.execute("ALTER TABLE runs DROP COLUMN history_seq")
    con.execute("UPDATE schema_version SET version = 3")
    con.execute("UPDATE history SET grad_norm = 7.0")
    con.commit()
    con.close()
    store = SQLiteStore(str(path))
    assert version_of(path) == LATEST and "history_seq" in columns(path, "runs")
    assert store.history("r", "m|exp|1") == [(0, 7.0, None, 0)]  # kept, not made again from the events
    store.append("r", None, [ev("step_begin", 1), ev("node", 1, id=9, op="exp", module="m", inputs=[]),
                             ev("grad", 1, node=9, output={"norm": 4.0, "nan": 1, "inf": 0})])
    assert store.history("r", "m|exp|1") == [(0, 7.0, None, 0), (1, 4.0, None, 1)]
    store.close()


def test_runs_stored_before_the_history_existed_get_it_from_their_events_when_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_file(path)  # before versioning: no history tables; add one step with a gradient to its run
    con = sqlite3.connect(path)
    for seq, kind, fields in ((3, "node", {"id": 4, "op": "tanh", "module": "enc", "inputs": []}),
                              (4, "grad", {"node": 4, "output": {"norm": 0.25, "nan": 0, "inf": 1}})):
        con.execute("INSERT INTO events VALUES ('old', ?, ?, 0, ?)",
                    (seq, kind, json.dumps({"seq": seq, "v": 1, "kind": kind, "t": 0, "step": 0, **fields})))
    con.commit()
    con.close()
    store = SQLiteStore(str(path))
    assert store.history("old", "enc|tanh|1") == [(0, 0.25, None, 1)]
    store.close()
