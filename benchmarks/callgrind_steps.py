"""N steps of bench_engine's tiny_mlp_train_modules (eager) or tiny_mlp_train_modules_replay, after three warm-up
steps, for instruction counts that do not depend on the load:

    valgrind --tool=callgrind python benchmarks/callgrind_steps.py replay 300   # and ... replay 0
    (instructions of N = 300 minus those of N = 0) / 300 = instructions per step
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_engine


def main(mode: str, steps: int) -> None:
    make = bench_engine.tiny_mlp_train_modules_replay if mode == "replay" else bench_engine.tiny_mlp_train_modules
    step, _ = make()
    for _ in range(3 + steps):  # the first call captures the graph; N = 0 still runs it, so it cancels out
        step()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("eager", "replay"):
        raise SystemExit("usage: callgrind_steps.py eager|replay N")
    main(sys.argv[1], int(sys.argv[2]))
