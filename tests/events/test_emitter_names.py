"""The emitter never loses a run for text it can escape (issue 17.4): an undecodable script name (PEP 383 lone
surrogates, as ``sys.argv[0]`` holds for a file name that is not UTF-8) and lone surrogates in event fields reach a
real server, replaced by U+FFFD, with nothing dropped.
"""

from __future__ import annotations

import json
import sys
import urllib.request

import pytest

import rtxviz.events as events
from rtxviz.web import create_app

from ..web.server import ThreadServer

pytestmark = pytest.mark.timeout(120)


def runs(url: str) -> dict[str, dict]:
    with urllib.request.urlopen(f"{url}/api/runs") as r:
        return {run["id"]: run for run in json.loads(r.read())}


def stored(url: str, run_id: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/runs/{run_id}/events?limit=10000") as r:
        return json.loads(r.read())["events"]


@pytest.mark.parametrize("how", ["run_name", "argv"])
def test_an_undecodable_script_name_does_not_drop_the_run(tmp_path, monkeypatch, how):
    # before: watch(run_name="train\udcff.py") made every batch fail to encode, so the whole run was dropped
    name = "train\udcff.py"
    if how == "argv":
        monkeypatch.setattr(sys, "argv", [f"/tmp/{name}"])
    with ThreadServer(create_app(db=str(tmp_path / "runs.db"))) as url:
        with events.watch(url, run_name=name if how == "run_name" else None, close_timeout=10,
                          meta={"script": f"/tmp/{name}"}, flush_interval=0.01) as run:
            run.emit("my_tool.note", text="bad \ud800 byte", fine="ünï")
            with run.step(0):
                pass
        assert run.stats()["dropped"] == 0 and run.stats()["failed_batches"] == 0, run.stats()
        rec = runs(url)[run.id]
        assert rec["name"] == "train\ufffd.py" and rec["meta"] == {"script": "/tmp/train\ufffd.py"}
        evs = stored(url, run.id)
        assert rec["n_events"] == len(evs) == run.stats()["sent"]
        note = next(e for e in evs if e["kind"] == "my_tool.note")
        assert note["text"] == "bad \ufffd byte" and note["fine"] == "ünï"
