"""Several server processes on one PostgreSQL database (issue 20): `rtxviz serve --workers N` shares one port, a
viewer on any process gets every process's events in order with no gaps (LISTEN/NOTIFY), concurrent ingest keeps
a run's seqs dense, kill -9 of a worker loses nothing acknowledged while the other goes on serving, and a lost
database connection is a 503 with its reason, after which the server goes on.

Real processes (``python -m rtxviz.cli serve``) on a real PostgreSQL (tests/store/pgserver.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from websockets.sync.client import connect

from tests.store.conftest import postgres_url

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def store_backend() -> str:
    """These tests choose their store themselves (PostgreSQL): run them once, not once per store."""
    return "postgres"


@pytest.fixture
def url() -> str:
    return postgres_url()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """`rtxviz serve` in a process of its own; `.url` once it answers."""

    def __init__(self, db: str, *extra: str) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen([sys.executable, "-m", "rtxviz.cli", "serve", "--port", str(self.port),
                                      "--db", db, "--nice", "0", *extra], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "serving on" in line, line + self.proc.stdout.read()
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/api/health", timeout=2).read()
                return
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.05)

    def children(self) -> list[int]:
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            return [int(p) for p in f.read().split()]

    def stop(self) -> str:
        """Stop it; what it printed after its first line."""
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        return "" if self.proc.stdout.closed else self.proc.stdout.read()


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    started: list[Served] = []

    class Tracked(Served):
        def __init__(self, db: str, *extra: str) -> None:
            super().__init__(db, *extra)
            started.append(self)

    yield Tracked
    for s in started:
        if s.proc.returncode is None:
            s.stop()


def post(base: str, run_id: str, events: list[dict], retries: int = 0) -> dict:
    """POST a batch; with `retries`, a connection refused or reset (a killed worker) is sent again."""
    body = "\n".join(json.dumps(e) for e in events).encode()
    for attempt in range(retries + 1):
        req = urllib.request.Request(f"{base}/api/runs/{run_id}/events", data=body,
                                     headers={"Content-Type": "application/x-ndjson"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except (ConnectionError, urllib.error.URLError) as exc:
            if attempt == retries or isinstance(exc, urllib.error.HTTPError):
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


def log(i: int) -> dict:
    return {"v": 1, "kind": "log", "t": 0.0, "step": None, "i": i}


def stored(base: str, run_id: str) -> list[dict]:
    out: list[dict] = []
    after = 0
    while True:
        with urllib.request.urlopen(f"{base}/api/runs/{run_id}/events?after={after}&limit=1000") as r:
            page = json.loads(r.read())
        out += page["events"]
        if not page["more"]:
            return out
        after = page["next_after"]


def wait_until(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def read_seqs(ws, n: int, timeout: float = 30) -> list[int]:
    seqs: list[int] = []
    deadline = time.monotonic() + timeout
    while len(seqs) < n:
        msg = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        if msg["type"] == "events":
            seqs += [e["seq"] for e in msg["events"]]
    return seqs


def test_more_than_one_worker_on_a_sqlite_file_is_refused(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "rtxviz.cli", "serve", "--workers", "2", "--port", "0",
                          "--db", str(tmp_path / "runs.db")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--workers 2 needs a PostgreSQL --db" in out.stderr
    assert str(tmp_path / "runs.db") in out.stderr and "one writer" in out.stderr


def test_a_viewer_on_one_server_gets_what_another_ingested_in_order(url: str, serve: type[Served]) -> None:
    a, b = serve(url), serve(url)
    with connect(a.url.replace("http", "ws") + "/api/runs/r/ws") as viewer, \
            connect(a.url.replace("http", "ws") + "/api/ws") as lobby:
        assert json.loads(viewer.recv(timeout=10))["type"] == "hello"
        assert json.loads(lobby.recv(timeout=10))["type"] == "hello"
        n = 0
        for batch in range(30):  # mostly through B, some through A, so the two kinds of delivery interleave
            target = a if batch % 5 == 0 else b
            r = post(target.url, "r", [log(n + i) for i in range(7)])
            assert r["first_seq"] == n + 1
            n += 7
        seqs = read_seqs(viewer, n)
        assert seqs == list(range(1, n + 1))  # every one, in order, once
        announced = json.loads(lobby.recv(timeout=10))  # B created the run: A's lobby hears of it
        assert announced["type"] == "runs" and announced["run"]["id"] == "r"
    assert [e["i"] for e in stored(a.url, "r")] == list(range(n))


def test_concurrent_posts_through_two_servers_keep_a_runs_seqs_dense(url: str, serve: type[Served]) -> None:
    a, b = serve(url), serve(url)
    firsts: list[int] = []
    lock = threading.Lock()

    def writer(base: str, tag: int) -> None:
        for k in range(25):
            r = post(base, "dense", [log(tag * 1000 + k)] * 4)
            with lock:
                firsts.append(r["first_seq"])

    threads = [threading.Thread(target=writer, args=(s.url, t)) for t, s in enumerate([a, b, a, b])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(firsts) == list(range(1, 401, 4))  # each batch its own four numbers, none shared, none skipped
    rows = stored(b.url, "dense")
    assert [e["seq"] for e in rows] == list(range(1, 401))
    with connect(a.url.replace("http", "ws") + "/api/runs/dense/ws") as viewer:
        assert json.loads(viewer.recv(timeout=10))["last_seq"] == 400
        assert read_seqs(viewer, 400) == list(range(1, 401))


def test_workers_share_one_port_and_a_killed_one_loses_nothing_acknowledged(url: str, serve: type[Served]) -> None:
    server = serve(url, "--workers", "2")
    deadline = time.monotonic() + 30
    while len(server.children()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    first_two = server.children()
    acked: list[tuple[int, int]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def emitter() -> None:
        i = 0
        try:
            while not stop.is_set():
                try:
                    r = post(server.url, "k", [log(i), log(i + 1)], retries=20)
                except urllib.error.HTTPError:
                    raise
                except OSError:
                    continue  # a request in flight on the killed worker: never acknowledged, sent again
                acked.append((r["first_seq"], r["count"]))
                i += 2
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    with connect(server.url.replace("http", "ws") + "/api/runs/k/ws") as viewer:
        assert json.loads(viewer.recv(timeout=10))["type"] == "hello"
        threads = [threading.Thread(target=emitter) for _ in range(3)]
        for t in threads:
            t.start()
        wait_until(lambda: len(acked) >= 10)
        victim = first_two[0]
        os.kill(victim, signal.SIGKILL)
        before_kill = len(acked)
        wait_until(lambda: len(acked) >= before_kill + 10)  # the surviving worker goes on acknowledging
        stop.set()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert before_kill > 0 and len(acked) > before_kill
        total = sum(count for _, count in acked)
        # the viewer may have been on either worker: if on the killed one its socket closed, which is allowed
        try:
            seqs = read_seqs(viewer, 1, timeout=5)
            assert seqs[0] == 1
        except Exception:  # its worker was the one killed
            pass
    rows = stored(server.url, "k")
    seqs = [e["seq"] for e in rows]
    assert seqs == list(range(1, len(seqs) + 1))  # dense: nothing half-written by the killed worker
    acked_seqs = {first + j for first, count in acked for j in range(count)}
    assert acked_seqs <= set(seqs) and len(acked_seqs) == total  # every acknowledged event is stored, once
    deadline = time.monotonic() + 30
    while True:  # the parent starts another worker in the killed one's place
        now = server.children()
        if len(now) == 2 and victim not in now:
            break
        assert time.monotonic() < deadline, now
        time.sleep(0.05)
    with connect(server.url.replace("http", "ws") + "/api/runs/k/ws") as viewer:
        assert read_seqs(viewer, len(seqs)) == seqs
    said = server.stop()
    assert f"worker {victim} killed by signal 9; starting another" in said, said
    assert server.proc.returncode == 0  # SIGTERM stopped the workers and then the parent, cleanly


def test_serve_on_an_unreachable_database_says_where_and_what_to_do() -> None:
    out = subprocess.run([sys.executable, "-m", "rtxviz.cli", "serve", "--workers", "2", "--port", "0", "--db",
                          "postgresql://ada:s3cret@127.0.0.1:1/classdb"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "cannot use PostgreSQL at 127.0.0.1:1, database classdb" in out.stderr and "pg_isready" in out.stderr
    assert "s3cret" not in out.stderr + out.stdout and "Traceback" not in out.stderr


def test_a_lost_database_connection_is_a_503_with_the_reason_then_the_server_goes_on(url: str) -> None:
    import psycopg
    from fastapi.testclient import TestClient

    from rtxviz.web import create_app

    body = "\n".join(json.dumps(log(i)) for i in range(3))
    headers = {"Content-Type": "application/x-ndjson"}
    with TestClient(create_app(db=url)) as client:
        assert client.post("/api/runs/r/events", content=body, headers=headers).status_code == 200
        with psycopg.connect(url, autocommit=True) as admin:  # what a database restart does to the pool
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        statuses = []
        for _ in range(20):
            r = client.post("/api/runs/r/events", content=body, headers=headers)
            statuses.append(r.status_code)
            if r.status_code == 503:
                assert "lost the connection to PostgreSQL at 127.0.0.1" in r.json()["detail"]
                assert r.headers["retry-after"] == "5"
            if r.status_code == 200 and 503 in statuses:
                break
        assert 503 in statuses and statuses[-1] == 200, statuses
        run = client.get("/api/runs/r").json()
        assert run["n_events"] == 3 * statuses.count(200) + 3  # each acknowledged batch once, no refused one
