"""Where a watched mlp_train step's time goes, by CPU time (issue 21 point 2). Not a test: it prints numbers.

    python benchmarks/bench_stream_split.py recording   # null-sink recording: all of it vs its summaries stubbed
    python benchmarks/bench_stream_split.py requests    # a live server's CPU per request, by events per request

`recording` alternates, in one process on one BLAS thread, the unwatched step, the step recorded into a null sink,
and the same with `tensor_stats` / `count_nonfinite` replaced by constants: the difference of the last two is what
the summary passes cost, the rest is the hook's Python (event dicts, ids, saved entries, the optimizer report).
`requests` POSTs batches of step markers to `rtxviz serve` and reads its CPU from /proc: the fixed cost of a
request against the cost of its events. CPU time, which a loaded shared machine distorts least.
"""

from __future__ import annotations

import http.client
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_events import mlp_train_step
from serving import process_cpu_s, server_process

import rtxviz.events as events
from rtxviz.events import hook as _hook
from rtxviz.events.emitter import encode_event

_STUB_STATS = {"shape": [1], "norm": 1.0, "min": 0.0, "max": 1.0, "mean": 0.5, "nan": 0, "inf": 0}


def run_recording(rounds: int = 12, steps: int = 30) -> None:
    step = mlp_train_step()
    run = events.Run(transport=None, run_name="null")  # type: ignore[arg-type]
    run.hook.sink = lambda ev: None
    real = (_hook.tensor_stats, _hook.count_nonfinite)

    def stub(on: bool) -> None:
        if on:
            _hook.tensor_stats = lambda a, values_max_numel=0: _STUB_STATS  # type: ignore[assignment]
            _hook.count_nonfinite = lambda a: (0, 0)  # type: ignore[assignment]
        else:
            _hook.tensor_stats, _hook.count_nonfinite = real

    def cpu_ms() -> float:
        t0 = time.thread_time()
        for _ in range(steps):
            step()
        return 1e3 * (time.thread_time() - t0) / steps

    res: dict[str, list[float]] = {"unwatched": [], "null sink": [], "null sink, summaries stubbed": []}
    for _ in range(5):
        step()
    for _ in range(rounds):
        res["unwatched"].append(cpu_ms())
        events.emitter._hooks.add_hook(run.hook)
        events.emitter._CURRENT.append(run)
        try:
            res["null sink"].append(cpu_ms())
            stub(True)
            res["null sink, summaries stubbed"].append(cpu_ms())
        finally:
            stub(False)
            events.emitter._hooks.remove_hook(run.hook)
            events.emitter._CURRENT.remove(run)
    base = statistics.median(res["unwatched"])
    print(f"\n## mlp_train, training-thread CPU per step, median of {rounds} rounds x {steps} steps "
          f"(OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')})")
    for k, v in res.items():
        m = statistics.median(v)
        print(f"  {k:30s} {m:7.3f} ms   +{1e3 * (m - base):5.0f} us ({100 * (m / base - 1):+5.1f}%)")


def run_requests(requests: int = 300) -> None:
    cpu: dict = {}
    with tempfile.TemporaryDirectory() as tmp, server_process(str(Path(tmp) / "r.db"), cpu=cpu) as url:
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)

        def post(lines: list[bytes]) -> None:
            conn.request("POST", "/api/runs/split/events?name=split&dropped=0", body=b"\n".join(lines),
                         headers={"Content-Type": "application/x-ndjson"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200, resp.status

        post([encode_event({"v": 1, "kind": "run_start", "t": time.time(), "step": None, "name": "split"})])
        index = 0
        print(f"\n## rtxviz serve (default --nice): CPU per request, {requests} POSTs of step markers each")
        for steps in (1, 10, 50):
            c0 = process_cpu_s(cpu["pid"]) or 0.0
            t0 = time.perf_counter()
            for _ in range(requests):
                lines = []
                for _ in range(steps):
                    lines.append(encode_event({"v": 1, "kind": "step_begin", "t": time.time(), "step": index,
                                               "sampled": False}))
                    lines.append(encode_event({"v": 1, "kind": "step_end", "t": time.time(), "step": index}))
                    index += 1
                post(lines)
            c1 = process_cpu_s(cpu["pid"]) or 0.0
            print(f"  {2 * steps:4d} events a request: server {1e3 * (c1 - c0) / requests:.2f} ms CPU per request, "
                  f"round trip {1e3 * (time.perf_counter() - t0) / requests:.2f} ms")
        conn.close()


if __name__ == "__main__":
    for name in sys.argv[1:] or ["recording", "requests"]:
        {"recording": run_recording, "requests": run_requests}[name]()
