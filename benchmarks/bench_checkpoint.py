"""Issue 4's `checkpoint_memory` workload: peak saved bytes and time of NONE, SQRT_N and EVERY(4), beside PyTorch.

32 x (Linear 1024->1024 + ReLU), batch 256, float32, loss = mean(out²), one forward + backward.

    python benchmarks/bench_checkpoint.py [--rounds 3] [--torch-python /path/to/python-with-torch] [--json FILE]

Memory is counted, not sampled: rtxviz's `memory_stats()["peak"]` (distinct buffers saved for backward that are
activations, i.e. not parameters or user inputs), reset before the forward. PyTorch's side counts the same thing
with `torch.autograd.graph.saved_tensors_hooks` (distinct storages, parameters and the input excluded; a storage
is released when autograd drops its packed handle). PyTorch uses `checkpoint_sequential(..., 6 segments,
use_reentrant=True)` for the byte count: the same algorithm as ours (segment inputs saved, segment recomputed
and differentiated during backward), with its input made to require grad (without that, reentrant checkpointing
silently drops the parameters' gradients); with use_reentrant=False torch's own hooks hide the recomputed tensors
from a user hook, so that setting is timed only. Rounds alternate between variants so noise hits all alike.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rtxviz import Variable
from rtxviz.engine.checkpoint import CheckpointStrategy, checkpoint_sequential
from rtxviz.engine.memory import memory_stats, reset_peak_memory_stats

N_LAYERS, WIDTH, BATCH = 32, 1024, 256
DEFAULT_TORCH_PYTHON = os.environ.get("RTXVIZ_TORCH_PYTHON", "/tmp/torchvenv/bin/python")

TORCH_SCRIPT = r"""
import gc, json, statistics, sys, time
import torch
from torch.utils.checkpoint import checkpoint_sequential
torch.manual_seed(0)
N, W, B, ROUNDS = %d, %d, %d, %d
model = torch.nn.Sequential(*[m for _ in range(N) for m in (torch.nn.Linear(W, W), torch.nn.ReLU())])
x = torch.randn(B, W)
x_rg = x.detach().requires_grad_()  # reentrant checkpointing needs an input that requires grad (else no grads)
excluded = {p.untyped_storage().data_ptr() for p in model.parameters()} | {x.untyped_storage().data_ptr()}
held, cur, peak = {}, [0], [0]

class Handle:
    def __init__(self, t):
        self.t = t
        s = t.untyped_storage()
        self.key = s.data_ptr() if s.data_ptr() not in excluded else None
        if self.key is not None:
            e = held.get(self.key)
            if e is None:
                held[self.key] = [1, s.nbytes()]
                cur[0] += s.nbytes()
                peak[0] = max(peak[0], cur[0])
            else:
                e[0] += 1
    def __del__(self):
        if self.key is not None:
            e = held[self.key]
            e[0] -= 1
            if e[0] == 0:
                del held[self.key]
                cur[0] -= e[1]

def step(mode, count=False):
    for p in model.parameters():
        p.grad = None
    def run():
        if mode == "plain":
            out = model(x)
        else:
            reentrant = mode == "reentrant"
            out = checkpoint_sequential(model, 6, x_rg if reentrant else x, use_reentrant=reentrant)
        out.pow(2).mean().backward()
    if count:
        cur[0] = peak[0] = 0
        with torch.autograd.graph.saved_tensors_hooks(Handle, lambda h: h.t):
            run()
        gc.collect()
        return peak[0]
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0

modes = ["plain", "reentrant", "non_reentrant"]
for m in modes:
    step(m)
peaks = {m: step(m, count=True) for m in ("plain", "reentrant")}
times = {m: [] for m in modes}
for _ in range(ROUNDS):
    for m in modes:
        gc.collect()
        times[m].append(step(m))
print(json.dumps({"torch": torch.__version__, "peak": peaks,
                  "ms": {m: statistics.median(v) * 1e3 for m, v in times.items()}}))
