"""Timing and side-by-side comparison with PyTorch, shared by every benchmark script.

Each workload has an rtxviz factory (run in this process) and, optionally, a PyTorch factory (run in a
long-lived worker process of a Python that has torch, `--torch-python`). Rounds alternate between the two
engines so that the shared machine's noise hits both alike; the report gives medians and the ratio
ours / PyTorch (< 1 is faster).
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


class TorchWorker:
    """A subprocess running benchmarks/torch_workloads.py: one JSON request and answer per line."""

    def __init__(self, python: str) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
        self.proc = subprocess.Popen([python, str(HERE / "torch_workloads.py"), "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        hello = json.loads(self.proc.stdout.readline())
        self.version = hello["torch"]

    def run(self, name: str, min_time: float) -> list[float]:
        self.proc.stdin.write(json.dumps({"workload": name, "min_time": min_time}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"torch worker: {answer['error']}")
        return answer["samples"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def start_torch(python: str | None) -> TorchWorker | None:
    if not python or not Path(python).exists():
        print(f"# PyTorch side skipped: no python with torch at {python!r} (set --torch-python)")
        return None
    try:
        worker = TorchWorker(python)
    except Exception as exc:
        print(f"# PyTorch side skipped: {exc}")
        return None
    print(f"# PyTorch {worker.version} in {python}")
    return worker


def compare(workloads: dict[str, dict[str, Any]], argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run `workloads` ({name: {"rtxviz": factory, "unit": "ms"|"us", "torch": torch workload name or None}})
    for --rounds alternating rounds; print a table; return {name: {"ours": median, "torch": median, "ratio"}}."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds of timed iterations per round")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--torch-python", default=DEFAULT_TORCH_PYTHON)
    ap.add_argument("--json", default="", help="write the results to this file")
    args = ap.parse_args(argv)
    names = [n for n in workloads if not args.only or n in args.only.split(",")]
    torch = start_torch(args.torch_python) if any(workloads[n].get("torch") for n in names) else None
    ours: dict[str, list[float]] = {n: [] for n in names}
    theirs: dict[str, list[float]] = {n: [] for n in names}
    built = {}
    for n in names:
        built[n] = workloads[n]["rtxviz"]()
    for _ in range(args.rounds):
        for n in names:
            fn, setup = built[n][:2]
            calls = built[n][2] if len(built[n]) > 2 else 1
            ours[n] += time_samples(fn, setup, args.min_time, calls_per_sample=calls)
            if torch is not None and workloads[n].get("torch"):
                theirs[n] += torch.run(workloads[n]["torch"], args.min_time)
    if torch is not None:
        torch.close()
    results: dict[str, dict[str, float]] = {}
    print(f"{'workload':34s} {'rtxviz':>12s} {'pytorch':>12s} {'ratio':>7s}")
    for n in names:
        scale, unit = (1e6, "us") if workloads[n].get("unit") == "us" else (1e3, "ms")
        o = statistics.median(ours[n]) * scale
        row = {"ours": o, "unit": unit}
        t_txt, r_txt = "-", "-"
        if theirs[n]:
            t = statistics.median(theirs[n]) * scale
            row.update(torch=t, ratio=o / t)
            t_txt, r_txt = f"{t:10.3f}{unit}", f"{o / t:7.2f}"
        results[n] = row
        print(f"{n:34s} {o:10.3f}{unit} {t_txt:>12s} {r_txt:>7s}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run one of the bench_*.py scripts")
