"""What the server's scheduling policy costs a page that watches (issue 21, point 2): mlp_train streams every step
to `rtxviz serve` while a viewer, as a page does, holds the run's WebSocket; per policy, the training's time per
step and the page's lag (from an event's ``t``, stamped as the hook made it, to the viewer holding it).

    python benchmarks/bench_live_lag.py [--rounds 4] [--seconds 6] [--threads N|default]

Each round starts one server per policy (``--policy normal`` and ``idle``, both at the default ``--nice 10``),
in alternating order; the viewer is a subprocess (websockets' sync client, decoding every message as a page
does). The watched run posts every 100 ms (a page is open). Wall-clock figures: report the
machine and its load beside them.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

_ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_ARGS.add_argument("--rounds", type=int, default=4)
_ARGS.add_argument("--seconds", type=float, default=6.0, help="training per server and round")
_ARGS.add_argument("--threads", default="default", help="OpenBLAS threads: N, or default (what a user gets)")
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
    end = None
    while True:
        try:
            m = ws.recv(timeout=float(sys.argv[2]))
        except TimeoutError:
            break
        now = time.time()
        m = json.loads(m)
        if m.get("type") == "events" and not m.get("replay"):
            ts = [e["t"] for e in m["events"] if isinstance(e.get("t"), float)]
            if ts:
                lags.append(now - max(ts))
print(json.dumps(lags), flush=True)
"""


def one(priority: str, seconds: float, step) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, \
            server_process(str(Path(tmp) / "lag.db"), args=["--policy", priority]) as url:
        run = events.watch(url, run_name=f"lag-{priority}", max_queue=1_000_000, close_timeout=60)
        run.start()
        viewer = subprocess.Popen([sys.executable, "-c", VIEWER,
                                   url.replace("http://", "ws://") + f"/api/runs/{run.id}/ws", "3"],
                                  stdout=subprocess.PIPE, text=True)
        assert viewer.stdout is not None
        assert viewer.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the server's hello, and its first answer saying a page watches
        times = []
        i = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            with run.step(i):
                step()
            times.append(time.perf_counter() - t0)
            i += 1
        run.close()
        lags = json.loads(viewer.stdout.readline())
        viewer.wait(30)
        stats = run.stats()
    return {"step_ms": 1e3 * statistics.median(times), "mean_step_ms": 1e3 * seconds / max(i, 1), "lags": lags,
            "dropped": stats["dropped"]}


def main() -> int:
    from bench_events import mlp_train_step

    step = mlp_train_step()
    for _ in range(20):
        step()
    res: dict[str, list[dict[str, float]]] = {"normal": [], "idle": []}
    order = ["normal", "idle"]
    for r in range(OPTS.rounds):
        for priority in order if r % 2 == 0 else order[::-1]:
            res[priority].append(one(priority, OPTS.seconds, step))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "?") if os.path.exists("/proc/cpuinfo") else "?"
    print(f"# {cpu}, {os.cpu_count()} cores, OPENBLAS_NUM_THREADS={_BLAS}; {OPTS.rounds} rounds of "
          f"{OPTS.seconds:g} s per policy, a viewer on the run (posts every 100 ms); time per step: median of the "
          "rounds' means; lags: over every message of every round")
    print(f"{'server policy':14s} {'time/step':>10s} {'median step':>12s} {'lag p50':>9s} {'lag p95':>9s} "
          f"{'lag max':>9s} {'messages':>9s} {'dropped':>8s}")
    for priority, rows in res.items():
        lags = sorted(x for row in rows for x in row["lags"])
        def q(f: float, lags: list[float] = lags) -> float:
            return lags[int(f * (len(lags) - 1))] if lags else float("nan")
        print(f"{priority:14s} {statistics.median(r['mean_step_ms'] for r in rows):7.2f} ms "
              f"{statistics.median(r['step_ms'] for r in rows):9.2f} ms {q(0.5):7.3f} s {q(0.95):7.3f} s "
              f"{q(1.0):7.3f} s {len(lags):9d} {sum(int(r['dropped']) for r in rows):8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
