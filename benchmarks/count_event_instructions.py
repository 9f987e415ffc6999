"""What recording costs per node event, as callgrind's instruction count: the wall clock of a shared 2-core box
swings by tens of percent, the count of executed instructions for the same code and inputs does not.

    python benchmarks/count_event_instructions.py --before OLD_CHECKOUT [--after .] [--workloads primitive]

Each checkout runs bench_events.py's two mlp_train workloads (nn.Sequential + CrossEntropyLoss, and the same MLP
in 16 primitive ops) once with a capturing hook and backward's freeing turned off, so that every forward op's
(op, node, inputs, output) stays alive; then, under `valgrind --tool=callgrind`, an EventHook with a null sink
replays `forward_postprocess` over those ops, `--passes` and 3 x `--passes` times (its per-step maps cleared
before each pass: each step's activations are new buffers, parameters are seen again). The difference divided
by the extra node events is what one node event costs in the training thread: the event dict, its `saved` list,
the NaN/Inf checks of its output. No matrix product runs under valgrind, so a run takes a minute, not ten.
Both checkouts run with the Python of `--python` (default: this one), each importing its own rtxviz.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from count_instructions import callgrind  # the same runner (benchmarks/ is this script's folder)

RUNNER = """
import sys
sys.path[:0] = [{checkout!r}, {checkout!r} + "/benchmarks"]
import bench_events as be
import rtxviz
from rtxviz.engine import hooks
from rtxviz.engine.graph import TapeNode
from rtxviz.events.hook import EventHook
assert rtxviz.__file__.startswith({checkout!r}), rtxviz.__file__

calls = []

class Capture(EventHook):
    def forward_postprocess(self, op, node, inputs, output):
        if node is not None:
            calls.append((op, node, inputs, output))

state = be.mlp_setup()
step = be.mlp_train_step() if {workload!r} == "mlp_train" else (lambda: be.mlp_step(*state))
step()  # leaves (parameters, data) seen once, as in a run past its first step
TapeNode.release = lambda self: None  # keep what backward would free: the replay reads the saved tensors
with Capture(lambda e: None):
    step()
hook = EventHook(lambda e: None)
with hook:  # leaves get their ids and leaf events here, once
    for c in calls:
        hook.forward_postprocess(*c)
for _ in range({passes}):
    hook._finite.clear()
    getattr(hook, "_buffers", {{}}).clear()
    for c in calls:
        hook.forward_postprocess(*c)
print(len(calls))
"""


def instructions(python: Path, checkout: Path, workload: str, passes: int) -> tuple[int, int]:
    """(instructions of the whole process, node events per pass)."""
    total, events = callgrind(python, RUNNER.format(checkout=str(checkout), workload=workload, passes=passes),
                              checkout)
    return total, int(events)


def per_event(python: Path, checkout: Path, workload: str, passes: int) -> tuple[float, int]:
    subprocess.run([str(python), "-c", "import rtxviz.events, bench_events"], check=True,
                   cwd=checkout / "benchmarks", env=dict(os.environ, PYTHONPATH=str(checkout)))  # .pyc first
    few, events = instructions(python, checkout, workload, passes)
    many, _ = instructions(python, checkout, workload, 3 * passes)
    return (many - few) / (2 * passes * events), events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path, action="append",
                    help="a checkout to compare (repeat for more than one)")
    ap.add_argument("--after", default=Path(__file__).resolve().parent.parent, type=Path)
    ap.add_argument("--python", default=Path(sys.executable), type=Path)
    ap.add_argument("--passes", type=int, default=40)
    ap.add_argument("--workloads", default="primitive,mlp_train", help="comma-separated: primitive, mlp_train")
    args = ap.parse_args()
    checkouts = [*args.before, args.after]
    print(f"{'workload':10s} {'checkout':40s} {'events/step':>11s} {'instructions/event':>19s}")
    for workload in args.workloads.split(","):
        for c in checkouts:
            n, events = per_event(args.python, c.resolve(), workload, args.passes)
            print(f"{workload:10s} {str(c):40s} {events:11d} {n:19,.0f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
