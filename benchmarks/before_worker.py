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
    # the request loop is this tree's (an older harness may not have it), under another name than the older
    # tree's harness, which times the workloads
    spec_this = importlib.util.spec_from_file_location("harness_this", Path(here) / "harness.py")
    assert spec_this is not None and spec_this.loader is not None
    this = importlib.util.module_from_spec(spec_this)
    spec_this.loader.exec_module(this)
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
    this.serve_requests(lambda name: bench.WORKLOADS[name]["rtxviz"](), harness.time_samples)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
