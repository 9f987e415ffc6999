"""The class load test (issue 20): many students stream sampled runs into `rtxviz serve --workers N` while viewers
watch; then every run is read back and compared with what the server acknowledged.

    python benchmarks/bench_class.py                       # 200 students, 20 viewers: 1 worker, 2, 2 with a kill
    python benchmarks/bench_class.py --students 20 --viewers 4 --runs 2k   # the small version (the test's)
    python benchmarks/bench_class.py --db postgresql://rtxviz@localhost/bench   # an existing, empty database

Each student has an account of its own (a token, `rtxviz users add`'s way: only the hash is stored) and streams
one run of `--steps` steps over keep-alive HTTP (raw NDJSON POSTs, one step a batch: ``step_begin``, the step's
``node`` events when the step is sampled, ``step_end``; ``run_start`` first, ``run_end`` last), at most
`--concurrency` students at once. A batch whose answer did not come (a worker killed mid-request) is not blindly
sent again: the student asks the server how many events its run holds (it is the run's only writer) and sends
again only what is not there, so a duplicate in the database is the server's fault, never the client's.

Viewers (a quarter teachers, the rest students): run streams (a teacher follows a random student's run, a student
their own; a stream cut by a killed worker reconnects after the last seq it saw, as the page does) and lobbies.
Each checks what it receives: seqs dense and in order, no event of a run it may not read, no lobby entry of
another student's run.

Checked at the end, against the database (read back through the admin token):
- lost: acknowledged events not stored; duplicates: events stored twice (or stored but never sent);
- cross-student reads: a student's lobby or stream showing another's run, and for every student one attempt at
  another's run on each route (GET run/events/steps/graph, DELETE, POST, its WebSocket), which must read as
  missing (404, WebSocket code 4404) or be refused (POST: 403) and change nothing;
- with `--kill`: one worker is killed (SIGKILL) once `--kill-at` of the events are acknowledged; the others must
  keep serving (acknowledged events after the kill) and nothing acknowledged may be missing.

events/s is acknowledged events over the wall time from the first POST to the last answer (viewers running);
client_cpu_s is what this process (students and viewers, one Python) used meanwhile: on a 2-core machine the
clients take a share of the cores the workers would use, so read 1 against 2 workers, not absolute figures.
PostgreSQL: `--db URL` of an empty database, else a throwaway server from Debian's binaries (tests/store/pgserver.py,
with PostgreSQL's default durability: every commit flushed). Without PostgreSQL only `--workers 1` on SQLite runs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtxviz.store import hash_token, open_store  # noqa: E402

ADMIN = "bench-class-admin-token"
NO_SUCH_RUN = 4404  # rtxviz.web.routers.ws.NO_SUCH_RUN (not imported: the bench talks to the server over HTTP only)
NDJSON = {"Content-Type": "application/x-ndjson"}


@dataclass
class Config:
    students: int = 200
    viewers: int = 20
    steps: int = 12
    nodes: int = 40
    sample_every: int = 2
    concurrency: int = 32
    workers: int = 1
    kill: bool = False
    kill_at: float = 0.4
    timeout: float = 600.0


# -- the server ---------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for c in _children(todo.pop()):
            found.append(c)
            todo.append(c)
    return found


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "0A":  # 0A: LISTEN
                inodes.add(cols[9])
    return inodes


def _holds(pid: int, inodes: set[str]) -> bool:
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
    except OSError:
        pass
    return False


class Server:
    """`rtxviz serve --workers N` as a subprocess on a free loopback port."""

    def __init__(self, db: str, workers: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "rtxviz.cli", "serve", "--db", db, "--host", "127.0.0.1", "--port",
               str(self.port), "--token", ADMIN, "--nice", "0"]
        if workers > 1:
            cmd += ["--workers", str(workers)]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT,
                                     env={**os.environ, "RTXVIZ_TOKEN": ""})
        self.workers = workers
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rtxviz serve exited ({self.proc.returncode}): {self.output()}")
            try:
                status, _ = request(self.url, "GET", "/api/health", ADMIN)
                if status == 200 and len(self.worker_pids()) >= workers:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"rtxviz serve did not answer within 60 s: {self.output()}")
            time.sleep(0.1)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-2000:]

    def worker_pids(self) -> list[int]:
        """The processes that hold the listening socket (the main process too when it serves itself)."""
        inodes = _listening_inodes(self.port)
        pids = [p for p in [self.proc.pid, *_descendants(self.proc.pid)] if _holds(p, inodes)]
        if self.workers > 1 and len(pids) > 1 and self.proc.pid in pids:
            pids.remove(self.proc.pid)  # a supervisor that keeps the socket open for its workers
        return pids

    def kill_one(self) -> int:
        """SIGKILL one worker (not the supervisor); its pid."""
        pids = self.worker_pids()
        victim = pids[-1]
        os.kill(victim, signal.SIGKILL)
        return victim

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for pid in _descendants(self.proc.pid):  # a worker the supervisor left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.log.close()


def request(url: str, method: str, path: str, token: str | None, body: bytes | None = None,
            conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    own = conn is None
    if conn is None:
        conn = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=30)
    headers = dict(NDJSON) if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        if own:
            conn.close()


def request_again(url: str, method: str, path: str, token: str | None, body: bytes | None = None,
                  tries: int = 50) -> tuple[int, bytes]:
    """`request` once more when the connection failed (a worker killed after it accepted the connection): for
    requests that change nothing when repeated (reads, and writes the server must refuse)."""
    for _ in range(tries - 1):
        try:
            status, answer = request(url, method, path, token, body)
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
            continue
        if status not in (502, 503):
            return status, answer
        time.sleep(0.1)
    return request(url, method, path, token, body)


# -- students -----------------------------------------------------------------------------------------------------
def ev(kind: str, step: int | None, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "kind": kind, "t": time.time(), "step": step, **fields}


def marker(e: dict[str, Any]) -> tuple[Any, ...]:
    """What tells one event of a run from every other: kind, step, node id."""
    return (e["kind"], e.get("step"), e.get("id"))


def step_batch(cfg: Config, name: str, step: int) -> list[dict[str, Any]]:
    sampled = step % cfg.sample_every == 0
    batch = [ev("run_start", None, name=f"{name}'s mlp", sample_every=cfg.sample_every)] if step == 0 else []
    batch.append(ev("step_begin", step, sampled=sampled))
    if sampled:
        base = step * cfg.nodes
        batch.append(ev("leaf", step, id=base + 1, name="x", shape=[4, 8], dtype="float32", device="cpu",
                        requires_grad=False))
        batch.extend(ev("node", step, id=base + k, op="matmul" if k % 2 else "tanh",
                        inputs=[{"node": base + k - 1} if k > 1 else {"leaf": base + 1}], shape=[4, 8],
                        dtype="float32", device="cpu", module="model.fc") for k in range(1, cfg.nodes))
    batch.append(ev("step_end", step))
    if step == cfg.steps - 1:
        batch.append(ev("run_end", None, status="ok"))
    return batch


def planned_events(cfg: Config) -> int:
    return sum(len(step_batch(cfg, "x", s)) for s in range(cfg.steps))


@dataclass
class Tally:
    """What every thread adds to: acknowledged events, failures, violations."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: int = 0
    acked_after_kill: int = 0
    killed_at: float | None = None
    first_ack_after_kill: float | None = None
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    cross_reads: list[str] = field(default_factory=list)
    first_post: float | None = None
    last_ack: float = 0.0

    def ack(self, n: int) -> None:
        now = time.perf_counter()
        with self.lock:
            self.acked += n
            self.last_ack = now
            if self.killed_at is not None:
                self.acked_after_kill += n
                if self.first_ack_after_kill is None:
                    self.first_ack_after_kill = now - self.killed_at

    def error(self, text: str) -> None:
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(text)

    def cross(self, text: str) -> None:
        with self.lock:
            self.cross_reads.append(text)


