"""Per-op overhead as instruction counts, for before/after comparisons on a busy machine: wall-clock timings on a
shared 2-core box swing by tens of percent, while callgrind's count of executed instructions for the same code and
inputs repeats to a fraction of a percent whatever else runs.

    python benchmarks/count_instructions.py --before /path/to/old/checkout [--after .] [--calls 300]

Each checkout's own .venv runs its own benchmarks/bench_engine.py workload under `valgrind --tool=callgrind`
twice, with `--reps` and with 3 x `--reps` repetitions of the body after five warming calls (the replay row
captures its graph in the first); imports and set-up cost
the same in both runs (a plain run first compiles the .pyc files), so the difference divided by the extra calls is
the instructions one call costs.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOADS = ["per_op/add_nograd", "per_op/add_requires_grad", "per_op/mul_sum_backward", "tiny_mlp_train",
             "tiny_mlp_train_modules", "tiny_mlp_train_modules_replay"]

RUNNER = """
import sys
sys.path[:0] = [{checkout!r}, {checkout!r} + "/benchmarks"]
import bench_engine
built = bench_engine.WORKLOADS[{name!r}]["rtxviz"]()
fn, setup = built[0], built[1]
calls = built[2] if len(built) > 2 else 1
for _ in range(5):  # warm-up: a graph-cache row captures on its first call, and caches settle
    if setup: setup()
    fn()
for _ in range({reps}):
    if setup: setup()
    fn()
print(calls)
"""


def callgrind(python: Path, script: str, checkout: Path) -> tuple[int, str]:
    """Run `script` under `python` in callgrind, in `checkout`, on one BLAS thread with a fixed hash seed: (the
    instructions the whole process executed, the last line it printed). Deterministic whatever else the machine
    does."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.py"
        path.write_text(script)
        out = Path(tmp) / "callgrind.out"
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONPATH="")
        proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(python),
                               str(path)], capture_output=True, text=True, env=env, cwd=checkout, check=True)
        total = re.search(r"Collected : (\d+)", proc.stderr)
        assert total is not None, proc.stderr[-2000:]
        return int(total.group(1)), proc.stdout.strip().splitlines()[-1]


def instructions(checkout: Path, name: str, reps: int) -> tuple[int, int]:
    """(total instructions of `reps` timed repetitions after the warm-up, calls per repetition)."""
    total, calls = callgrind(checkout / ".venv" / "bin" / "python",
                             RUNNER.format(checkout=str(checkout), name=name, reps=reps), checkout)
    return total, int(calls)


def per_call(checkout: Path, name: str, reps: int) -> float:
    python = checkout / ".venv" / "bin" / "python"
    subprocess.run([str(python), "-c", "import rtxviz, bench_engine"], check=True, cwd=checkout / "benchmarks",
                   env=dict(os.environ, PYTHONPATH=str(checkout)))  # .pyc files written before counting
    few, calls = instructions(checkout, name, reps)
    many, _ = instructions(checkout, name, 3 * reps)
    return (many - few) / (2 * reps * calls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--after", default=Path(__file__).resolve().parent.parent, type=Path)
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each workload body (per_op: 2000 calls)")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in WORKLOADS if not args.only or n in args.only.split(",")]
    print(f"{'workload':26s} {'before':>14s} {'after':>14s} {'after/before':>13s}   (instructions per call)")
    for n in names:
        b, a = per_call(args.before, n, args.reps), per_call(args.after, n, args.reps)
        print(f"{n:26s} {b:14,.0f} {a:14,.0f} {a / b:13.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
