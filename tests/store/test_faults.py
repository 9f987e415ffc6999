"""The SQLite store under faults (issue 17, points 7-9): a full disk, a second writer, a damaged, unreadable or
read-only file. Each fault is an error that names the file and what to do; a full disk stores nothing and the
store goes on once there is room.

The full disk is SQLite's own page limit (``PRAGMA max_page_count`` on the writer connection): SQLite answers it
exactly as it answers a full file system, SQLITE_FULL "database or disk is full".
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rtxviz.store import SQLiteStore, StoreFull, StoreLocked, StoreOpenError, StoreUnavailable, open_store

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def ev(kind: str = "log", step: int | None = None, pad: int = 0) -> tuple[str, int | None, str]:
    return kind, step, json.dumps({"v": 1, "kind": kind, "t": 0.0, "step": step, "pad": "x" * pad})


def fill_until_full(store: SQLiteStore) -> int:
    """Cap the file at its current size plus a little, then append until SQLite says it is full."""
    pages = store._w.execute("PRAGMA page_count").fetchone()[0]
    store._w.execute(f"PRAGMA max_page_count = {pages + 8}")
    for _ in range(1000):
        try:
            store.append("r", None, [ev(pad=2000) for _ in range(20)])
        except StoreFull as exc:
            assert "full" in str(exc) and store.path in str(exc) and "Free some space" in str(exc)
            return store.last_seq("r")
    raise AssertionError("the capped database never filled up")


def test_a_full_disk_stores_nothing_and_recovers_when_there_is_room(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    store.append("r", "run", [ev()])
    last = fill_until_full(store)
    assert not store._w.in_transaction  # the failed batch was rolled back, nothing half-written
    with pytest.raises(StoreFull, match="database or disk is full"):  # still full: the same answer, no other
        store.append("r", None, [ev(pad=2000) for _ in range(20)])
    assert store.last_seq("r") == last and len(store.events("r", limit=10_000)) == last
    store._w.execute("PRAGMA max_page_count = 1073741823")  # space freed
    first, _ = store.append("r", None, [ev(), ev()])
    assert first == last + 1 and store.last_seq("r") == last + 2
    assert [s for s, _ in store.events("r", after=last)] == [last + 1, last + 2]
    store.close()


def test_a_second_writer_is_refused_naming_the_file_and_the_holder(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    first = open_store(path)
    first.append("r", "run", [ev()])
    with pytest.raises(StoreLocked) as info:
        open_store(path)
    message = str(info.value)
    assert path in message and f"pid {os.getpid()}" in message and "--url" in message
    reader = open_store(path, read_only=True)  # reading beside the writer is fine
    assert reader.last_seq("r") == 1 and [r["id"] for r in reader.list_runs()] == ["r"]
    with pytest.raises(StoreUnavailable, match="read-only"):
        reader.append("r", None, [ev()])
    reader.close()
    first.close()
    again = open_store(path)  # the lock goes with the writer
    assert again.append("r", None, [ev()])[0] == 2
    again.close()


def test_the_lock_is_released_when_the_writer_is_killed(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    code = f"from rtxviz.store import open_store; s = open_store({path!r}); print('held', flush=True); input()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(StoreLocked, match=f"pid {proc.pid}"):
            open_store(path)
    finally:
        proc.kill()
        proc.wait(10)
    open_store(path).close()  # kill -9 left no stale lock behind


def _damage(path: Path, offset: int, size: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(os.urandom(size))


def test_a_file_that_is_not_sqlite_is_refused_at_start_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is a JSON-lines file, not a database\n" * 100)
    with pytest.raises(StoreOpenError) as info:
        open_store(str(path))
    assert str(path) in str(info.value) and f"mv {path} {path}.damaged" in str(info.value)
    with pytest.raises(StoreOpenError, match="not a readable SQLite database"):
        open_store(str(path), read_only=True)
    open_store(str(path) + ".other").close()  # the refusal left no lock behind on other files


def _many_pages(path: Path) -> None:
    store = SQLiteStore(str(path))
    for i in range(40):
        store.append(f"r{i % 4}", None, [ev(pad=1000) for _ in range(20)])
    store._w.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def test_a_file_damaged_in_the_middle_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _many_pages(path)
    size = path.stat().st_size
    assert size > 200_000
    _damage(path, size // 2, 4096 * 3)
    with pytest.raises(StoreOpenError) as info:
        open_store(str(path))
    assert str(path) in str(info.value) and "damaged" in str(info.value)


def test_damage_found_while_running_is_unavailable_and_stops_writes(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _many_pages(path)
    store = SQLiteStore(str(path))  # opens clean
    size = path.stat().st_size
    _damage(path, size // 2, size // 2 - 8192)  # most of the second half: whatever the reader reads next is bad
    with pytest.raises(StoreUnavailable, match="damaged"):
        for i in range(4):
            store.events(f"r{i}", limit=10_000)
            store.steps(f"r{i}")
    with pytest.raises(StoreUnavailable, match="damaged"):  # and nothing more is written into a damaged file
        store.append("r0", None, [ev()])
    store.close()


@pytest.mark.skipif(ROOT, reason="root reads and writes any file")
def test_an_unreadable_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(str(path)).close()
    path.chmod(0)
    try:
        with pytest.raises(StoreOpenError) as info:
            open_store(str(path))
        assert str(path) in str(info.value) and "ls -l" in str(info.value)
    finally:
        path.chmod(0o644)


@pytest.mark.skipif(ROOT, reason="root writes any file")
def test_a_read_only_file_is_refused_by_the_writer_and_read_by_readers(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    s = SQLiteStore(str(path))
    s.append("r", "run", [ev()])
    s.close()
    path.chmod(0o444)
    try:
        with pytest.raises(StoreOpenError) as info:
            open_store(str(path))
        assert str(path) in str(info.value) and "chmod" in str(info.value)
        reader = open_store(str(path), read_only=True)
        assert reader.last_seq("r") == 1
        reader.close()
    finally:
        path.chmod(0o644)


def test_sqlite_full_is_what_max_page_count_gives() -> None:
    # the stand-in for a full disk answers with SQLite's own "full" code, the one a full file system gives
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (x TEXT)")
    con.execute("PRAGMA max_page_count = 3")
    with pytest.raises(sqlite3.OperationalError) as info:
        for _ in range(100):
            con.execute("INSERT INTO t VALUES (?)", ("x" * 4000,))
    assert info.value.sqlite_errorcode == 13  # SQLITE_FULL
