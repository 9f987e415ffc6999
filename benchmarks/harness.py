"""Timing and side-by-side comparison with PyTorch, shared by every benchmark script.

Each workload has an rtxviz factory (run in this process) and, optionally, a PyTorch factory and a DeZero one
(each run in a long-lived worker process of a Python that has the package, `--torch-python`, `--dezero-python`).
Rounds alternate between the engines so that the shared machine's noise hits them alike; the report gives
medians and the ratios ours / PyTorch and ours / DeZero (< 1 is faster).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_TORCH_PYTHON = os.environ.get("RTXVIZ_TORCH_PYTHON", "/tmp/torchvenv/bin/python")

Factory = Callable[[], tuple[Callable[[], Any], Callable[[], Any] | None]]


def time_samples(fn: Callable[[], Any], setup: Callable[[], Any] | None = None, min_time: float = 0.5,
                 min_iters: int = 5, warmup: int = 3, calls_per_sample: int = 1) -> list[float]:
    """Seconds per call of `fn` (divided by calls_per_sample); `setup` runs untimed before each call."""
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    gc.collect()
    gc_was = gc.isenabled()
    gc.disable()
    samples: list[float] = []
    total = 0.0
    try:
        while total < min_time or len(samples) < min_iters:
            if setup is not None:
                setup()
            t0 = perf_counter()
            fn()
            dt = perf_counter() - t0
            samples.append(dt / calls_per_sample)
            total += dt
    finally:
        if gc_was:
            gc.enable()
    return samples


def serve_requests(build: Callable[[str], tuple], timer: Callable[..., list[float]] = time_samples) -> None:
    """A worker's loop (torch_workloads, dezero_workloads, before_worker): one JSON request per stdin line,
    ``{"workload": name, "min_time": s}``, answered with ``{"samples": [...]}`` or ``{"error": ...}``. `build(name)`
    makes a workload once: ``(fn, setup[, calls_per_sample])``; `timer` times it (an older tree's own)."""
    built: dict[str, tuple] = {}
    for line in sys.stdin:
        req = json.loads(line)
        name = req["workload"]
        try:
            if name not in built:
                built[name] = build(name)
            spec = built[name]
            calls = spec[2] if len(spec) > 2 else 1
            samples = timer(spec[0], spec[1], req["min_time"], calls_per_sample=calls)
            print(json.dumps({"samples": samples}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": f"{name}: {type(exc).__name__}: {exc}"}), flush=True)


def thread_env(threads: int | None) -> dict[str, str]:
    """The environment of a worker: with `threads`, every BLAS / OpenMP pool and PyTorch's intra-op pool get
    that many threads (RTXVIZ_BENCH_THREADS tells the worker); without, nothing is set: what a user gets."""
    if threads is None:
        return dict(os.environ)
    n = str(threads)
    return dict(os.environ, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, RTXVIZ_BENCH_THREADS=n)


class Worker:
    """A subprocess serving `script` (one JSON request and answer per line); its first line names the
    engine's version under `engine` and the thread count it runs with under "threads"."""

    script = "torch_workloads.py"
    engine = "torch"

    def __init__(self, python: str, threads: int | None = None) -> None:
        self.proc = subprocess.Popen([python, str(HERE / self.script), "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=thread_env(threads))
        hello = json.loads(self.proc.stdout.readline())
        self.version = hello[self.engine]
        self.threads = hello.get("threads", "default")

    def run(self, name: str, min_time: float) -> list[float]:
        self.proc.stdin.write(json.dumps({"workload": name, "min_time": min_time}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"{self.engine} worker: {answer['error']}")
        return answer["samples"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class TorchWorker(Worker):
    """benchmarks/torch_workloads.py in a Python that has torch."""


class DezeroWorker(Worker):
    """benchmarks/dezero_workloads.py in a Python that has dezero 0.0.13."""

    script = "dezero_workloads.py"
    engine = "dezero"


class BeforeWorker(Worker):
    """benchmarks/before_worker.py: the same script's rtxviz workloads from an older checkout
    (RTXVIZ_BENCH_BEFORE), run by this Python, so before and after alternate round by round."""

    engine = "before"

    def __init__(self, root: str, script: str, threads: int | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "before_worker.py"), "--serve", "--root", root,
                                      "--script", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=thread_env(threads))
        hello = json.loads(self.proc.stdout.readline())
        self.version = hello[self.engine]
        self.threads = hello.get("threads", "default")


def start_before(threads: int | None) -> BeforeWorker | None:
    """With RTXVIZ_BENCH_BEFORE=<dir of an older checkout>, a worker timing that tree's rtxviz workloads."""
    root = os.environ.get("RTXVIZ_BENCH_BEFORE")
    if not root:
        return None
    worker = BeforeWorker(root, Path(sys.argv[0]).name, threads)
    print(f"# before: {worker.version} (BLAS threads: {worker.threads}), alternating with this checkout")
    return worker


def start_torch(python: str | None, threads: int | None = None) -> TorchWorker | None:
    if not python or not Path(python).exists():
        print(f"# PyTorch side skipped: no python with torch at {python!r} (set --torch-python)")
        return None
    try:
        # threads only when given: a script's own TorchWorker subclass (bench_training.py) may fix them itself
        worker = TorchWorker(python) if threads is None else TorchWorker(python, threads)
    except Exception as exc:
        print(f"# PyTorch side skipped: {exc}")
        return None
    print(f"# PyTorch {worker.version} in {python}, {getattr(worker, 'threads', '?')} intra-op threads")
    return worker


def start_dezero(python: str | None, threads: int | None) -> DezeroWorker | None:
    if not python or not Path(python).exists():
        print(f"# DeZero side skipped: no python at {python!r} (set --dezero-python)")
        return None
    try:
        worker = DezeroWorker(python, threads)
    except Exception as exc:
        print(f"# DeZero side skipped: {exc}")
        return None
    print(f"# DeZero {worker.version} in {python}, BLAS threads: {worker.threads}")
    return worker


def compare(workloads: dict[str, dict[str, Any]], argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run `workloads` ({name: {"rtxviz": factory, "unit": "ms"|"us", "torch": torch workload name or None,
    "dezero": DeZero workload name or None}}) for --rounds alternating rounds; print a table; return
    {name: {"ours": median, "torch": median, "ratio", "dezero": median, "dezero_ratio"}}.

    --threads N gives every engine N BLAS / intra-op threads; without it the two workers are left at their
    defaults (what a user gets) and the rtxviz process at whatever its environment says (a script that wants
    --threads to reach numpy calls `blas_threads_from_argv` before numpy is imported)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds of timed iterations per round")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--torch-python", default=DEFAULT_TORCH_PYTHON)
    ap.add_argument("--dezero-python", default=DEFAULT_TORCH_PYTHON, help="a python with dezero 0.0.13")
    ap.add_argument("--threads", type=lambda v: None if v == "default" else int(v), default=None,
                    help="BLAS / intra-op threads for every engine: N, or 'default' (each engine's own, also when "
                         "not given)")
    ap.add_argument("--json", default="", help="write the results to this file")
    args = ap.parse_args(argv)
    names = [n for n in workloads if not args.only or n in args.only.split(",")]
    print(f"# threads: {args.threads if args.threads is not None else 'each engine default'}; rtxviz process "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    torch = start_torch(args.torch_python, args.threads) if any(workloads[n].get("torch") for n in names) else None
    dezero = start_dezero(args.dezero_python, args.threads) if any(workloads[n].get("dezero") for n in names) \
        else None
    before = start_before(args.threads)
    ours: dict[str, list[float]] = {n: [] for n in names}
    old: dict[str, list[float]] = {n: [] for n in names}
    theirs: dict[str, list[float]] = {n: [] for n in names}
    peer: dict[str, list[float]] = {n: [] for n in names}
    built = {}
    for n in names:
        built[n] = workloads[n]["rtxviz"]()
    for _ in range(args.rounds):
        for n in names:
            fn, setup = built[n][:2]
            calls = built[n][2] if len(built[n]) > 2 else 1
            ours[n] += time_samples(fn, setup, args.min_time, calls_per_sample=calls)
            if before is not None:
                old[n] += before.run(n, args.min_time)
            if torch is not None and workloads[n].get("torch"):
                theirs[n] += torch.run(workloads[n]["torch"], args.min_time)
            if dezero is not None and workloads[n].get("dezero"):
                peer[n] += dezero.run(workloads[n]["dezero"], args.min_time)
    for worker in (torch, dezero, before):
        if worker is not None:
            worker.close()
    results: dict[str, dict[str, float]] = {}
    print(f"{'workload':34s} {'rtxviz':>12s} {'pytorch':>12s} {'ratio':>7s} {'dezero':>12s} {'ratio':>7s}"
          + (f" {'before':>12s} {'new/old':>7s}" if before is not None else ""))
    for n in names:
        scale, unit = (1e6, "us") if workloads[n].get("unit") == "us" else (1e3, "ms")
        o = statistics.median(ours[n]) * scale
        row = {"ours": o, "unit": unit}
        cells = []
        for key, samples in (("torch", theirs[n]), ("dezero", peer[n])) + ((("before", old[n]),) if before else ()):
            if samples:
                t = statistics.median(samples) * scale
                row[key] = t
                row[{"torch": "ratio", "dezero": "dezero_ratio", "before": "before_ratio"}[key]] = o / t
                cells += [f"{t:10.3f}{unit}", f"{o / t:7.2f}"]
            else:
                cells += ["-", "-"]
        results[n] = row
        print(f"{n:34s} {o:10.3f}{unit} " + " ".join(f"{c:>{w}s}" for c, w in zip(cells, (12, 7) * 3, strict=False)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


def blas_threads_from_argv(argv: list[str]) -> int | None:
    """The N of `--threads N` (or `--threads=N`) in `argv`, also exported as OPENBLAS_NUM_THREADS /
    OMP_NUM_THREADS / MKL_NUM_THREADS: call it before numpy is imported, whose BLAS reads them once.

    >>> import os
    >>> saved = {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    >>> blas_threads_from_argv(["--rounds", "3", "--threads=1"]), os.environ["OPENBLAS_NUM_THREADS"]
    (1, '1')
    >>> blas_threads_from_argv(["--rounds", "3"]) is None
    True
    >>> blas_threads_from_argv(["--threads", "default"]) is None
    True
    >>> for k, v in saved.items():
    ...     _ = os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    """
    n = None
    for i, a in enumerate(argv):
        value = argv[i + 1] if a == "--threads" and i + 1 < len(argv) else \
            a.split("=", 1)[1] if a.startswith("--threads=") else None
        if value is not None:
            # "default": what a user gets (the environment's, else each library's own), as bench_events.py says it
            n = None if value == "default" else int(value)
    if n is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(n)
    return n


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run one of the bench_*.py scripts")
