"""Where a watched mlp_train step's time goes, by CPU time (issue 21 point 2). Not a test: it prints numbers.

    python benchmarks/bench_stream_split.py recording   # null-sink recording: all of it vs its summaries stubbed
    python benchmarks/bench_stream_split.py requests    # a live server's CPU per request, by events per request
    python benchmarks/bench_stream_split.py sinks --threads default
                                                        # time per step by where the events go (below)

`recording` alternates, in one process on one BLAS thread, the unwatched step, the step recorded into a null sink,
and the same with `tensor_stats` / `count_nonfinite` replaced by constants: the difference of the last two is what
the summary passes cost, the rest is the hook's Python (event dicts, ids, saved entries, the optimizer report).
`requests` POSTs batches of step markers to `rtxviz serve` and reads its CPU from /proc: the fixed cost of a
request against the cost of its events. CPU time, which a loaded shared machine distorts least.
`sinks` times the step (wall clock, `bench_events.paired`: each variant's window beside an unwatched one) as the
events go further: a null sink (recording only), encoded and queued with a transport that throws the batches
away (the sender thread runs), posted to a stand-in HTTP server that reads each body and answers at once (the
training process's whole side of streaming), and posted to `rtxviz serve`. The last two differ only by what the
server does with a batch. `--threads N|default` sets the BLAS threads (default here: one; `default` is what a
user gets); the module reads it before numpy loads.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "--threads" in sys.argv:  # before numpy loads (bench_events, imported below, sets one thread
    # when nothing is set: an empty value is "set", and OpenBLAS reads it as its default)
    _at = sys.argv.index("--threads")
    _threads = sys.argv[_at + 1] if _at + 1 < len(sys.argv) else "1"
    del sys.argv[_at:_at + 2]
    if _threads == "default":  # what a user gets: OpenBLAS's own choice
        os.environ["OPENBLAS_NUM_THREADS"] = ""
    else:
        os.environ["OPENBLAS_NUM_THREADS"] = _threads
else:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_events import flush_run, mlp_train_step, overhead_summary, paired
from serving import free_port, process_cpu_s, server_process

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


#: The stand-in server of `sinks`: reads each request's body whole and answers 200 with no viewers (so the sender
#: keeps the cadence it has against rtxviz serve while no page watches), at rtxviz serve's default --nice.
_STAND_IN = r"""
import os, socket, sys, threading
os.nice(10)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(8)
answer = b'{"run_id":"r","first_seq":1,"count":1,"viewers":0}'
reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer)
def serve(conn):
    buf = bytearray()
    while True:
        while b"\r\n\r\n" not in buf:
            data = conn.recv(1 << 16)
            if not data:
                return
            buf += data
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        size = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length"))
        buf = bytearray(rest)
        while len(buf) < size:
            data = conn.recv(1 << 20)
            if not data:
                return
            buf += data
        del buf[:size]
        conn.sendall(reply)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


class _Discard:
    """A transport that throws every batch away (and says no page watches, as rtxviz serve would)."""

    def send(self, run: events.Run, lines: list[bytes], dropped: int) -> int | None:
        return 0

    def close(self) -> None:
        pass


def run_sinks(pairs: int = int(os.environ.get("RTXVIZ_BENCH_PAIRS", 6)), seconds: float = 1.5,
              warmup: float = 1.0) -> None:
    step = mlp_train_step()
    counter = [0]

    def watched(run: events.Run) -> tuple:
        """(setup, step, teardown) streaming every step to `run`, which alone is the current run meanwhile (the
        optimizer reports to the innermost run)."""
        def on() -> None:
            events.emitter._CURRENT.remove(run)
            events.emitter._CURRENT.append(run)
            events.emitter._hooks.add_hook(run.hook)

        def fn() -> None:
            with run.step(counter[0]):
                step()
            counter[0] += 1

        def off() -> None:
            events.emitter._hooks.remove_hook(run.hook)
            flush_run(run)
            time.sleep(0.05)

        return on, fn, off

    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        url = stack.enter_context(server_process(str(Path(tmp) / "sinks.db")))
        port = free_port()
        stand_in = subprocess.Popen([sys.executable, "-c", _STAND_IN, str(port)])
        stack.callback(stand_in.wait)
        stack.callback(stand_in.kill)
        time.sleep(0.5)
        runs = {"encoded and queued, batches thrown away": events.Run(_Discard(), run_name="discard",
                                                                      max_queue=1_000_000),
                "posted to a stand-in server": events.watch(f"http://127.0.0.1:{port}", run_name="stand-in",
                                                                max_queue=1_000_000),
                "posted to rtxviz serve": events.watch(url, run_name="serve", max_queue=1_000_000)}
        for run in runs.values():
            run.start()
            run.close_timeout = 30
            events.emitter._hooks.remove_hook(run.hook)
            stack.callback(run.close)
        null = events.Run(transport=None, run_name="null")  # type: ignore[arg-type]
        null.hook.sink = lambda ev: None

        def null_on() -> None:
            events.emitter._hooks.add_hook(null.hook)
            events.emitter._CURRENT.append(null)

        def null_off() -> None:
            events.emitter._hooks.remove_hook(null.hook)
            events.emitter._CURRENT.remove(null)

        variants = {"unwatched": (lambda: None, step, lambda: None), "recorded, null sink": (null_on, step, null_off),
                    **{k: watched(r) for k, r in runs.items()}}
        res = paired(variants, "unwatched", pairs, seconds, warmup)
    print(f"\n## mlp_train by where the events go, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} "
          f"({pairs} pairs of {seconds:g} s windows; overhead: median over the pairs of the windows' totals)")
    for k, r in res.items():
        ms, total, _, q1, q3 = overhead_summary(r)
        if k == "unwatched":
            print(f"  {k:42s} {ms:6.2f} ms")
            continue
        print(f"  {k:42s} {ms:6.2f} ms  {100 * (total - 1):+6.1f}%   pairs' IQR {100 * (q1 - 1):+.1f} .. "
              f"{100 * (q3 - 1):+.1f}%")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["recording", "requests"]:
        {"recording": run_recording, "requests": run_requests, "sinks": run_sinks}[name]()
