"""The stores and the multi-worker server (issue 20): append throughput of SQLite against PostgreSQL, and
``rtxviz serve --workers 1`` against ``--workers 2`` on PostgreSQL (and one SQLite server beside them).

    python benchmarks/bench_store.py                   # both parts, on a throwaway PostgreSQL (PostgreSQL's
                                                       # defaults: every commit flushed to disk)
    python benchmarks/bench_store.py store             # only the store part
    python benchmarks/bench_store.py workers --db postgresql://user@host/db   # an existing (empty) database

The throwaway server is tests/store/pgserver.py's (Debian's postgresql package). Wall-clock figures: run it on
a quiet machine, and report the load (uptime) beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serving import server_process  # noqa: E402

from rtxviz.store import RunStore, SQLiteStore, open_store  # noqa: E402


def node_line(i: int) -> str:
    """A node event as the engine sends one (about 330 bytes)."""
    return json.dumps({"v": 1, "kind": "node", "t": 0.0, "step": 7, "id": i, "op": "matmul",
                       "inputs": [{"node": i - 1}, {"leaf": 3}], "shape": [128, 512], "dtype": "float32",
                       "device": "cpu", "module": "model.fc1", "rule": "dA = dC @ B^T, dB = A^T @ dC",
                       "saved_bytes": 262144}, separators=(",", ":"))


# -- 1. the store alone -------------------------------------------------------------------------------------------
def append_rate(store: RunStore, threads: int, batches: int, batch_size: int) -> float:
    """Events/s appended by `threads` threads, each its own run, `batches` batches of `batch_size` node events."""
    rows = [("node", 7, node_line(i)) for i in range(batch_size)]
    start = threading.Barrier(threads + 1)

    def writer(t: int) -> None:
        start.wait()
        for _ in range(batches):
            store.append(f"bench-{t}", None, rows)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    return threads * batches * batch_size / (time.perf_counter() - t0)


def run_store(url: str, rounds: int = 3, batches: int = 50, batch_size: int = 200) -> None:
    print(f"\n## store.append: batches of {batch_size} node events, {batches} batches per thread, each thread its "
          f"own run; median of {rounds} rounds, each on a fresh database")
    for threads in (1, 4):
        results: dict[str, list[float]] = {"sqlite": [], "postgres": []}
        for r in range(rounds):
            with tempfile.TemporaryDirectory() as tmp:
                store: RunStore = SQLiteStore(str(Path(tmp) / "bench.db"))
                results["sqlite"].append(append_rate(store, threads, batches, batch_size))
                store.close()
            store = open_store(fresh_database(url, f"store_{threads}_{r}"))
            results["postgres"].append(append_rate(store, threads, batches, batch_size))
            store.close()
        for name, rates in results.items():
            print(f"  {name:8s} {threads} thread(s): {statistics.median(rates):10,.0f} events/s  (rounds: "
                  f"{', '.join(f'{x:,.0f}' for x in rates)})")


# -- 2. the server: 1 worker against 2 ----------------------------------------------------------------------------
def served(db: str, workers: int) -> contextlib.AbstractContextManager[str]:
    """`rtxviz serve --workers N` on `db`, at full priority (the thing measured)."""
    return server_process(db, nice=0, args=["--workers", str(workers)])


def producer(url: str, run_id: str, batches: int, batch_size: int, start: float, out: mp.Queue) -> None:
    host, port = url.removeprefix("http://").split(":")
    body = "\n".join(node_line(i) for i in range(batch_size)).encode()
    while time.time() < start:
        time.sleep(0.001)
    sent = 0
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    for _ in range(batches):
        conn.request("POST", f"/api/runs/{run_id}/events", body=body, headers={"Content-Type": "application/x-ndjson"})
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            sent += batch_size
    out.put((sent, time.time()))


def viewer(url: str, run_id: str, expected: int, got: list[int]) -> Callable[[], None]:
    """A WebSocket reader of one run in a thread; `got` gets the seqs it saw. Returns its join."""
    from websockets.sync.client import connect

    ready = threading.Event()

    def read() -> None:
        with connect(url.replace("http://", "ws://") + f"/api/runs/{run_id}/ws", max_size=None,
                     compression=None) as ws:
            ready.set()
            while len(got) < expected:
                msg = json.loads(ws.recv(timeout=120))
                if msg["type"] == "events":
                    got.extend(e["seq"] for e in msg["events"])

    t = threading.Thread(target=read, daemon=True)
    t.start()
    ready.wait(30)
    return lambda: t.join(150)


def server_round(db: str, workers: int, producers: int, batches: int, batch_size: int) -> dict[str, float]:
    with served(db, workers) as url:
        per_run = batches * batch_size
        seen: list[list[int]] = [[] for _ in range(2)]
        joins = [viewer(url, f"student-{i}", per_run, seen[i]) for i in range(2)]  # two runs watched
        ctx = mp.get_context("fork")
        out: mp.Queue = ctx.Queue()
        start = time.time() + 0.5
        procs = [ctx.Process(target=producer, args=(url, f"student-{p}", batches, batch_size, start, out))
                 for p in range(producers)]
        for p in procs:
            p.start()
        results = [out.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        for join in joins:
            join()
    sent = sum(r[0] for r in results)
    elapsed = max(r[1] for r in results) - start
    complete = all(s == list(range(1, per_run + 1)) for s in seen)
    return {"eps": sent / elapsed, "sent": sent, "complete": float(complete)}


def run_workers(url: str, rounds: int = 3, producers: int = 8, batches: int = 20, batch_size: int = 500) -> None:
    print(f"\n## rtxviz serve: {producers} producer processes (a student each, their own run) x {batches} batches x "
          f"{batch_size} node events, 2 WebSocket viewers (two of the runs); median of {rounds} rounds, each on a "
          "fresh database")
    variants: list[tuple[str, int]] = [("sqlite", 1), ("postgres", 1), ("postgres", 2)]
    results: dict[tuple[str, int], list[dict[str, float]]] = {v: [] for v in variants}
    for r in range(rounds):
        for kind, workers in variants:
            with tempfile.TemporaryDirectory() as tmp:
                db = str(Path(tmp) / "s.db") if kind == "sqlite" else fresh_database(url, f"serve_{workers}_{r}")
                results[(kind, workers)].append(server_round(db, workers, producers, batches, batch_size))
    for (kind, workers), rs in results.items():
        rates = [x["eps"] for x in rs]
        whole = all(x["complete"] for x in rs)
        print(f"  {kind:8s} --workers {workers}: {statistics.median(rates):10,.0f} events/s  (rounds: "
              f"{', '.join(f'{x:,.0f}' for x in rates)}); viewers saw every event in order: {whole}")


# -- PostgreSQL ---------------------------------------------------------------------------------------------------
def fresh_database(url: str, name: str) -> str:
    """A new database beside `url`'s (dropped first if a previous run left it)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS bench_{name}")
        con.execute(f"CREATE DATABASE bench_{name}")
    return url.rsplit("/", 1)[0] + f"/bench_{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", metavar="store|workers", help="which parts (default: both)")
    parser.add_argument("--db", help="a PostgreSQL URL whose server may get new databases (default: start one)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    parts = args.parts or ["store", "workers"]
    if set(parts) - {"store", "workers"}:
        parser.error(f"parts are store and workers, got {parts}")
    url = args.db
    server = None
    if url is None:
        from tests.store.pgserver import PgServer, _bin_dir

        bin_dir = _bin_dir()
        if bin_dir is None:
            sys.exit("bench_store: no PostgreSQL here (scripts/system-deps.sh postgresql), or pass --db URL")
        server = PgServer(bin_dir, durable=True)
        url = server.url()
    print(f"uptime: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (load 1, 5, 15 min); "
          f"{os.cpu_count()} CPUs")
    try:
        if "store" in parts:
            run_store(url, args.rounds)
        if "workers" in parts:
            run_workers(url, args.rounds)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
