"""An older checkout's side of a benchmark, served to harness.py as the PyTorch side is, so that before and after
alternate round by round in one run (RTXVIZ_BENCH_BEFORE=<dir of an older checkout>, e.g. a `git archive` of it
plus the built rtxviz/_native*.so).

    python benchmarks/before_worker.py --serve --root /tmp/before --script bench_engine.py

It imports `rtxviz` and `<root>/benchmarks/<script>` from the older tree only (this file's own directory is taken
off sys.path first: its harness.py and bench_*.py are the new ones) and answers one JSON line per request with
the samples of that script's `WORKLOADS[name]["rtxviz"]` factory, timed by the older tree's own harness.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path


def _arg(flag: str) -> str:
    i = sys.argv.index(flag)
    return sys.argv[i + 1]


def serve() -> None:
    root = Path(_arg("--root")).resolve()
    script = _arg("--script")
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p not in (here, "")]
    sys.path[:0] = [str(root), str(root / "benchmarks")]
    spec = importlib.util.spec_from_file_location("before_bench", root / "benchmarks" / script)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import harness  # the older tree's (its benchmarks/ is first on sys.path now)

    import rtxviz

    if not str(Path(rtxviz.__file__).resolve()).startswith(str(root)):
        raise SystemExit(f"before_worker: imported rtxviz from {rtxviz.__file__}, not from {root}")
    rtxviz.manual_seed(0)
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or "default"
    print(json.dumps({"before": str(root), "threads": threads}), flush=True)
    built: dict[str, tuple] = {}
    for line in sys.stdin:
        req = json.loads(line)
        name = req["workload"]
        try:
            if name not in built:
                built[name] = bench.WORKLOADS[name]["rtxviz"]()
            fn, setup = built[name][:2]
            calls = built[name][2] if len(built[name]) > 2 else 1
            samples = harness.time_samples(fn, setup, req["min_time"], calls_per_sample=calls)
            print(json.dumps({"samples": samples}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": f"{name}: {type(exc).__name__}: {exc}"}), flush=True)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