class Student:
    def __init__(self, cfg: Config, url: str, index: int, token: str) -> None:
        self.cfg, self.url, self.token = cfg, url, token
        self.name = f"s{index:03d}"
        self.run_id = f"run-{self.name}"
        self.acked: list[tuple[Any, ...]] = []
        self.conn: http.client.HTTPConnection | None = None

    def _post(self, body: bytes) -> tuple[int, bytes]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(urllib.parse.urlsplit(self.url).netloc, timeout=60)
        try:
            return request(self.url, "POST", f"/api/runs/{self.run_id}/events", self.token, body, self.conn)
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise

    def _stored(self) -> int:
        """How many events the server holds of this run (0 before it exists); retried while workers restart."""
        status, body = request_again(self.url, "GET", f"/api/runs/{self.run_id}", self.token, tries=100)
        if status == 404:
            return 0
        if status == 200:
            return int(json.loads(body)["n_events"])
        raise RuntimeError(f"{self.name}: cannot read its run back ({status})")

    def send(self, batch: list[dict[str, Any]], tally: Tally) -> None:
        body = "\n".join(json.dumps(e) for e in batch).encode()
        for _ in range(50):
            try:
                status, answer = self._post(body)
            except (OSError, http.client.HTTPException):
                status, answer = -1, b"no answer"
            if status == 200:
                first = json.loads(answer)["first_seq"]
                if first != len(self.acked) + 1:
                    tally.error(f"{self.name}: first_seq {first}, expected {len(self.acked) + 1}")
                break
            tally.retries += 1
            if status not in (-1, 502, 503):
                raise RuntimeError(f"{self.name}: POST answered {status}: {answer[:200]!r}")
            # no answer: committed or not? this student is its run's only writer, so the count tells
            stored = self._stored()
            if stored == len(self.acked) + len(batch):
                break
            if stored != len(self.acked):
                tally.error(f"{self.name}: {stored} events stored, {len(self.acked)} acknowledged before a batch "
                            f"of {len(batch)}")
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{self.name}: a batch was refused 50 times")
        self.acked.extend(marker(e) for e in batch)
        tally.ack(len(batch))

    def run(self, tally: Tally) -> None:
        try:
            with tally.lock:
                if tally.first_post is None:
                    tally.first_post = time.perf_counter()
            for step in range(self.cfg.steps):
                self.send(step_batch(self.cfg, self.name, step), tally)
                if step == 0:
                    self.check_list(tally)
        except Exception as exc:  # reported in the result
            tally.error(f"{self.name}: {exc!r}")
        finally:
            if self.conn is not None:
                self.conn.close()

    def check_list(self, tally: Tally) -> None:
        status, body = request_again(self.url, "GET", "/api/runs", self.token)
        if status != 200:
            tally.error(f"{self.name}: GET /api/runs answered {status}")
            return
        foreign = [r["id"] for r in json.loads(body) if r.get("owner") != self.name]
        if foreign:
            tally.cross(f"{self.name} listed {foreign[:3]}")


