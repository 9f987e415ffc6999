"""Benchmarks for the event stream and the server (issue 6). Not tests: they print numbers.

    python benchmarks/bench_events.py                # everything (about a minute on 2 cores)
    python benchmarks/bench_events.py engine         # deep_chain: no hook vs hooks compiled out vs hooks
    python benchmarks/bench_events.py mlp            # mlp_train: unattached vs streaming to a live server
    python benchmarks/bench_events.py server         # ingest events/s, 4 producers + 3 WebSocket consumers
    RTXVIZ_BENCH_BEFORE=/tmp/old python benchmarks/bench_events.py server
                                                     # the same, alternating with an older checkout's server
    python benchmarks/bench_events.py keepalive      # round trip of sequential POSTs on one keep-alive connection
    python benchmarks/bench_events.py ingest_cpu     # CPU us/event of the ingest path, in-process
    python benchmarks/bench_events.py ingest_burst   # CPU ms of _ingest on bench_frontend's 13,000-event burst

Machines here are shared and noisy: each comparison alternates its variants in one process and reports medians.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import multiprocessing as mp
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

# One BLAS thread unless told otherwise: on 2 shared cores, 2 OpenBLAS threads competing with the server and the
# sender thread turn a 5 ms step into 30-80 ms of spinning, which measures the machine, not the stream.
# `--threads N` sets N; `--threads default` leaves OpenBLAS at its own default (what a user gets).


def _threads_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """(the value of --threads N / --threads=N or None, argv without the option)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1], argv[:i] + argv[i + 2:]
        if a.startswith("--threads="):
            return a.split("=", 1)[1], argv[:i] + argv[i + 1:]
    return None, argv


_THREADS, _ARGS = _threads_option(sys.argv[1:]) if __name__ == "__main__" else (None, [])
if _THREADS is None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
elif _THREADS != "default":
    os.environ["OPENBLAS_NUM_THREADS"] = _THREADS

import numpy as np  # noqa: E402  (after the thread count is set)

