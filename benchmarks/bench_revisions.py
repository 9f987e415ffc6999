"""Before and after in one run: bench_engine.py's workloads timed in two checkouts of rtxviz, alternating rounds,
each in its own worker process (its own venv and compiled `_native`), so that a refactor is judged by the ratio
after / before on the same machine at the same moment.

    python benchmarks/bench_revisions.py --before /path/to/old/checkout [--after .] [--rounds 5] [--threads 2]

Each checkout needs a venv at CHECKOUT/.venv with rtxviz installed from that checkout (`make setup`); the workload
definitions come from each checkout's own benchmarks/bench_engine.py, so both run exactly the code they shipped.
A ratio near 1.00 means no change; the noise on a shared 2-core machine is a few percent per round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path


def serve(checkout: Path) -> None:
    """Worker: import `checkout`'s bench_engine workloads; answer {"workload", "min_time"} lines with samples."""
    sys.path[:0] = [str(checkout), str(checkout / "benchmarks")]
    # imported here, after the path is set: the workloads and rtxviz of the checkout named on the command line
    import bench_engine
    from harness import time_samples

    import rtxviz

    assert Path(rtxviz.__file__).resolve().is_relative_to(checkout.resolve()), rtxviz.__file__
    built: dict[str, tuple] = {}
    print(json.dumps({"names": list(bench_engine.WORKLOADS), "rtxviz": rtxviz.__file__}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        name = req["workload"]
        if name not in built:
            built[name] = bench_engine.WORKLOADS[name]["rtxviz"]()
        fn, setup = built[name][:2]
        calls = built[name][2] if len(built[name]) > 2 else 1
        samples = time_samples(fn, setup, req["min_time"], calls_per_sample=calls)
        print(json.dumps({"samples": samples}), flush=True)


class Worker:
    def __init__(self, checkout: Path, threads: str) -> None:
        python = checkout / ".venv" / "bin" / "python"
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads, PYTHONPATH="")
        self.proc = subprocess.Popen([str(python), __file__, "--serve", str(checkout)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=checkout)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        hello = json.loads(self.stdout.readline())
        self.names: list[str] = hello["names"]
        print(f"# {checkout}: rtxviz from {hello['rtxviz']}")

    def run(self, name: str, min_time: float) -> list[float]:
        self.stdin.write(json.dumps({"workload": name, "min_time": min_time}) + "\n")
        self.stdin.flush()
        return json.loads(self.stdout.readline())["samples"]

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--after", default=Path(__file__).resolve().parent.parent, type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--threads", default=os.environ.get("RTXVIZ_BENCH_THREADS", "2"))
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    before, after = Worker(args.before, args.threads), Worker(args.after, args.threads)
    names = [n for n in after.names if n in before.names]
    times: dict[str, dict[str, list[float]]] = {n: {"before": [], "after": []} for n in names}
    for r in range(args.rounds):
        # alternate which side goes first, so a slow spell of the machine hits both equally often
        order = [("before", before), ("after", after)] if r % 2 == 0 else [("after", after), ("before", before)]
        for n in names:
            for side, worker in order:
                times[n][side] += worker.run(n, args.min_time)
    before.close()
    after.close()
    ratios = {}
    print(f"{'workload':24s} {'before':>12s} {'after':>12s} {'after/before':>13s}")
    for n in names:
        b, a = statistics.median(times[n]["before"]), statistics.median(times[n]["after"])
        ratios[n] = a / b
        print(f"{n:24s} {b * 1e6:10.2f}us {a * 1e6:10.2f}us {a / b:13.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(ratios, indent=2))
    return ratios


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(Path(sys.argv[2]))
    else:
        main()
