"""conv_train and bn_conv_train (bench_training.py's definitions) in three worker processes, PyTorch, an older
rtxviz checkout and this one, in alternating rounds; each call timed by the wall clock and by its thread's CPU
time (time.thread_time).

    RTXVIZ_BENCH_BEFORE=/tmp/before python benchmarks/bench_conv_ab.py [--rounds 9] [--min-time 1.0]
        [--threads 1|N|default] [--only conv_train,bn_conv_train] [--torch-python /tmp/torchvenv/bin/python]

At 1 thread the CPU time is the steadier measure on a shared machine (a worker that loses its core for a while
is not charged for it); at more threads it counts only the calling thread, so only the wall clock is printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def serve(kind: str, root: str) -> None:
    """The worker: one JSON request per line, {"workload", "min_time"}; answers {"wall": [...], "cpu": [...]}."""
    if kind == "torch":
        sys.path.insert(0, str(HERE))
        import torch_training_workloads  # noqa: F401  (registers the training workloads)
        from torch_workloads import REGISTRY

        def build(name: str) -> tuple:
            return REGISTRY[name]()
    else:
        sys.path[:0] = [root, root + "/benchmarks"]
        import bench_training

        def build(name: str) -> tuple:
            return bench_training.WORKLOADS[name]["rtxviz"]()
    print(json.dumps({"ready": kind}), flush=True)
    built: dict[str, tuple] = {}
    for line in sys.stdin:
        req = json.loads(line)
        name = req["workload"]
        if name not in built:
            built[name] = build(name)
        fn, setup = built[name][0], built[name][1]
        for _ in range(3):
            fn()
        gc.collect()
        gc.disable()
        wall: list[float] = []
        cpu: list[float] = []
        while sum(wall) < req["min_time"] or len(wall) < 5:
            if setup is not None:
                setup()
            c0, t0 = time.thread_time(), time.perf_counter()
            fn()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
        gc.enable()
        print(json.dumps({"wall": wall, "cpu": cpu}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--threads", default="1", help="N, or 'default' to set nothing")
    ap.add_argument("--only", default="conv_train,bn_conv_train")
    ap.add_argument("--torch-python", default=os.environ.get("RTXVIZ_TORCH_PYTHON", "/tmp/torchvenv/bin/python"))
    args = ap.parse_args()
    before = os.environ.get("RTXVIZ_BENCH_BEFORE")
    if not before:
        sys.exit("set RTXVIZ_BENCH_BEFORE to an older checkout (with its built rtxviz/_native*.so)")
    env = dict(os.environ)
    if args.threads != "default":
        env.update(OMP_NUM_THREADS=args.threads, MKL_NUM_THREADS=args.threads, OPENBLAS_NUM_THREADS=args.threads,
                   RTXVIZ_BENCH_THREADS=args.threads)
    me = str(Path(__file__).resolve())
    cmds = {"torch": [args.torch_python, me, "--serve", "torch", ""],
            "before": [sys.executable, me, "--serve", "rtxviz", before],
            "after": [sys.executable, me, "--serve", "rtxviz", str(HERE.parent)]}
    workers = {k: subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
               for k, c in cmds.items()}
    for w in workers.values():
        json.loads(w.stdout.readline())
    names = args.only.split(",")
    print(f"# threads {args.threads}; before = {before}; load average {os.getloadavg()}")
    res = {n: {k: {"wall": [], "cpu": []} for k in workers} for n in names}
    for _ in range(args.rounds):
        for n in names:
            for k, w in workers.items():
                w.stdin.write(json.dumps({"workload": n, "min_time": args.min_time}) + "\n")
                w.stdin.flush()
                answer = json.loads(w.stdout.readline())
                for m in ("wall", "cpu"):
                    res[n][k][m].append(statistics.median(answer[m]))
    for n in names:
        for m in (("cpu", "wall") if args.threads == "1" else ("wall",)):
            med = {k: statistics.median(res[n][k][m]) * 1e3 for k in workers}
            print(f"{n:14s} {m:4s} torch {med['torch']:8.2f} ms   before {med['before']:8.2f} ms "
                  f"({med['before'] / med['torch']:.2f})   after {med['after']:8.2f} ms "
                  f"({med['after'] / med['torch']:.2f})   after/before {med['after'] / med['before']:.3f}")
    print(f"# load average {os.getloadavg()}")
    for w in workers.values():
        w.stdin.close()
        w.wait(timeout=30)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        main()