"""


def build() -> tuple[list, list, Any]:
    rng = np.random.default_rng(0)
    params, layers = [], []
    bound = 1.0 / math.sqrt(WIDTH)
    for _ in range(N_LAYERS):
        w = Variable(rng.uniform(-bound, bound, (WIDTH, WIDTH)).astype(np.float32), requires_grad=True)
        b = Variable(rng.uniform(-bound, bound, WIDTH).astype(np.float32), requires_grad=True)
        params += [w, b]
        layers.append(lambda h, w=w, b=b: (h.matmul(w) + b).relu())
    x = Variable(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))
    return layers, params, x


def step(layers: list, params: list, x: Any, strategy: CheckpointStrategy) -> tuple[float, int]:
    """One forward + backward; returns (seconds, peak saved bytes above what was held before)."""
    for p in params:
        p.grad = None
    base = memory_stats(scan=False)["current"]
    reset_peak_memory_stats()
    t0 = perf_counter()
    out = checkpoint_sequential(layers, x, strategy=strategy)
    (out * out).mean().backward()
    dt = perf_counter() - t0
    return dt, memory_stats(scan=False)["peak"] - base


def run_torch(python: str, rounds: int) -> dict | None:
    if not python or not Path(python).exists():
        return None
    env = dict(os.environ, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    script = TORCH_SCRIPT % (N_LAYERS, WIDTH, BATCH, rounds)
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        print(f"torch run failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per variant (alternating)")
    ap.add_argument("--torch-python", default=DEFAULT_TORCH_PYTHON, help="a Python with torch ('' to skip)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    layers, params, x = build()
    variants = {"NONE": CheckpointStrategy.NONE, "SQRT_N": CheckpointStrategy.SQRT_N,
                "EVERY(4)": CheckpointStrategy.EVERY(4)}
    peaks: dict[str, int] = {}
    times: dict[str, list[float]] = {k: [] for k in variants}
    for name, strat in variants.items():  # warm-up round, also the byte count (deterministic)
        peaks[name] = step(layers, params, x, strat)[1]
    for _ in range(args.rounds):
        for name, strat in variants.items():
            gc.collect()
            times[name].append(step(layers, params, x, strat)[0])
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    torch = run_torch(args.torch_python, args.rounds)

    mib = 1024 * 1024
    limit = 2.5 * math.sqrt(N_LAYERS) / N_LAYERS
    print(f"checkpoint_memory: {N_LAYERS} x (Linear {WIDTH}->{WIDTH} + ReLU), batch {BATCH}, float32; "
          f"median of {args.rounds} alternating rounds")
    print(f"{'variant':<34}{'peak saved MiB':>15}{'vs NONE':>9}{'ms':>9}{'vs NONE':>9}")
    for name in variants:
        print(f"rtxviz {name:<27}{peaks[name] / mib:>15.1f}{peaks[name] / peaks['NONE']:>9.3f}"
              f"{ms[name]:>9.1f}{ms[name] / ms['NONE']:>9.2f}")
    if torch is not None:
        tp, tm = torch["peak"], torch["ms"]
        rows = [("plain", "plain", "plain"), ("checkpoint_sequential(6)", "reentrant", "reentrant"),
                ("checkpoint_sequential(6) non-reent.", None, "non_reentrant")]
        for label, pk, tk in rows:
            mem = f"{tp[pk] / mib:>15.1f}{tp[pk] / tp['plain']:>9.3f}" if pk else f"{'-':>15}{'-':>9}"
            print(f"torch {label:<28}{mem}{tm[tk]:>9.1f}{tm[tk] / tm['plain']:>9.2f}")
    ratio_mem = peaks["SQRT_N"] / peaks["NONE"]
    ratio_time = ms["SQRT_N"] / ms["NONE"]
    ok_mem = "ok" if ratio_mem <= limit else "MISSED"
    ok_time = "ok" if ratio_time <= 1.5 else "MISSED"
    print(f"targets: SQRT_N peak / NONE = {ratio_mem:.3f} (<= {limit:.3f}: {ok_mem}); "
          f"time = {ratio_time:.2f}x NONE (<= 1.5: {ok_time})")
    if args.json:
        Path(args.json).write_text(json.dumps({"peak_bytes": peaks, "ms": ms, "torch": torch}, indent=2))


if __name__ == "__main__":
    main()
