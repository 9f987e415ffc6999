"""Issue 15's burst without a browser: the server stores a 13,000-event post in parts of 2,000 (each shown once
committed) or in one transaction, while a viewer in another process decodes every WebSocket message as a page does.

    python benchmarks/bench_burst_parts.py [--rounds 6] [--reader parse|receive]

The server runs in a thread of this process (uvicorn, as the tests run it), the viewer (websockets' sync client,
`json.loads` of each message with ``--reader parse``; only receiving with ``receive``) in a subprocess. Per post:
the request until the body is parsed and validated, the store phase (from then to the last commit), the answer,
and the viewer holding every event; medians over rounds that alternate the two ways. The overlap that parts buy
needs a free core for the viewer: on a loaded machine the two ways come out alike (benchmarks/README.md, "the
burst stored and shown in parts").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rtxviz.web.routers.ingest as ingest_route  # noqa: E402
from rtxviz.cli.serve import tune_gc_for_serving  # noqa: E402
from rtxviz.events.emitter import encode_event  # noqa: E402
from rtxviz.store.sqlite import SQLiteStore  # noqa: E402
from rtxviz.web.app import create_app  # noqa: E402
from tests.browser.graphs import gpt_graph  # noqa: E402
from tests.web.server import ThreadServer  # noqa: E402

VIEWER = r"""
import json, sys
from websockets.sync.client import connect
decode = sys.argv[2] == "parse"
n = 0
with connect(sys.argv[1], max_size=None) as ws:
    print("ready", flush=True)
    while n < int(sys.argv[3]):
        m = ws.recv()
        if decode:
            m = json.loads(m)
            n += len(m["events"]) if m["type"] == "events" else 0
        elif m.startswith('{"type":"events"'):
            n += m.count('"seq":')
print("done", flush=True)
"""
#: time.perf_counter() when the body was parsed and validated, and at the last commit
_marks: dict[str, float] = {}


def _instrument() -> None:
    parse, append = ingest_route._parse_ndjson, SQLiteStore.append

    def timed_parse(body, s):  # type: ignore[no-untyped-def]
        out = parse(body, s)
        _marks["parsed"] = time.perf_counter()
        return out

    def timed_append(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = append(self, *args, **kwargs)
        _marks["committed"] = time.perf_counter()
        return out

    ingest_route._parse_ndjson = timed_parse
    SQLiteStore.append = timed_append  # type: ignore[method-assign]


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(f"{url}/api/runs/burst/events", data=body, method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()


def one_post(chunk: int, first: bytes, body: bytes, n: int, reader: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, \
            ThreadServer(create_app(db=f"{tmp}/runs.db", ingest_chunk_events=chunk)) as url:
        _post(url, first)  # the live run exists; the viewer watches from after run_start
        viewer = subprocess.Popen([sys.executable, "-c", VIEWER, url.replace("http", "ws", 1) +
                                   "/api/runs/burst/ws?after=1", reader, str(n)], stdout=subprocess.PIPE, text=True)
        assert viewer.stdout is not None and viewer.stdout.readline().strip() == "ready"
        t0 = time.perf_counter()
        _post(url, body)
        answered = time.perf_counter()
        viewer.stdout.readline()
        has_all = time.perf_counter()
        viewer.wait(30)
    return {"parse_ms": 1e3 * (_marks["parsed"] - t0), "store_ms": 1e3 * (_marks["committed"] - _marks["parsed"]),
            "answered_ms": 1e3 * (answered - t0), "viewer_has_all_ms": 1e3 * (has_all - t0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reader", choices=("parse", "receive"), default="parse")
    args = ap.parse_args()
    _instrument()
    tune_gc_for_serving()
    evs = gpt_graph(n_blocks=12, ops_per_block=481)[:13_001]
    first, body = encode_event(evs[0]), b"\n".join(encode_event(e) for e in evs[1:])
    ways = {"in parts of 2,000": 2000, "one transaction": 100_000}
    results: dict[str, list[dict[str, float]]] = {w: [] for w in ways}
    for r in range(args.rounds):
        for way in (list(ways) if r % 2 == 0 else list(reversed(ways))):
            results[way].append(one_post(ways[way], first, body, len(evs) - 1, args.reader))
    print(f"## a 13,000-event post, viewer '{args.reader}', {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    for way, rs in results.items():
        print(f"  {way}: " + ", ".join(f"{k} {statistics.median(r[k] for r in rs):.0f} "
                                      f"({min(r[k] for r in rs):.0f}-{max(r[k] for r in rs):.0f})" for k in rs[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
