"""The `hessian` workload of bench/WORKLOADS.md, beside PyTorch in one run, alternating.

f(x) = sum(tanh(W @ x)), W [64, 64] = N(0,1)/8, x [64], float32; one iteration is the full 64x64 Hessian.
rtxviz runs in this process (`HessianComputer.compute`, batched, and the row-by-row loop); PyTorch's
`torch.autograd.functional.hessian` (vectorize=False and True) runs in a child process of a Python that has
torch (`--torch-python`, default /tmp/torchvenv/bin/python), fed the same W and x. Rounds alternate between
the engines so that machine noise hits both; the report is medians and ratios (ours / PyTorch's).

    PYTHONPATH=. python3 benchmarks/bench_hessian.py [--rounds 15] [--iters 20] [--threads 2] [--torch-threads N]

--threads N sets rtxviz's BLAS threads (read by OpenBLAS once, at numpy's import) and, unless --torch-threads is
given, PyTorch's too; the default is the environment's OPENBLAS_NUM_THREADS, else 2 (bench/WORKLOADS.md). On a
loaded machine 1 thread gives steadier ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _take_threads(argv: list[str]) -> str:
    """`--threads N` from argv (removed there), else the environment's BLAS thread count, else 2."""
    if "--threads" in argv:
        i = argv.index("--threads")
        value = argv[i + 1]
        del argv[i:i + 2]
        return value
    return os.environ.get("OPENBLAS_NUM_THREADS", "2")


# Before numpy loads: OpenBLAS reads its thread count once, at import.
THREADS = _take_threads(sys.argv)
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = THREADS

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtxviz import Tensor  # noqa: E402
from rtxviz.engine.functional import HessianComputer  # noqa: E402

N = 64

TORCH_CHILD = r"""
import json, sys, time
import numpy as np
import torch
from torch.autograd.functional import hessian
torch.set_num_threads(int(sys.argv[2]))
d = np.load(sys.argv[1])
W, x = torch.from_numpy(d["W"]), torch.from_numpy(d["x"])
f = lambda v: torch.tanh(W @ v).sum()
t = torch.tanh(W @ x)
ref = W.T @ torch.diag(-2 * t * (1 - t * t)) @ W
err = {str(v): float((hessian(f, x, vectorize=v) - ref).abs().max()) for v in (False, True)}
print(json.dumps({"ready": torch.__version__, "err": err}), flush=True)
for line in sys.stdin:
    mode, n = line.split()
    vec = mode == "vec"
    times = []
    for _ in range(int(n)):
        t0 = time.perf_counter()
        hessian(f, x, vectorize=vec)
        times.append(time.perf_counter() - t0)
    print(json.dumps(times), flush=True)
"""


def analytic(W: np.ndarray, x: np.ndarray) -> np.ndarray:
    t = np.tanh(W @ x)
    return W.T @ np.diag(-2 * t * (1 - t * t)) @ W


def time_ours(f, x: Tensor, iters: int, batched: bool) -> list[float]:
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        HessianComputer.compute(f, x, batched=batched)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=20, help="iterations per engine per round (loops: a quarter)")
    ap.add_argument("--torch-threads", type=int, default=int(THREADS),
                    help="PyTorch intra-op threads (default: --threads; on a loaded machine 1 is kinder to PyTorch)")
    ap.add_argument("--torch-python", default=os.environ.get("RTXVIZ_TORCH_PYTHON", "/tmp/torchvenv/bin/python"))
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    W = (rng.standard_normal((N, N)) / 8).astype(np.float32)
    x = rng.standard_normal(N).astype(np.float32)
    Wt, xt = Tensor(W), Tensor(x)

    def f(v):
        return (Wt @ v).tanh().sum()

    ref = analytic(W.astype(np.float64), x.astype(np.float64))
    err = {
        "batched": float(np.abs(HessianComputer.compute(f, xt).numpy() - ref).max()),
        "loop": float(np.abs(HessianComputer.compute(f, xt, batched=False).numpy() - ref).max()),
    }

    child = None
    torch_err = None
    if Path(args.torch_python).exists():
        data = Path(tempfile.mkdtemp()) / "hessian_inputs.npz"
        np.savez(data, W=W, x=x)
        threads = str(args.torch_threads)
        env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        child = subprocess.Popen([args.torch_python, "-c", TORCH_CHILD, str(data), threads], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env=env)
        hello = json.loads(child.stdout.readline())
        torch_err = hello["err"]
        print(f"PyTorch {hello['ready']} in a child process ({args.torch_python}), {threads} thread(s); "
              f"rtxviz BLAS threads {THREADS}")
    else:
        print(f"no PyTorch at {args.torch_python}: timing rtxviz only")

    def torch_times(mode: str, n: int) -> list[float]:
        child.stdin.write(f"{mode} {n}\n")
        child.stdin.flush()
        return json.loads(child.stdout.readline())

    loop_iters = max(1, args.iters // 4)
    times: dict[str, list[float]] = {"rtxviz batched": [], "rtxviz loop": [], "torch vectorize=True": [],
                                     "torch vectorize=False": []}
    time_ours(f, xt, 5, True)  # warm-up
    if child:
        torch_times("vec", 5)
        torch_times("loop", 2)
    for _ in range(args.rounds):
        times["rtxviz batched"] += time_ours(f, xt, args.iters, True)
        if child:
            times["torch vectorize=True"] += torch_times("vec", args.iters)
            times["torch vectorize=False"] += torch_times("loop", loop_iters)
        times["rtxviz loop"] += time_ours(f, xt, loop_iters, False)
    if child:
        child.stdin.close()
        child.wait(timeout=30)

    med = {k: float(np.median(v)) * 1e3 for k, v in times.items() if v}
    print(f"\nhessian 64x64 of sum(tanh(W @ x)), float32; {args.rounds} alternating rounds; median ms per Hessian")
    for k, v in med.items():
        print(f"  {k:24s} {v:8.3f} ms")
    print(f"max |H - W^T diag(-2t(1-t^2)) W|: rtxviz batched {err['batched']:.2g}, loop {err['loop']:.2g}")
    if torch_err:
        print(f"{'':32s} torch vectorize=False {torch_err['False']:.2g}, True {torch_err['True']:.2g}")
    if child:
        print("\nratios (ours / PyTorch; < 1 is faster):")
        for ours in ("rtxviz batched", "rtxviz loop"):
            for theirs in ("torch vectorize=False", "torch vectorize=True"):
                print(f"  {ours:16s} / {theirs:22s} {med[ours] / med[theirs]:6.2f}")


if __name__ == "__main__":
    main()
