"""Streaming in steady state, watched (issue 21, point 2): mlp_train streams every step to `rtxviz serve` without
a pause while a viewer, as a page does, holds the run's WebSocket. Per server configuration: the training's time
per step, the sender's backlog (the most events queued in the training process at once: a server that does not
keep up shows here, and past `watch`'s max_queue it drops), and the page's lag, for every event from its ``t``
(stamped as the hook made it) to the viewer holding it.

    python benchmarks/bench_live_lag.py [--rounds 4] [--seconds 6] [--threads N|default] [--server "ARGS" ...]

``--server`` (repeatable) names `rtxviz serve` options to compare (default: its defaults, and ``--nice 0``);
each round starts one server per configuration, in alternating order. The viewer is a subprocess (websockets'
sync client, decoding every message as a page does); it gives up after 3 s without a message, as a user would
conclude the page froze. The watched run posts every 100 ms (a page is open).

Why steady state: `bench_events.py mlp` times 1.5 s windows and lets the stream drain between them untimed, so
a server that falls behind during a window catches up outside it. Running Linux's SCHED_IDLE policy for the
server looked 6 points better there (twelfth session) and here starved: the viewer got nothing for seconds, the
backlog grew without bound and, over 20 s, `watch` dropped 33,009 events (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

_ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_ARGS.add_argument("--rounds", type=int, default=4)
_ARGS.add_argument("--seconds", type=float, default=6.0, help="training per server and round")
_ARGS.add_argument("--threads", default="default", help="OpenBLAS threads: N, or default (what a user gets)")
_ARGS.add_argument("--server", action="append", default=None, metavar="ARGS",
                   help="rtxviz serve options of one configuration (repeatable; default: '' and '--nice 0')")
OPTS = _ARGS.parse_args() if __name__ == "__main__" else _ARGS.parse_args([])
_BLAS = os.environ.get("OPENBLAS_NUM_THREADS", "unset (OpenBLAS default)")
if OPTS.threads != "default":
    os.environ["OPENBLAS_NUM_THREADS"] = _BLAS = OPTS.threads

import tempfile  # noqa: E402

from serving import server_process  # noqa: E402

import rtxviz.events as events  # noqa: E402

VIEWER = r"""
import json, sys, time
from websockets.sync.client import connect
lags = []
with connect(sys.argv[1], max_size=None) as ws:
    print("ready", flush=True)
    while True:
        try:
            m = ws.recv(timeout=float(sys.argv[2]))
        except TimeoutError:
            break
        now = time.time()
        m = json.loads(m)
        if m.get("type") == "events":  # live batches and the replays a viewer that fell behind is sent
            lags.extend(round(now - e["t"], 4) for e in m["events"] if isinstance(e.get("t"), float))
print(json.dumps(lags), flush=True)
"""


def one(args: str, seconds: float, step) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, \
            server_process(str(Path(tmp) / "lag.db"), args=args.split()) as url:
        run = events.watch(url, run_name="lag", max_queue=1_000_000, close_timeout=60)
        run.start()
        viewer = subprocess.Popen([sys.executable, "-c", VIEWER,
                                   url.replace("http://", "ws://") + f"/api/runs/{run.id}/ws", "3"],
                                  stdout=subprocess.PIPE, text=True)
        assert viewer.stdout is not None
        assert viewer.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the server's hello, and its first answer saying a page watches
        times = []
        i = backlog = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            with run.step(i):
                step()
            times.append(time.perf_counter() - t0)
            i += 1
            if i % 20 == 0:
                backlog = max(backlog, run.stats()["queued"])
        run.close()
        lags = json.loads(viewer.stdout.readline())
        viewer.wait(30)
        stats = run.stats()
    return {"step_ms": 1e3 * statistics.median(times), "mean_step_ms": 1e3 * seconds / max(i, 1), "lags": lags,
            "backlog": backlog, "sent": stats["sent"], "dropped": stats["dropped"]}


def main() -> int:
    from bench_events import mlp_train_step

    step = mlp_train_step()
    for _ in range(20):
        step()
    configs = OPTS.server if OPTS.server is not None else ["", "--nice 0"]
    res: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for r in range(OPTS.rounds):
        for config in configs if r % 2 == 0 else configs[::-1]:
            res[config].append(one(config, OPTS.seconds, step))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "?") if os.path.exists("/proc/cpuinfo") else "?"
    print(f"# {cpu}, {os.cpu_count()} cores, OPENBLAS_NUM_THREADS={_BLAS}; {OPTS.rounds} rounds of "
          f"{OPTS.seconds:g} s per server, a viewer on the run (posts every 100 ms); time per step: median of the "
          "rounds' means; lags: over every event the viewer got, in every round")
    print(f"{'rtxviz serve':16s} {'time/step':>10s} {'median step':>12s} {'backlog':>8s} {'lag p50':>9s} "
          f"{'lag p95':>9s} {'lag max':>9s} {'viewer got':>11s} {'of sent':>8s} {'dropped':>8s}")
    for config, rows in res.items():
        lags = sorted(x for row in rows for x in row["lags"])
        def q(f: float, lags: list[float] = lags) -> float:
            return lags[int(f * (len(lags) - 1))] if lags else float("nan")
        print(f"{config or '(defaults)':16s} {statistics.median(r['mean_step_ms'] for r in rows):7.2f} ms "
              f"{statistics.median(r['step_ms'] for r in rows):9.2f} ms {max(r['backlog'] for r in rows):8d} "
              f"{q(0.5):7.3f} s {q(0.95):7.3f} s {q(1.0):7.3f} s {len(lags):11d} "
              f"{sum(int(r['sent']) for r in rows):8d} {sum(int(r['dropped']) for r in rows):8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