# -- viewers ------------------------------------------------------------------------------------------------------
class Viewer(threading.Thread):
    """A run stream (`run_id`) or a lobby (`run_id` None), as a teacher (`name` None) or a student."""

    def __init__(self, url: str, token: str, name: str | None, run_id: str | None, tally: Tally,
                 stop: threading.Event, deadline: float) -> None:
        super().__init__(daemon=True)
        self.ws_url = url.replace("http://", "ws://")
        self.token, self.user, self.run_id = token, name, run_id
        self.tally, self.stop, self.deadline = tally, stop, deadline
        self.last_seq = 0
        self.done = False
        self.reconnects = 0
        self.gaps = 0
        self.runs_seen: set[str] = set()

    def run(self) -> None:
        from websockets.exceptions import ConnectionClosed, InvalidHandshake
        from websockets.sync.client import connect

        path = f"/api/runs/{self.run_id}/ws" if self.run_id else "/api/ws"
        while not self.done and time.monotonic() < self.deadline and not (self.run_id is None and self.stop.is_set()):
            query = urllib.parse.urlencode({"token": self.token, "after": self.last_seq})
            try:
                with connect(f"{self.ws_url}{path}?{query}", open_timeout=30, close_timeout=1,
                             max_size=1 << 24) as ws:
                    while not self.done:
                        try:
                            text = ws.recv(timeout=0.5)
                        except TimeoutError:
                            if self.run_id is None and self.stop.is_set():
                                return
                            continue
                        self.receive(json.loads(text))
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                if code == NO_SUCH_RUN and self.user is not None:
                    time.sleep(0.2)  # a student's own run that has not started yet (or a worker's restart)
                    continue
                self.reconnects += 1
                time.sleep(0.05)
            except (OSError, InvalidHandshake, TimeoutError):
                self.reconnects += 1
                time.sleep(0.1)
            except Exception as exc:  # reported in the result
                self.tally.error(f"viewer {self.user or 'teacher'} {self.run_id}: {exc!r}")
                return

    def receive(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if self.run_id is None:  # a lobby
            runs = msg.get("runs", []) if kind == "hello" else [msg["run"]] if kind == "runs" else []
            for r in runs:
                self.runs_seen.add(r["id"])
                if self.user is not None and r.get("owner") != self.user:
                    self.tally.cross(f"{self.user}'s lobby showed {r['id']} of {r.get('owner')}")
            return
        if kind == "hello":
            owner = msg["run"].get("owner")
            if self.user is not None and owner != self.user:
                self.tally.cross(f"{self.user}'s stream of {self.run_id} said owner {owner}")
            return
        if kind != "events":
            return
        if msg["run_id"] != self.run_id:
            self.tally.cross(f"stream of {self.run_id} carried {msg['run_id']}")
        for e in msg["events"]:
            if e["seq"] != self.last_seq + 1:
                self.gaps += 1
                self.tally.error(f"viewer of {self.run_id}: seq {e['seq']} after {self.last_seq}")
            self.last_seq = e["seq"]
            if e["kind"] == "run_end":
                self.done = True


# -- checks -------------------------------------------------------------------------------------------------------
def stored_markers(url: str, run_id: str) -> tuple[list[tuple[Any, ...]], list[int]]:
    markers, seqs, after = [], [], 0
    while True:
        status, body = request_again(url, "GET", f"/api/runs/{run_id}/events?after={after}&limit=10000", ADMIN)
        if status == 404:
            return markers, seqs
        page = json.loads(body)
        markers.extend(marker(e) for e in page["events"])
        seqs.extend(e["seq"] for e in page["events"])
        if not page["more"]:
            return markers, seqs
        after = page["next_after"]


def cross_attempts(url: str, attacker: Student, victim: Student, tally: Tally) -> None:
    """One try at the victim's run on every route with the attacker's token: missing (404, 4404) or refused (403)."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    base = f"/api/runs/{victim.run_id}"
    for method, path in (("GET", base), ("GET", f"{base}/events"), ("GET", f"{base}/steps"),
                         ("GET", f"{base}/graph"), ("DELETE", base)):
        status, _ = request_again(url, method, path, attacker.token)
        if status != 404:
            tally.cross(f"{attacker.name} {method} {path}: {status}")
    status, _ = request_again(url, "POST", f"{base}/events", attacker.token,
                              json.dumps(ev("step_begin", 999)).encode())
    if status != 403:
        tally.cross(f"{attacker.name} POST into {victim.run_id}: {status}")
    query = urllib.parse.urlencode({"token": attacker.token})
    try:
        with connect(f"{url.replace('http://', 'ws://')}{base}/ws?{query}", open_timeout=30) as ws:
            ws.recv(timeout=30)
            tally.cross(f"{attacker.name} read {victim.run_id}'s stream")
    except ConnectionClosed as exc:
        if exc.rcvd is None or exc.rcvd.code != NO_SUCH_RUN:
            tally.cross(f"{attacker.name} stream of {victim.run_id} closed with {exc.rcvd}")


@contextmanager
def database(db: str | None, workers: int) -> Iterator[str]:
    """An empty database for one round: `db` itself, a new database on a throwaway PostgreSQL, or SQLite."""
    if db is not None:
        yield db
        return
    pg = postgres()
    if pg is not None:
        yield pg.database()
        return
    if workers > 1:
        raise SystemExit("bench_class: --workers > 1 needs PostgreSQL (--db postgresql://..., or Debian's "
                         "postgresql package for a throwaway server)")
    with tempfile.TemporaryDirectory() as tmp:
        yield str(Path(tmp) / "class.db")


_DURABLE: list[Any] = []


def postgres() -> Any:
    """A throwaway PostgreSQL with its default durability (every commit flushed, as a class server runs), started
    once and stopped at exit; None without Debian's binaries."""
    if _DURABLE:
        return _DURABLE[0]
    try:
        from tests.store.pgserver import PgServer, _bin_dir
    except ImportError:
        return None
    bin_dir = _bin_dir()
    if bin_dir is None:
        return None
    import atexit

    server = PgServer(bin_dir, durable=True)
    atexit.register(server.stop)
    _DURABLE.append(server)
    return server


def run_load(cfg: Config, db: str) -> dict[str, Any]:
    """One round: users, server, students and viewers, checks. The result as a dict (see `report`)."""
    rng = random.Random(0)
    tokens = [f"student-token-{i}-{rng.getrandbits(64):016x}" for i in range(cfg.students)]
    store = open_store(db)
    try:
        for i, token in enumerate(tokens):
            store.add_user(f"s{i:03d}", hash_token(token))
        teacher_token = f"teacher-token-{rng.getrandbits(64):016x}"
        store.add_user("teacher", hash_token(teacher_token), teacher=True)
    finally:
        store.close()
    server = Server(db, cfg.workers)
    tally = Tally()
    try:
        students = [Student(cfg, server.url, i, t) for i, t in enumerate(tokens)]
        stop = threading.Event()
        deadline = time.monotonic() + cfg.timeout
        n_teachers = max(1, cfg.viewers // 4) if cfg.viewers else 0
        viewers: list[Viewer] = []
        for v in range(cfg.viewers):
            teacher = v < n_teachers
            lobby = v % 3 == 2 or (cfg.viewers < 6 and v % 2 == 1)
            s = students[rng.randrange(cfg.students)]
            viewers.append(Viewer(server.url, teacher_token if teacher else s.token, None if teacher else s.name,
                                  None if lobby else s.run_id, tally, stop, deadline))
        for v in viewers:
            v.start()
        total = cfg.students * planned_events(cfg)
        killed: list[int] = []

        survivors: list[int] = []
        before_replacement: list[int] = []

        def killer() -> None:
            while tally.acked < cfg.kill_at * total and time.monotonic() < deadline:
                time.sleep(0.01)
            pids = server.worker_pids()
            killed.append(server.kill_one())
            with tally.lock:
                tally.killed_at = time.perf_counter()
            survivors.extend(p for p in pids if p != killed[0])
            # what the survivors alone answered: acknowledged events until the parent's new worker is up
            while time.monotonic() < deadline:
                if set(server.worker_pids()) - set(pids):
                    break
                time.sleep(0.005)
            before_replacement.append(tally.acked_after_kill)

        kill_thread = threading.Thread(target=killer, daemon=True) if cfg.kill and cfg.workers > 1 else None
        if kill_thread:
            kill_thread.start()
        cpu0 = time.process_time()
        with ThreadPoolExecutor(cfg.concurrency) as pool:
            list(pool.map(lambda s: s.run(tally), students))
        wall = tally.last_ack - (tally.first_post or tally.last_ack)
        client_cpu = time.process_time() - cpu0  # the students' and viewers' own share of the 2 cores
        if kill_thread:
            kill_thread.join(max(1.0, deadline - time.monotonic()))
        for v in viewers:
            if v.run_id is not None:
                v.join(max(1.0, deadline - time.monotonic()))
        stop.set()
        for v in viewers:
            v.join(10)
        # every student tries another's run on every route (after all runs exist, so a POST cannot create one)
        sample = students if cfg.students <= 50 else rng.sample(students, 50)
        for s in sample:
            cross_attempts(server.url, s, students[(students.index(s) + 1) % cfg.students], tally)
        lost = dups = extra = gaps = 0
        for s in students:
            got, seqs = stored_markers(server.url, s.run_id)
            if seqs != list(range(1, len(seqs) + 1)):
                gaps += 1
            stored = set(got)
            lost += sum(1 for m in s.acked if m not in stored)
            dups += len(got) - len(stored)
            extra += len(stored - set(s.acked))
        incomplete = [v for v in viewers if v.run_id is not None and not v.done]
        return {
            "workers": cfg.workers, "students": cfg.students, "viewers": cfg.viewers, "kill": bool(kill_thread),
            "planned": total, "acked": tally.acked, "wall_s": round(wall, 3), "client_cpu_s": round(client_cpu, 2),
            "events_per_s": round(tally.acked / wall) if wall > 0 else None,
            "lost": lost, "duplicates": dups, "unacked_stored": extra, "runs_with_seq_gaps": gaps,
            "cross_student_reads": len(tally.cross_reads), "cross_examples": tally.cross_reads[:5],
            "viewer_gaps": sum(v.gaps for v in viewers), "viewers_incomplete": len(incomplete),
            "viewer_reconnects": sum(v.reconnects for v in viewers), "retries": tally.retries,
            "killed_pid": killed[0] if killed else None, "acked_after_kill": tally.acked_after_kill,
            "first_ack_after_kill_s": (round(tally.first_ack_after_kill, 3)
                                       if tally.first_ack_after_kill is not None else None),
            "acked_before_replacement": before_replacement[0] if before_replacement else None,
            "survivors_alive": bool(survivors) and all(p in server.worker_pids() for p in survivors),
            "workers_after": len(server.worker_pids()), "errors": tally.errors[:10],
        }
    finally:
        server.stop()


def report(results: list[dict[str, Any]]) -> str:
    head = "| workers | kill | students | viewers | acked events | events/s | lost | dups | cross reads | viewer gaps |"
    lines = [head, "|" + "---|" * 10]
    for r in results:
        lines.append(f"| {r['workers']} | {'yes' if r['kill'] else 'no'} | {r['students']} | {r['viewers']} | "
                     f"{r['acked']:,} of {r['planned']:,} | {r['events_per_s'] or 0:,} | {r['lost']} | "
                     f"{r['duplicates']} | {r['cross_student_reads']} | {r['viewer_gaps']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=200)
    p.add_argument("--viewers", type=int, default=20)
    p.add_argument("--steps", type=int, default=12, help="steps per run (one batch each)")
    p.add_argument("--nodes", type=int, default=40, help="graph events of a sampled step")
    p.add_argument("--sample-every", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=32, help="students streaming at once")
    p.add_argument("--db", default=None, help="an empty database to use (default: a throwaway PostgreSQL)")
    p.add_argument("--runs", default="1,2,2k",
                   help="rounds, comma-separated: N workers, Nk with a kill -9 of one worker (default 1,2,2k)")
    p.add_argument("--kill-at", type=float, default=0.4, help="fraction of events acknowledged before the kill")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    if args.db and "," in args.runs:
        p.error("--db names one empty database: give one round (--runs 2k), or let the bench make a database "
                "per round")
    results = []
    for spec in args.runs.split(","):
        kill = spec.endswith("k")
        cfg = Config(students=args.students, viewers=args.viewers, steps=args.steps, nodes=args.nodes,
                     sample_every=args.sample_every, concurrency=args.concurrency, workers=int(spec.rstrip("k")),
                     kill=kill, kill_at=args.kill_at)
        with database(args.db, cfg.workers) as db:
            result = run_load(cfg, db)
        results.append(result)
        print(json.dumps(result), flush=True)
    print(report(results))
    with open("/proc/loadavg") as f:
        print(f"load average: {f.read().split()[:3]}  cpu: {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    bad = [r for r in results if r["lost"] or r["duplicates"] or r["cross_student_reads"] or r["viewer_gaps"]
           or r["errors"] or (r["kill"] and not r["acked_after_kill"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