# RTXVIZ_BENCH_ROOT: measure another checkout (e.g. an exported older commit) with this same script
ROOT = Path(os.environ.get("RTXVIZ_BENCH_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))

from serving import process_cpu_s, root_env, server_process  # noqa: E402

import rtxviz.events as events  # noqa: E402
from rtxviz import (  # noqa: E402
    Tensor,
    Variable,
    nn,
)
from rtxviz.engine import backward as _backward  # noqa: E402
from rtxviz.engine import graph as _graph  # noqa: E402
from rtxviz.engine.hooks import EngineHook  # noqa: E402
from rtxviz.optim import SGD  # noqa: E402


def median_ms(fn, repeat: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def alternate(variants: dict, rounds: int, repeat: int, per_round: dict | None = None) -> dict[str, float]:
    """Median of per-round medians, the variants interleaved round by round in a shuffled order (a fixed order
    lets drift inside a round pass for a difference). `per_round`, when given, receives every round's medians."""
    results: dict[str, list[float]] = {k: [] for k in variants}
    rng = random.Random(0)
    for _ in range(rounds):
        order = list(variants.items())
        rng.shuffle(order)
        for name, (setup, fn, teardown) in order:
            setup()
            try:
                results[name].append(median_ms(fn, repeat, warmup=1))
            finally:
                teardown()
    if os.environ.get("BENCH_ROUNDS"):  # show every round's median: is a difference steady, or one bad round?
        for k, v in results.items():
            print(f"  {k:26s} " + " ".join(f"{x:.2f}" for x in v))
    if per_round is not None:
        per_round.update(results)
    return {k: statistics.median(v) for k, v in results.items()}


# -- 1. engine overhead: deep_chain ---------------------------------------------------------------------------
def paired(variants: dict, baseline: str, rounds: int, seconds: float,
           warmup: float) -> dict[str, dict[str, list[float]]]:
    """Every variant's block right beside a block of `baseline`, the pair's order random, the variants shuffled
    round by round: drift then moves both blocks of a pair alike. A block runs steps for `warmup` seconds untimed
    (a stream reaches its steady state: posts flowing at the sender's cadence, the server ingesting them), then
    for `seconds` timed: the window then holds the server's ingest of about that many seconds of events, the
    ones made before it standing in for the ones made inside it and stored after it. Per pair: the variant's time
    per step over its neighbour's, by the windows' totals (the loop as a user times it: a step that a post or the
    server's ingest slowed counts) and by their median steps. `variants`: {name: (setup, step, teardown)}.
    Returns {variant: {"total": ratios, "median": ratios, "ms": median steps}}."""
    rng = random.Random(1)
    out: dict[str, dict[str, list[float]]] = {k: {"total": [], "median": [], "ms": []} for k in variants}

    def block(name: str) -> tuple[float, float]:
        setup, fn, teardown = variants[name]
        setup()
        try:
            start = time.perf_counter()
            while time.perf_counter() - start < warmup:
                fn()
            times = []
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            total = time.perf_counter() - start
        finally:
            teardown()
        out[name]["ms"].append(1e3 * statistics.median(times))
        return total / len(times), statistics.median(times)

    others = [k for k in variants if k != baseline]
    for _ in range(rounds):
        rng.shuffle(others)
        for name in others:
            if rng.random() < 0.5:
                base, mine = block(baseline), block(name)
            else:
                mine, base = block(name), block(baseline)
            out[name]["total"].append(mine[0] / base[0])
            out[name]["median"].append(mine[1] / base[1])
    return out



def overhead_summary(r: dict[str, list[float]]) -> tuple[float, float, float, float, float]:
    """One `paired` variant's result as (median step ms, median total ratio, median median-step ratio, the total
    ratios' first and third quartiles): what each benchmark prints per variant (the baseline, which has no ratios,
    gets NaN for them)."""
    tot = sorted(r["total"])
    if not tot:
        return statistics.median(r["ms"]), math.nan, math.nan, math.nan, math.nan
    return (statistics.median(r["ms"]), statistics.median(tot), statistics.median(r["median"]),
            tot[len(tot) // 4], tot[(3 * len(tot)) // 4])


def flush_run(run, in_flight: list[int] | None = None, timeout: float = 30.0) -> None:
    """Post what `run` has queued now (not at the sender's next turn, up to a second away) and wait until it is
    answered (`in_flight[0]`: posts sent and not answered, when the caller counts them): the next window starts
    with nothing of this one's left to ingest."""
    deadline = time.monotonic() + timeout
    while (run.stats()["queued"] or (in_flight and in_flight[0])) and time.monotonic() < deadline:
        run._last_send = 0.0  # the sender's cadence: as if its last post were long ago
        run._wake.set()
        time.sleep(0.001)

def deep_chain_inputs(n: int = 1000, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal(64).astype(np.float32))
    ws = [Variable.from_tensor(Tensor((1 + 0.1 * rng.standard_normal(64)).astype(np.float32))) for _ in range(n)]
    bs = [Variable.from_tensor(Tensor((0.1 * rng.standard_normal(64)).astype(np.float32))) for _ in range(n)]
    return x, ws, bs


def deep_chain_step(x, ws, bs) -> None:
    for p in ws:
        p.grad = None
    for p in bs:
        p.grad = None
    y = x
    for w, b in zip(ws, bs, strict=True):
        y = (y * w + b).tanh()
    y.sum().backward()


def _strip_hooks(fn):
    """The function recompiled without its `if hooks:` blocks: the engine with the hooks compiled out."""
    lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
    out, skip_indent = [], None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if line.strip() and indent > skip_indent:
                continue
            skip_indent = None
        if line.strip() == "if hooks:":
            skip_indent = indent
            continue
        if line.strip() == "hooks = _hooks.ACTIVE":
            continue
        out.append(line)
    namespace = dict(fn.__globals__)
    exec(compile("\n".join(out), f"<stripped {fn.__name__}>", "exec"), namespace)
    return namespace[fn.__name__]


@contextlib.contextmanager
def hooks_compiled_out():
    """Swap the engine's `apply` and `run_backward` for copies without any hook check, everywhere they are bound."""
    orig_apply, orig_rb = _graph.apply, _backward.run_backward
    new_apply, new_rb = _strip_hooks(orig_apply), _strip_hooks(orig_rb)
    patched = []
    for mod in list(sys.modules.values()):
        for name, orig, new in (("apply", orig_apply, new_apply), ("run_backward", orig_rb, new_rb)):
            if getattr(mod, name, None) is orig:
                setattr(mod, name, new)
                patched.append((mod, name, orig))
    try:
        yield
    finally:
        for mod, name, orig in patched:
            setattr(mod, name, orig)


def _fresh_stripped():
    holder = {}

    def enter():
        holder["cm"] = hooks_compiled_out()
        holder["cm"].__enter__()

    def leave():
        holder["cm"].__exit__(None, None, None)

    return enter, leave


def run_engine() -> None:
    args = deep_chain_inputs()
    run = lambda: deep_chain_step(*args)  # noqa: E731

    class Noop(EngineHook):
        pass

    noop, sink = Noop(), events.EventHook(lambda e: None)
    enter, leave = _fresh_stripped()
    res = alternate({
        "no hook attached": (lambda: None, run, lambda: None),
        "hooks compiled out": (enter, run, leave),
        "no-op hook attached": (noop.__enter__, run, lambda: noop.__exit__()),
        "EventHook, null sink": (sink.__enter__, run, lambda: sink.__exit__()),
    }, rounds=40, repeat=3)
    base = res["hooks compiled out"]
    print("\n## deep_chain forward+backward (1000 steps, [64], float32), median ms")
    for k, v in res.items():
        print(f"  {k:24s} {v:8.2f} ms   {100 * (v / base - 1):+6.1f}% vs compiled out")


# -- 2. mlp_train: unattached vs streaming ------------------------------------------------------------------
def mlp_setup(seed: int = 0):
    rng = np.random.default_rng(seed)

    def param(shape, fan_in, name):
        w = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        return Variable.from_tensor(Tensor(w), name=name)

    params = [param((784, 512), 784, "fc1.weight"), param((512,), 784, "fc1.bias"),
              param((512, 256), 512, "fc2.weight"), param((256,), 512, "fc2.bias"),
              param((256, 10), 256, "fc3.weight"), param((10,), 256, "fc3.bias")]
    x = Tensor(rng.standard_normal((128, 784)).astype(np.float32))
    labels = rng.integers(0, 10, 128)
    onehot = Tensor(np.eye(10, dtype=np.float32)[labels])
    return params, x, onehot, SGD(params, lr=0.01, momentum=0.9)


def mlp_train_step():
    """mlp_train as WORKLOADS.md defines it and bench_training.py measures it: nn.Sequential of Linear/ReLU,
    CrossEntropyLoss, SGD(lr 0.01, momentum 0.9); one call = zero_grad + forward + backward + step."""
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = Tensor(rng.standard_normal((128, 784)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, 128))
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def mlp_step(params, x, onehot, opt) -> float:
    """The same network written out in 16 primitive ops (a log-softmax by hand, one-hot labels): about three
    times the events and summaries of `mlp_train_step` per step, the heavier case for the stream."""
    opt.zero_grad()
    w1, b1, w2, b2, w3, b3 = params
    h = (x.matmul(w1) + b1).relu()
    h = (h.matmul(w2) + b2).relu()
    z = h.matmul(w3) + b3
    shift = Tensor(z.data.max(axis=1, keepdims=True))  # a constant: stable log-sum-exp
    zs = z - shift
    loss = (zs.exp().sum(dim=1).log() - (zs * onehot).sum(dim=1)).mean()
    loss.backward()
    opt.step()
    return float(loss.data)


class CpuSplit:
    """Where one variant's CPU goes, summed over its rounds: the training thread (`time.thread_time` around each
    step), the emitter's sender thread and the server process (their CPU clocks read at the variant's setup and
    after its teardown, which waits until the server has acknowledged the variant's events). CPU time, unlike the
    wall-clock medians, is nearly the same on a quiet and a loaded machine; it says which part to cut."""

    def __init__(self, sender: threading.Thread | None = None, server_pid: int | None = None) -> None:
        self.sender, self.server_pid = sender, server_pid
        self.steps = 0
        self.train_s = self.sender_s = self.server_s = 0.0
        self._at: tuple[float, float] = (0.0, 0.0)

    def _sender_cpu(self) -> float:
        ident = self.sender.ident if self.sender is not None else None
        return time.clock_gettime(time.pthread_getcpuclockid(ident)) if ident is not None else 0.0

    def _server_cpu(self) -> float:
        return (process_cpu_s(self.server_pid) or 0.0) if self.server_pid is not None else 0.0

    def wrap(self, setup, fn, teardown):
        """(setup, fn, teardown) for `alternate` or `paired`, metered (every step, warm-up ones too)."""
        def metered_setup():
            self._at = (self._sender_cpu(), self._server_cpu())
            setup()

        def metered_fn():
            t0 = time.thread_time()
            fn()
            self.train_s += time.thread_time() - t0
            self.steps += 1

        def metered_teardown():
            teardown()
            self.sender_s += self._sender_cpu() - self._at[0]
            self.server_s += self._server_cpu() - self._at[1]

        return metered_setup, metered_fn, metered_teardown

    def per_step_ms(self) -> tuple[float, float, float]:
        n = max(self.steps, 1)
        return 1e3 * self.train_s / n, 1e3 * self.sender_s / n, 1e3 * self.server_s / n


def run_mlp(rounds: int = 6, seconds: float = 1.5, warmup: float = 1.0) -> None:
    """Each variant runs for `warmup` + `seconds` per block beside an unattached block (`paired`): long
    enough for the stream's steady state (the sender posts every second while no page watches the run, every
    100 ms while one does). Two workloads: mlp_train as defined (nn modules, CrossEntropyLoss) and the same
    network in primitive ops. RTXVIZ_BENCH_PAIRS=N: N pairs per variant instead of `rounds` (this machine's pairs
    spread 5-25 points: more pairs, a steadier median)."""
    rounds = int(os.environ.get("RTXVIZ_BENCH_PAIRS", rounds))
    state = mlp_setup()
    workloads = {
        "mlp_train (nn.Sequential + CrossEntropyLoss, as bench_training)": mlp_train_step(),
        "the same MLP in 16 primitive ops (hand-written log-softmax)": lambda: mlp_step(*state),
    }
    counter = {"i": 0}
    server: dict = {}
    # RTXVIZ_BENCH_OTHER_SERVER="ARGS": one more variant, streaming every step to a second server started with
    # those options of rtxviz serve (e.g. "--nice 0"; the first has rtxviz serve's defaults);
    # RTXVIZ_BENCH_SERVER_NICE=N is short for "--nice N". RTXVIZ_BENCH_SERVER_ARGS="ARGS": the first server's
    # options. RTXVIZ_BENCH_MLP_ONLY=1: the first workload only. RTXVIZ_BENCH_STREAM_ONLY=1: only the variants that
    # stream every step, one per server (the two servers then take the same load: a fair A/B of their options)
    other_args = os.environ.get("RTXVIZ_BENCH_OTHER_SERVER")
    if other_args is None and os.environ.get("RTXVIZ_BENCH_SERVER_NICE") is not None:
        other_args = f"--nice {os.environ['RTXVIZ_BENCH_SERVER_NICE']}"
    other_title = None if other_args is None else f"streaming, server {other_args}"
    if os.environ.get("RTXVIZ_BENCH_MLP_ONLY") == "1":
        workloads = dict(list(workloads.items())[:1])
    other: dict = {}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        url = stack.enter_context(server_process(str(Path(tmp) / "mlp.db"), cpu=server,
                                                 args=os.environ.get("RTXVIZ_BENCH_SERVER_ARGS", "").split()))
        other_url = None if other_args is None else stack.enter_context(
            server_process(str(Path(tmp) / "other.db"), cpu=other, args=other_args.split()))
        run = events.watch(url, run_name="bench-mlp", max_queue=1_000_000)
        run.start()
        run.close_timeout = 30
        events.emitter._hooks.remove_hook(run.hook)
        # the same hook with a sink that throws events away: what recording costs in the training thread alone
        # (stats, event dicts), as opposed to encoding, the sender thread and the server
        null_run = events.Run(transport=None, run_name="null")
        null_run.hook.sink = lambda ev: None  # events thrown away

        def null_on():
            events.emitter._hooks.add_hook(null_run.hook)
            events.emitter._CURRENT.append(null_run)  # so optimizer_step() reports to it

        def null_off():
            events.emitter._hooks.remove_hook(null_run.hook)
            events.emitter._CURRENT.remove(null_run)

        def attach(every, idle=1.0):
            # idle: the wait between posts while the server answers that no page watches the run (none does here);
            # 0.1 s is the cadence a run has while a page is open on it
            def go():
                run.sample_every = every
                run.idle_flush_interval = idle
                events.emitter._hooks.add_hook(run.hook)
            return go

        in_flight = [0]  # posts sent and not yet answered (the batch has left the queue by then)
        send = run.transport.send

        def counted_send(*args):
            in_flight[0] += 1
            try:
                return send(*args)
            finally:
                in_flight[0] -= 1

        run.transport.send = counted_send

        def detach():
            events.emitter._hooks.remove_hook(run.hook)
            flush_run(run, in_flight)
            time.sleep(0.05)  # let the server finish the answered post's hand-off before the next block

        home = (run.transport.host, run.transport.port)

        def post_to(address):
            run.transport.close()  # the next post opens a connection to `address`
            run.transport.host, run.transport.port = address

        def attach_other():
            parts = urllib.parse.urlsplit(other_url)
            post_to((parts.hostname, parts.port))
            attach(1)()

        def detach_other():
            detach()
            post_to(home)

        for title, step in workloads.items():
            def streamed(step=step):
                with run.step(counter["i"]):
                    step()
                counter["i"] += 1

            variants = {
                "unattached": (lambda: None, step, lambda: None),
                "recording, null sink": (null_on, step, null_off),
                "streaming (every step)": (attach(1), streamed, detach),
                "streaming, posts as watched": (attach(1, 0.1), streamed, detach),
                "streaming, sample_every=10": (attach(10), streamed, detach),
            }
            if other_url is not None:
                variants[other_title] = (attach_other, streamed, detach_other)
            # RTXVIZ_BENCH_VARIANTS="a;b": only the variants whose names contain a or b (and the baseline);
            # RTXVIZ_BENCH_STREAM_ONLY=1 is short for the ones that stream every step, one per server
            chosen = os.environ.get("RTXVIZ_BENCH_VARIANTS")
            if os.environ.get("RTXVIZ_BENCH_STREAM_ONLY") == "1":
                chosen = "streaming (every step);streaming, server "
            if chosen:
                keep = [c.strip() for c in chosen.split(";") if c.strip()]
                variants = {k: v for k, v in variants.items() if k == "unattached" or any(c in k for c in keep)}
            # the events still queued in this process when a window ends (before the untimed drain): a server
            # that falls behind during the windows and catches up between them shows here, not in the times
            backlog: dict[str, list[int]] = {}

            def noting(k, teardown, backlog=backlog):
                def noted():
                    backlog.setdefault(k, []).append(run.stats()["queued"])
                    teardown()
                return noted

            variants = {k: (su, fn, noting(k, td)) for k, (su, fn, td) in variants.items()}
            meters = {k: CpuSplit(run._thread, (other if k == other_title else server).get("pid"))
                      for k in variants}
            res = paired({k: meters[k].wrap(*v) for k, v in variants.items()}, "unattached", rounds, seconds,
                         warmup)
            print(f"\n## {title}: 784-512-256-10, batch 128, SGD momentum")
            print(f"   ({rounds} pairs per variant of {seconds:g} s windows after {warmup:g} s untimed, each beside "
                  "an unattached block; overhead = median over the pairs of the variant's time per step over its "
                  "neighbour's, by the windows' totals and by their median steps)")
            print(f"  {'':28s} median step   overhead (total)   (median step)   pairs' IQR (total)   queued at end")
            for k, r in res.items():
                ms, total, median, q1, q3 = overhead_summary(r)
                if k == "unattached":
                    print(f"  {k:28s} {ms:7.2f} ms")
                    continue
                print(f"  {k:28s} {ms:7.2f} ms   {100 * (total - 1):+8.1f}%   "
                      f"{100 * (median - 1):+12.1f}%   "
                      f"{100 * (q1 - 1):+6.1f}% .. {100 * (q3 - 1):+.1f}%   "
                      f"{statistics.median(backlog.get(k, [0])):10.0f}")
            # the threads of the training process and the server all share the machine's cores: their CPU per
            # step is what streaming takes from training when the cores are busy (the BLAS threads' too)
            print("   CPU per step (training thread | sender thread | server process), ms; vs unattached's training "
                  "thread:")
            base_cpu = meters["unattached"].per_step_ms()[0]
            for k, m in meters.items():
                train, sender, srv = m.per_step_ms()
                every = train + sender + srv
                print(f"  {k:26s} {train:6.3f} | {sender:6.3f} | {srv:6.3f}   training thread "
                      f"{100 * (train / base_cpu - 1):+6.1f}%, all {100 * (every / base_cpu - 1):+6.1f}%")
        run.close()
        st = run.stats()
        stored = 0
        for where in (url, other_url) if other_url is not None else (url,):
            with urllib.request.urlopen(f"{where}/api/runs/{run.id}") as r:
                stored += json.loads(r.read())["n_events"]
    print(f"  events sent {st['sent']}, dropped {st['dropped']}, stored by the server(s) {stored}")


# -- 3. the server: ingest from 4 producers, 3 WebSocket consumers ------------------------------------------
def _node_line(i: int) -> str:
    return json.dumps({"v": 1, "kind": "node", "t": 0.0, "step": 7, "id": i, "op": "matmul",
                       "inputs": [{"node": i - 1}, {"leaf": 3}], "shape": [128, 512], "dtype": "float32",
                       "device": "cpu", "module": "model.fc1", "rule": "dA = dC @ B^T, dB = A^T @ dC",
                       "saved_bytes": 262144}, separators=(",", ":")).replace('"t":0.0', '"t":T_NOW')


def _producer(url: str, run_id: str, batches: int, batch_size: int, start: float, out) -> None:
    import http.client

    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    template = "\n".join(_node_line(i) for i in range(batch_size)).encode()
    while time.time() < start:
        time.sleep(0.001)
    sent = 0
    for _ in range(batches):
        body = template.replace(b"T_NOW", repr(time.time()).encode())
        conn.request("POST", f"/api/runs/{run_id}/events", body=body,
                     headers={"Content-Type": "application/x-ndjson"})
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            sent += batch_size
    out.put((sent, time.time()))


_T = re.compile(r'"t":([0-9.]+)')


class _Consumer(threading.Thread):
    """A light WebSocket reader (a browser parses with V8's JSON.parse, much faster than Python's json): counts
    events by their ``{"seq":`` prefix and reads the emit time of every 100th event for the latency."""

    def __init__(self, url: str, run_id: str, expected: int) -> None:
        super().__init__(daemon=True)
        self.url = url.replace("http://", "ws://") + f"/api/runs/{run_id}/ws"
        self.expected, self.latencies, self.count, self.ready = expected, [], 0, threading.Event()
        self.done_at = None

    def run(self) -> None:
        from websockets.sync.client import connect

        with connect(self.url, max_size=None, compression=None) as ws:
            self.ready.set()
            while self.count < self.expected:
                msg = ws.recv(timeout=120)
                now = time.time()
                if not msg.startswith('{"type":"events"'):
                    continue
                n = msg.count('{"seq":')
                self.count += n
                self.latencies.extend(now - float(m.group(1)) for m in list(_T.finditer(msg))[::100])
            self.done_at = time.time()


def server_round(root: Path, producers: int, consumers: int, batches: int, batch_size: int) -> dict[str, float]:
    """One ingest round against a fresh server of the checkout at `root`: events/s in, end to end, latencies."""
    # --nice 0: this measures the server itself; niced (the default, for a machine that also trains) on a shared
    # machine it gets what the other processes leave, and a consumer it cannot feed for 30 s is cut off
    cpu: dict[str, float] = {}
    with (tempfile.TemporaryDirectory() as tmp,
          server_process(str(Path(tmp) / "ingest.db"), root, nice=0, cpu=cpu) as url):
        n_total = producers * batches * batch_size
        run_id = "bench-ingest"  # the producers share one run; every consumer watches it all
        urllib.request.urlopen(urllib.request.Request(
            f"{url}/api/runs/{run_id}/events", data=json.dumps({"v": 1, "kind": "run_start", "t": time.time(),
                                                                "step": None, "name": "ingest"}).encode(),
            headers={"Content-Type": "application/x-ndjson"})).read()
        cons = [_Consumer(url, run_id, n_total + 1) for _ in range(consumers)]
        for c in cons:
            c.start()
        for c in cons:
            c.ready.wait(30)
        ctx = mp.get_context("fork")
        out = ctx.Queue()
        start = time.time() + 0.5
        procs = [ctx.Process(target=_producer, args=(url, run_id, batches, batch_size, start, out))
                 for _ in range(producers)]
        for p in procs:
            p.start()
        results = [out.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        for c in cons:
            c.join(150)
        sent = sum(r[0] for r in results)
        ingest_s = max(r[1] for r in results) - start
        deliver_s = max((c.done_at or time.time() for c in cons), default=time.time()) - start
        lat = sorted(x for c in cons for x in c.latencies)
        delivered = sum(c.count for c in cons)
    return {"sent": sent, "total": n_total, "ingest_s": ingest_s, "ingest_eps": sent / ingest_s,
            "deliver_s": deliver_s, "e2e_eps": sent / deliver_s, "deliveries": delivered,
            "p50_ms": 1e3 * lat[len(lat) // 2] if lat else 0.0,
            "p99_ms": 1e3 * lat[int(len(lat) * 0.99)] if lat else 0.0, "sampled": len(lat),
            "server_us": 1e6 * cpu.get("cpu_s", float("nan")) / max(sent, 1)}


def run_server(producers: int = 4, consumers: int = 3, batches: int = 25, batch_size: int = 2000,
               rounds: int = 3) -> None:
    """`rounds` rounds, each a fresh server; with RTXVIZ_BENCH_BEFORE=<older checkout>, alternating with its
    server in the same run (before, after, before, ...), and medians of each."""
    before = os.environ.get("RTXVIZ_BENCH_BEFORE")
    variants = {"before": Path(before), "after": ROOT} if before else {"this checkout": ROOT}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, root in variants.items():
            results[name].append(server_round(root, producers, consumers, batches, batch_size))
    print(f"\n## server: {producers} producer processes x {batches} batches x {batch_size} node events into one "
          f"run, {consumers} WebSocket consumers; median of {rounds} rounds, each on a fresh server")
    for name, rs in results.items():
        eps = ", ".join(f"{r['ingest_eps']:,.0f}" for r in rs)
        p99s = ", ".join(f"{r['p99_ms']:.0f}" for r in rs)
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"  {name} ({variants[name]}):")
        print(f"    ingested {med['sent']:.0f}/{med['total']:.0f} events in {med['ingest_s']:.2f} s: "
              f"{med['ingest_eps']:,.0f} events/s (rounds: {eps})")
        print(f"    every consumer had every event after {med['deliver_s']:.2f} s: {med['e2e_eps']:,.0f} events/s "
              f"end to end ({med['deliveries']:.0f} deliveries)")
        print(f"    emit->delivery latency: p50 {med['p50_ms']:.0f} ms, p99 {med['p99_ms']:.0f} ms "
              f"(sampled {med['sampled']:.0f} events; p99 by round: {p99s})")
        cpus = ", ".join(f"{r['server_us']:.1f}" for r in rs)
        print(f"    server CPU (all its threads, start-up excluded): {med['server_us']:.1f} us/event "
              f"(rounds: {cpus}) -> {1e6 / med['server_us']:,.0f} events/s per core it gets")


# -- 4. one keep-alive connection: request round trip (Nagle against delayed ACK without TCP_NODELAY) ---------
def _keepalive_round(root: Path, requests: int, batch_size: int) -> list[float]:
    import http.client

    body = "\n".join(_node_line(i) for i in range(batch_size)).replace("T_NOW", "1.0").encode()
    with tempfile.TemporaryDirectory() as tmp, server_process(str(Path(tmp) / "ka.db"), root, nice=0) as url:
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        times = []
        for _ in range(requests):
            t0 = time.perf_counter()
            conn.request("POST", "/api/runs/ka/events", body=body, headers={"Content-Type": "application/x-ndjson"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200, resp.status
            times.append(time.perf_counter() - t0)
        conn.close()
    return times


def run_keepalive(requests: int = 100, batch_size: int = 10, rounds: int = 3) -> None:
    """Median round trip of `requests` sequential POSTs on one keep-alive connection, the way `watch` sends;
    with RTXVIZ_BENCH_BEFORE, alternating with an older checkout's server."""
    before = os.environ.get("RTXVIZ_BENCH_BEFORE")
    variants = {"before": Path(before), "after": ROOT} if before else {"this checkout": ROOT}
    results: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, root in variants.items():
            results[name].extend(_keepalive_round(root, requests, batch_size))
    print(f"\n## keep-alive: {requests} sequential POSTs of {batch_size} events on one connection, {rounds} rounds")
    for name, ts in results.items():
        ts.sort()
        print(f"  {name}: round trip median {1e3 * ts[len(ts) // 2]:.1f} ms, p90 {1e3 * ts[int(len(ts) * 0.9)]:.1f} ms"
              f" ({len(ts)} requests): {batch_size / ts[len(ts) // 2]:,.0f} events/s for one emitter")


# -- 5. the ingest path's CPU per event (parse, validate, store), in-process, by CPU time ---------------------
_INGEST_CPU = """
import sys, tempfile, time
from pathlib import Path
from rtxviz.store import open_store
from rtxviz.web.deps import Settings
from rtxviz.web.routers.ingest import _ingest as _ingest_route
try:  # a checkout with accounts appends as someone: the admin, as a server without accounts does
    from rtxviz.web.deps import ADMIN
    def _ingest(*args):
        return _ingest_route(*args, ADMIN)
except ImportError:
    _ingest = _ingest_route
# the modules and objects a server process holds (fastapi, uvicorn, the app): what each collection scans
from rtxviz.web import create_app
import uvicorn
app = create_app(db=":memory:")
try:  # the collector as `rtxviz serve` of this checkout sets it (older checkouts leave CPython's default)
    from rtxviz.cli.serve import tune_gc_for_serving
except ImportError:
    tune_gc_for_serving = None
body = sys.stdin.buffer.read()
n = body.count(b"\\n") + 1
with tempfile.TemporaryDirectory() as tmp:
    store = open_store(str(Path(tmp) / "cpu.db"))
    s = Settings()
    if tune_gc_for_serving is not None:
        tune_gc_for_serving()
    best = float("inf")
    for r in range(int(sys.argv[1])):
        t0 = time.process_time()
        _ingest(store, s, f"r{r}", None, 0, body, "application/x-ndjson")
        best = min(best, time.process_time() - t0)
    t0 = time.process_time()
    batches = int(sys.argv[2])
    for _ in range(batches):
        _ingest(store, s, "one", None, 0, body, "application/x-ndjson")
    mean = (time.process_time() - t0) / batches
    store.close()
print(1e6 * best / n, 1e6 * mean / n)
"""


def run_ingest_cpu(batch_size: int = 2000, repeat: int = 15, rounds: int = 3, batches: int = 25) -> None:
    """CPU microseconds per event of the ingest path (NDJSON parse, validation, SQLite commit) for the bench's
    node events, in a process with the collector set as each checkout's `rtxviz serve` sets it. Two figures:
    the best of `repeat` batches (each a new run), and the mean over `batches` batches into one run (what the
    server bench does: the run grows, and the collector's work on the batches' objects counts); `rounds`
    processes per variant, alternating. CPU time, not wall time: on a loaded shared machine this is the figure
    that measures the neighbours least."""
    before = os.environ.get("RTXVIZ_BENCH_BEFORE")
    variants = {"before": Path(before), "after": ROOT} if before else {"this checkout": ROOT}
    body = "\n".join(_node_line(i) for i in range(batch_size)).replace("T_NOW", "1.0").encode()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, root in variants.items():
            out = subprocess.run([sys.executable, "-c", _INGEST_CPU, str(repeat), str(batches)], input=body,
                                 capture_output=True, env=root_env(root), cwd=root, check=True)
            best, mean = (float(x) for x in out.stdout.split())
            results[name].append((best, mean))
    print(f"\n## ingest CPU: batches of {batch_size} node events through parse + validate + store")
    for name, rs in results.items():
        bests, means = [b for b, _ in rs], [m for _, m in rs]
        print(f"  {name}: best batch {min(bests):.2f} us/event CPU ({', '.join(f'{u:.2f}' for u in bests)}); "
              f"mean of {batches} batches into one run {statistics.median(means):.2f} us/event "
              f"({', '.join(f'{u:.2f}' for u in means)}) -> at most {1e6 / statistics.median(means):,.0f} events/s "
              "on one core")


# -- 6. issue 15's burst: one recorded GPT-like step (13,000 events) in one post, CPU time of _ingest ---------
_INGEST_BURST = """
import gc, json, statistics, sys, tempfile, time
from pathlib import Path
from rtxviz.store import open_store
from rtxviz.web.deps import Settings
from rtxviz.web.routers.ingest import _ingest as _ingest_route
try:
    from rtxviz.web.deps import ADMIN
    def _ingest(*args):
        return _ingest_route(*args, ADMIN)
except ImportError:
    _ingest = _ingest_route
from rtxviz.web import create_app
import uvicorn
app = create_app(db=":memory:")
from rtxviz.cli.serve import tune_gc_for_serving
first, body = sys.stdin.buffer.read().split(b"\\n", 1)
with tempfile.TemporaryDirectory() as tmp:
    store = open_store(str(Path(tmp) / "burst.db"))
    s = Settings()
    tune_gc_for_serving()
    times = []
    for r in range(int(sys.argv[1])):
        _ingest(store, s, f"r{r}", "burst", 0, first, "application/x-ndjson")  # the live run, as the bench has it
        t0 = time.process_time()
        _ingest(store, s, f"r{r}", "burst", 0, body, "application/x-ndjson")
        times.append(time.process_time() - t0)
    store.close()
print(" ".join(f"{1e3 * t:.1f}" for t in times))
"""


def run_ingest_burst(repeat: int = 5, rounds: int = 3) -> None:
    """CPU milliseconds of the ingest route's work (`_ingest`: NDJSON parse, validation, SQLite commit with the
    per-step history) on bench_frontend's burst: `gpt_graph(n_blocks=12, ops_per_block=481)`'s first 13,000
    events after run_start, posted as one batch to a live run. `repeat` bursts per process (each a new run),
    `rounds` processes per variant, alternating with RTXVIZ_BENCH_BEFORE's checkout when set; the median over
    all and each process's median. The collector is set as `rtxviz serve` sets it."""
    from rtxviz.events.emitter import encode_event
    from tests.browser.graphs import gpt_graph

    evs = gpt_graph(n_blocks=12, ops_per_block=481)[:13_001]
    for e in evs[1:]:
        e["t"] = 1.0
    body = b"\n".join(encode_event(e) for e in evs)  # line 1: run_start, then the burst
    before = os.environ.get("RTXVIZ_BENCH_BEFORE")
    variants = {"before": Path(before), "after": ROOT} if before else {"this checkout": ROOT}
    results: dict[str, list[list[float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, root in variants.items():
            out = subprocess.run([sys.executable, "-c", _INGEST_BURST, str(repeat)], input=body,
                                 capture_output=True, env=root_env(root), cwd=root, check=True)
            results[name].append([float(x) for x in out.stdout.split()])
    print(f"\n## ingest CPU of one 13,000-event burst ({len(body):,} bytes), {repeat} per process")
    for name, rs in results.items():
        every = [t for r in rs for t in r]
        print(f"  {name}: median {statistics.median(every):.0f} ms CPU, min {min(every):.0f} ms "
              f"(per process: {', '.join(f'{statistics.median(r):.0f}' for r in rs)} ms)")


if __name__ == "__main__":
    print(f"# OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset (OpenBLAS default)')}")
    which = _ARGS or ["engine", "mlp", "server"]
    for name in which:
        {"engine": run_engine, "mlp": run_mlp, "server": run_server, "keepalive": run_keepalive,
         "ingest_cpu": run_ingest_cpu, "ingest_burst": run_ingest_burst}[name]()
