"""What only the PostgreSQL store does: errors that name the server and database, a lost connection while
serving, migrations on PostgreSQL, several processes appending to one run, and notifications of committed ranges."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from rtxviz.store import StoreOpenError, StoreUnavailable, open_store
from rtxviz.store.migrations import LATEST

from .conftest import postgres_url

psycopg = pytest.importorskip("psycopg")
from rtxviz.store.pgurl import redact  # noqa: E402
from rtxviz.store.postgres import PostgresStore  # noqa: E402


def ev(kind: str = "log") -> tuple[str, None, str]:
    return kind, None, json.dumps({"v": 1, "kind": kind, "t": 0.0})


@pytest.fixture
def url() -> str:
    return postgres_url()


def test_an_unreachable_server_is_refused_at_start_naming_host_port_and_database() -> None:
    with pytest.raises(StoreOpenError) as info:
        open_store("postgresql://ada:s3cret@127.0.0.1:1/classdb")
    message = str(info.value)
    assert "127.0.0.1:1, database classdb" in message and "pg_isready" in message
    assert "s3cret" not in message  # the password is never shown


def test_a_missing_database_is_refused_saying_so(url: str) -> None:
    missing = url.rsplit("/", 1)[0] + "/no_such_db"
    with pytest.raises(StoreOpenError, match='database "no_such_db" does not exist'):
        open_store(missing)


def test_path_is_the_url_without_its_password(url: str) -> None:
    store = open_store(url)
    assert store.path == url and store.path == redact(url)
    store.close()


def test_a_lost_connection_is_unavailable_then_the_pool_reconnects(url: str) -> None:
    store = open_store(url)
    store.append("r", None, [ev()])
    with psycopg.connect(url, autocommit=True) as admin:  # what a database restart does to our connections
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    with pytest.raises(StoreUnavailable, match="lost the connection to PostgreSQL at 127.0.0.1"):
        for _ in range(10):  # the pool holds a connection or more; each dead one fails once
            store.append("r", None, [ev()])
    deadline = time.monotonic() + 10
    while True:
        try:
            first, _ = store.append("r", None, [ev()])
            break
        except StoreUnavailable:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert first == store.last_seq("r") and [s for s, _ in store.events("r")] == list(range(1, first + 1))
    store.close()


V1_POSTGRES = [
    "CREATE TABLE runs (id TEXT PRIMARY KEY, name TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, "
    "updated DOUBLE PRECISION NOT NULL, status TEXT NOT NULL DEFAULT 'running', meta TEXT NOT NULL DEFAULT '{}', "
    "n_events BIGINT NOT NULL DEFAULT 0, dropped BIGINT NOT NULL DEFAULT 0, last_step BIGINT)",
    "CREATE TABLE events (run_id TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, step BIGINT, "
    "body TEXT NOT NULL, PRIMARY KEY (run_id, seq))",
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    "INSERT INTO schema_version VALUES (1)",
    "INSERT INTO runs (id, name, created, updated, n_events) VALUES ('old', 'before', 1, 1, 1)",
    """INSERT INTO events VALUES ('old', 1, 'log', NULL, '{"seq":1,"v":1,"kind":"log","t":0}')""",
]


def test_a_version_1_database_upgrades_and_a_newer_one_is_refused(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        for sql in V1_POSTGRES:
            con.execute(sql)
    with pytest.raises(StoreOpenError, match="older than this rtxviz's"):
        open_store(url, read_only=True)
    store = open_store(url)
    run = store.get_run("old")
    assert run is not None and run["owner"] is None and store.append("old", None, [ev()])[0] == 2
    store.close()
    with psycopg.connect(url, autocommit=True) as con:
        assert con.execute("SELECT version FROM schema_version").fetchall() == [(LATEST,)]
        con.execute("UPDATE schema_version SET version = 42")
    with pytest.raises(StoreOpenError, match="schema version 42, newer than this rtxviz knows"):
        open_store(url)


WRITER = """
import json, sys
from rtxviz.store import open_store
s = open_store(sys.argv[1])
firsts = [s.append("shared", None, [("log", None, '{"v":1,"kind":"log","t":0}')] * 3)[0] for _ in range(40)]
print(json.dumps(firsts))
"""


def test_processes_appending_to_one_run_keep_its_seqs_dense_and_ordered(url: str) -> None:
    open_store(url).close()  # migrate once first: the writers then start on a ready schema
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    firsts = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        firsts += json.loads(out)
    assert sorted(firsts) == list(range(1, 361, 3))  # every batch got its own three numbers
    store = open_store(url)
    rows = store.events("shared", limit=10_000)
    assert [s for s, _ in rows] == list(range(1, 361)) and store.last_seq("shared") == 360
    assert all(json.loads(text)["seq"] == seq for seq, text in rows)
    store.close()


def test_listen_hands_other_processes_ranges_in_commit_order_and_not_its_own(url: str) -> None:
    here = PostgresStore(url)
    there = PostgresStore(url)
    got: list[tuple[str, int, int, bool]] = []
    done = threading.Event()

    def notified(run_id: str, first: int, last: int, changed: bool) -> None:
        got.append((run_id, first, last, changed))
        if len(got) == 3:
            done.set()

    stop = here.listen(notified)
    here.append("mine", None, [ev()])  # its own: not handed back
    there.append("r", None, [ev(), ev()])
    there.append("r", None, [ev("run_end")])
    there.append("s", None, [ev()])
    assert done.wait(10), got
    assert got == [("r", 1, 2, True), ("r", 3, 3, True), ("s", 1, 1, True)]
    there.append("r", None, [ev()])
    deadline = time.monotonic() + 10
    while len(got) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert got[3] == ("r", 4, 4, False)  # an ordinary batch does not change the run's row
    stop()
    here.close()
    there.close()


def test_without_postgresql_the_tests_skip_or_with_require_they_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    from _pytest.outcomes import Failed, Skipped

    from . import pgserver

    monkeypatch.setattr(pgserver, "server", lambda: None)
    monkeypatch.setattr(pgserver, "_why_not", "PostgreSQL is not installed (stand-in)")
    monkeypatch.setattr(pgserver, "REQUIRED", False)
    with pytest.raises(Skipped, match="not installed"):
        postgres_url()
    monkeypatch.setattr(pgserver, "REQUIRED", True)
    with pytest.raises(Failed, match="RTXVIZ_REQUIRE_POSTGRES=1 but PostgreSQL is not installed"):
        postgres_url()


def test_listen_reconnects_after_a_lost_connection_and_says_so(url: str) -> None:
    here, there = PostgresStore(url), PostgresStore(url)
    got: list[tuple[str, int, int, bool]] = []
    again = threading.Event()
    stop = here.listen(lambda *note: got.append(note), again.set)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'")
    assert again.wait(15)  # LISTEN is back in place: the caller is told to read what it may have missed
    there.append("r", None, [ev()])
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.02)
    assert got == [("r", 1, 1, True)]
    stop()
    here.close()
    there.close()


def test_export_reads_a_run_from_a_postgresql_database(url: str, tmp_path) -> None:
    store = open_store(url)
    store.append("r", "demo", [("step_begin", 0, '{"v":1,"kind":"step_begin","t":0,"step":0}'), ev()])
    store.close()
    out = tmp_path / "r.jsonl"
    done = subprocess.run([sys.executable, "-m", "rtxviz.cli", "export", "r", "--db", url, "--jsonl", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["kind"] for e in lines][-2:] == ["step_begin", "log"]
