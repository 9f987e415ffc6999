"""What the per-step history (issue 16) costs the store: bytes per step and ingest CPU per step.

A recorded step of the ~2,500-node GPT-like graph of the browser tests (tests/browser/graphs.py: every op's node
and grad event, the parameters' leaf_grad, one optimizer_step for them all) is appended `--steps` times to a SQLite
file, one batch of 2,000 events at a time (the emitter's batch size), then one history read (the SQLite store
makes the history when it is read: this is what a page that follows the run with a value's history open costs it),
by two stores in turn: `SQLiteStore` as it is, and the same store with the history switched off (its
`_catch_up_history` a no-op), alternating step by step so the machine's load falls on both alike. Reported: the
median time per step of each, their difference (the history's cost), the history's own CPU (HistoryTracker.rows
alone, per step), and from SQLite's dbstat the bytes of the history tables per step beside the events' bytes per
step.

    python benchmarks/bench_history.py [--steps 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rtxviz.web.routers.history  # noqa: E402,F401  (as in the server: the history decodes with orjson)
from rtxviz.store import SQLiteStore  # noqa: E402
from rtxviz.store import history as store_history  # noqa: E402
from tests.browser.graphs import gpt_graph  # noqa: E402

BATCH = 2000


class NoHistory(SQLiteStore):
    """The store with the history switched off: the baseline."""

    def _catch_up_history(self, run_id):  # type: ignore[no-untyped-def]
        return None


def one_step(step: int, base: list[dict]) -> list[tuple[str, int | None, str]]:
    """Step `step` of the run: the recorded step's events with its step number (the leaves announced at step 0
    only), the parameters' leaf_grad and one optimizer_step."""
    evs = []
    params = [e for e in base if e["kind"] == "leaf" and e.get("param")]
    for e in base:
        if e["kind"] in ("run_start", "run_end") or (e["kind"] == "leaf" and step):
            continue
        evs.append({**e, "step": step})
    stats = {"shape": [4], "norm": 0.5 + step, "min": -1.0, "max": 1.0}
    evs += [{"v": 1, "kind": "leaf_grad", "t": 0.0, "step": step, "leaf": p["id"], "stats": stats} for p in params]
    evs.append({"v": 1, "kind": "optimizer_step", "t": 0.0, "step": step, "optimizer": "AdamW", "params": [
        {"leaf": p["id"], "name": p["name"], "grad_norm": 0.5 + step, "param_norm": 3.0, "update_norm": 0.003,
         "update_ratio": 0.001} for p in params]})
    return [(e["kind"], e.get("step"), json.dumps(e, separators=(",", ":"))) for e in evs]


def table_bytes(path: str) -> dict[str, int]:
    import sqlite3

    con = sqlite3.connect(path)
    rows = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    con.close()
    return dict(rows)


def append_step(store: SQLiteStore, run: str, rows: list) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        store.append(run, None, rows[i:i + BATCH])
    store.history(run, "L:none")  # takes in the step's events (no value has that name: nothing to answer)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    base = gpt_graph(n_blocks=12, ops_per_block=200)
    steps = [one_step(s, base) for s in range(args.steps)]
    with tempfile.TemporaryDirectory() as tmp:
        on, off = SQLiteStore(f"{tmp}/on.db"), NoHistory(f"{tmp}/off.db")
        t_on, t_off = [], []
        for rows in steps:  # alternate: the load falls on both alike
            t_on.append(append_step(on, "r", rows))
            t_off.append(append_step(off, "r", rows))
        on.close()
        off.close()
        size = table_bytes(f"{tmp}/on.db")
        # the history's own CPU, with the server's decoder (orjson) and the store's default (json)
        t_rows: dict[str, list[float]] = {"orjson": [], "json": []}
        n_rows = 0
        fast = store_history._loads
        for name, loads in (("orjson", fast), ("json", json.loads)):
            store_history.use_decoder(loads)
            tracker = store_history.HistoryTracker()
            for rows in steps:
                t0 = time.perf_counter()
                n_rows = len(tracker.rows("r", rows))
                t_rows[name].append(time.perf_counter() - t0)
        store_history.use_decoder(fast)
    hist = size.get("history", 0)
    names = size.get("history_names", 0) + sum(v for k, v in size.items() if k.startswith("sqlite_autoindex_history"))
    events = size.get("events", 0) + size.get("events_kind", 0)
    ms = lambda xs: round(statistics.median(xs) * 1000, 2)  # noqa: E731
    out = {
        "steps": args.steps, "events_per_step": len(steps[0]), "history_rows_per_step": n_rows,
        "append_ms_per_step_with_history": ms(t_on), "append_ms_per_step_without": ms(t_off),
        "history_ingest_ms_per_step": round(ms(t_on) - ms(t_off), 2),
        "history_rows_cpu_ms_per_step_orjson": ms(t_rows["orjson"]),
        "history_rows_cpu_ms_per_step_json": ms(t_rows["json"]),
        "history_bytes_per_step": round(hist / args.steps),
        "history_bytes_per_row": round(hist / args.steps / n_rows, 1),
        "history_names_bytes_once": names, "events_bytes_per_step": round(events / args.steps),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
