"""`rtxviz serve` runs uvicorn with the collector tuned for ingest (benchmarks/README.md, server round 6): what
start-up made is frozen and the first threshold raised; nothing else in the process is touched before that."""

from __future__ import annotations

import gc

import uvicorn

from rtxviz import cli
from rtxviz.cli.serve import SERVE_GC_THRESHOLD


def test_serve_runs_uvicorn_with_the_collector_tuned(tmp_path, monkeypatch):
    seen: dict[str, object] = {}

    def run(self: uvicorn.Server, sockets: list) -> None:  # instead of serving: what the server would run under
        seen["threshold"], seen["frozen"] = gc.get_threshold(), gc.get_freeze_count()
        for sock in sockets:
            sock.close()

    monkeypatch.setattr(uvicorn.Server, "run", run)
    saved = gc.get_threshold()
    assert saved[0] != SERVE_GC_THRESHOLD and gc.get_freeze_count() == 0  # the test process is as CPython makes it
    try:
        assert cli.main(["serve", "--port", "0", "--db", str(tmp_path / "r.db"), "--nice", "0"]) == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)
    assert seen["threshold"] == (SERVE_GC_THRESHOLD, saved[1], saved[2])
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 1000  # the modules and the app, at least
