"""Where a watched mlp_train step's recording time goes: the time inside each `EventHook` entry point per step,
with the compiled event passes and with the Python paths they replace, alternating in one process.

    python benchmarks/bench_hook_time.py [--threads N|default] [--rounds 40] [--steps 25]

The hook reports into a null sink (no encoding, no sender, no server: `bench_events.py mlp` measures those).
"compiled" is the package as installed; "python" sets the compiled builders the hook and the summaries call
(`stats`, `all_finite`, `saved_entries`) to None, so the same steps take the Python code beside them. Each round
runs one block of `--steps` steps of each, in a random order; the figures are medians over the rounds of each
block's time per step. `time.perf_counter` around every entry point costs the same in both (about 0.1 us a
call, some 40 calls a step). The hook's time inside a training step is several times what the same calls take
warm in a loop of their own (the numpy calls between them evict the interpreter's caches): this measures it
there.
"""

from __future__ import annotations

import collections
import os
import random
import statistics
import sys
import time
from pathlib import Path


def _take(argv: list[str], flag: str, default: str | None) -> str | None:
    if flag in argv:
        i = argv.index(flag)
        value = argv[i + 1]
        del argv[i:i + 2]
        return value
    return default


_ARGS = sys.argv[1:] if __name__ == "__main__" else []
_THREADS = _take(_ARGS, "--threads", None)
if _THREADS is None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
elif _THREADS == "default":
    # empty, not unset: bench_events (imported below) sets one thread when the variable is unset, and an empty
    # one is OpenBLAS's own default (until the sixteenth session this script measured one thread here)
    os.environ["OPENBLAS_NUM_THREADS"] = ""
else:
    os.environ["OPENBLAS_NUM_THREADS"] = _THREADS


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_events import mlp_train_step  # noqa: E402  (the workload as bench_events.py mlp runs it)

from rtxviz import events  # noqa: E402
from rtxviz.events import hook as hook_module  # noqa: E402
from rtxviz.events.hook import EventHook  # noqa: E402
from rtxviz.summary import stats as stats_module  # noqa: E402

ENTRY_POINTS = ("forward_postprocess", "backward_begin", "backward_postprocess", "leaf_grad", "backward_end", "event")
#: (module, name) of each compiled builder the "python" variant switches off
COMPILED = ((stats_module, "native_stats"), (stats_module, "native_all_finite"),
            (hook_module, "_native_saved_entries"))


def main(rounds: int, steps: int) -> None:
    spent: collections.Counter = collections.Counter()

    def timed(name: str):
        fn = getattr(EventHook, name)

        def wrapper(self, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(self, *args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0
        return wrapper

    for name in ENTRY_POINTS:
        setattr(EventHook, name, timed(name))
    compiled = {(m, n): getattr(m, n) for m, n in COMPILED}
    missing = [n for (m, n), f in compiled.items() if f is None]
    if missing:
        sys.exit(f"the compiled module lacks {missing}: build it (python setup.py build_ext --inplace)")

    def use(kind: str) -> None:
        for (m, n), f in compiled.items():
            setattr(m, n, f if kind == "compiled" else None)

    step = mlp_train_step()
    run = events.Run(transport=None, run_name="hook-time")
    run.hook.sink = lambda ev: None  # events thrown away
    events.emitter._hooks.add_hook(run.hook)
    events.emitter._CURRENT.append(run)  # so that the optimizer's report reaches it
    for _ in range(20):
        step()
    per: dict[str, dict[str, list[float]]] = {k: collections.defaultdict(list) for k in ("compiled", "python")}
    rng = random.Random(0)
    for _ in range(rounds):
        for kind in rng.sample(list(per), 2):
            use(kind)
            spent.clear()
            for _ in range(steps):
                step()
            for name in ENTRY_POINTS:
                per[kind][name].append(spent[name] / steps)
            per[kind]["all"].append(sum(spent.values()) / steps)
    use("compiled")
    print(f"# OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS') or 'unset or empty (OpenBLAS default)'}; "
          f"{rounds} rounds of {steps} steps each; us per mlp_train step inside each entry point, median of rounds")
    print(f"  {'entry point':22s} {'python':>9s} {'compiled':>9s}")
    for name in (*ENTRY_POINTS, "all"):
        py, c = (1e6 * statistics.median(per[k][name]) for k in ("python", "compiled"))
        print(f"  {name:22s} {py:9.1f} {c:9.1f}   {c - py:+7.1f}")


if __name__ == "__main__":
    main(int(_take(_ARGS, "--rounds", "40") or 40), int(_take(_ARGS, "--steps", "25") or 25))
