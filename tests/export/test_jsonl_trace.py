"""JSON-lines export/import and Chrome trace JSON."""

from __future__ import annotations

import json
import urllib.request

import pytest

import rtxviz
from rtxviz import Tensor, Variable
from rtxviz.engine.checkpoint import checkpoint
from rtxviz.export import (
    chrome_trace,
    events_from_db,
    events_from_server,
    import_jsonl,
    import_jsonl_to_db,
    read_jsonl,
    trace_recorder,
    write_jsonl,
)
from rtxviz.render import GraphModel
from rtxviz.schema import validate_batch
from rtxviz.web import create_app

from ..web.server import ThreadServer
from .conftest import record_run


def test_jsonl_round_trip_without_seq(tmp_path, run_events):
    path = str(tmp_path / "run.jsonl")
    assert write_jsonl(run_events, path) == len(run_events)
    back = list(read_jsonl(path))
    assert all("seq" not in e for e in back)
    assert back == [{k: v for k, v in e.items() if k != "seq"} for e in run_events]
    validate_batch(back)  # exactly what the ingest endpoint accepts


def test_import_into_db_and_render_the_same_graph(tmp_path, run_events):
    path = str(tmp_path / "run.jsonl")
    write_jsonl(run_events, path)
    db = str(tmp_path / "runs.db")
    run_id = import_jsonl_to_db(path, db)
    got_id, got = events_from_db(db, "exported-demo")
    assert got_id == run_id and [e["seq"] for e in got] == list(range(1, len(run_events) + 1))
    a, b = GraphModel.from_events(got), GraphModel.from_events(run_events)
    assert [(n.label, n.shape) for n in a.nodes.values()] == [(n.label, n.shape) for n in b.nodes.values()]


def test_import_over_http_into_a_running_server(tmp_path, run_events):
    path = str(tmp_path / "run.jsonl")
    write_jsonl(run_events, path)
    with ThreadServer(create_app(db=":memory:")) as url:
        run_id = import_jsonl(path, url, batch=7)   # several batches
        got_id, got = events_from_server(url, "latest")
    assert got_id == run_id
    assert [e["kind"] for e in got] == [e["kind"] for e in run_events]


def test_import_over_http_refuses_a_run_id_the_server_has(tmp_path, run_events):
    """Review (eighteenth session): importing twice with one --run-id appended the file to the first import (two
    run_starts, every step twice), where `import --db` refuses."""
    path = str(tmp_path / "run.jsonl")
    write_jsonl(run_events, path)
    with ThreadServer(create_app(db=":memory:")) as url:
        import_jsonl(path, url, run_id="imp1")
        with pytest.raises(rtxviz.RtxvizError, match="already has a run 'imp1'"):
            import_jsonl(path, url, run_id="imp1")
        _, got = events_from_server(url, "imp1")
    assert len(got) == len(run_events)


def test_import_over_http_checks_the_whole_file_before_posting(tmp_path, run_events):
    """Review: a bad event in a later batch left the first batches stored as a partial run."""
    path = str(tmp_path / "run.jsonl")
    bad = [dict(e) for e in run_events]
    bad[len(bad) - 2] = {**bad[-2], "kind": None}
    write_jsonl(bad, path)
    with ThreadServer(create_app(db=":memory:")) as url:
        with pytest.raises(rtxviz.RtxvizError, match=f"event {len(bad) - 2}"):
            import_jsonl(path, url, run_id="part1", batch=7)
        with urllib.request.urlopen(f"{url}/api/runs") as resp:
            runs = json.loads(resp.read())
    assert all(r["id"] != "part1" for r in (runs["runs"] if isinstance(runs, dict) else runs))


def test_chrome_trace_from_events(run_events):
    trace = chrome_trace(run_events)
    json.dumps(trace, allow_nan=False)
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    fwd = [e for e in xs if e["cat"] == "forward"]
    bwd = [e for e in xs if e["cat"] == "backward" and e["name"] != "backward pass"]
    n_nodes = sum(e["kind"] == "node" for e in run_events)
    n_grads = sum(e["kind"] == "grad" for e in run_events)
    assert len(fwd) == n_nodes and len(bwd) == n_grads
    assert [e["name"] for e in fwd[:4]] == ["linear", "relu", "linear", "sum"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 and e["pid"] == 1 for e in xs)
    assert sorted(e["name"] for e in xs if e["cat"] == "step") == ["step 0", "step 1"]
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"forward", "backward", "recompute", "steps"}


def test_chrome_trace_shows_checkpoint_recompute():
    events = record_run(steps=1, with_checkpoint=True)
    xs = [e for e in chrome_trace(events)["traceEvents"] if e["ph"] == "X"]
    rec = [e for e in xs if e["cat"] == "recompute"]
    assert len(rec) == 1 and rec[0]["name"].startswith("recompute segment")


def test_live_trace_recorder_times_forward_backward_and_recompute(tmp_path):
    rtxviz.manual_seed(0)
    w = Variable.from_tensor(Tensor.ones([4, 4]), name="w")
    x = Tensor.ones([2, 4])

    def block(h):
        return (h @ w).relu()

    with trace_recorder() as rec:
        checkpoint(block, x).sum().backward()
    xs = [e for e in rec.trace()["traceEvents"] if e["ph"] == "X"]
    cats = {}
    for e in xs:
        cats.setdefault(e["cat"], []).append(e["name"])
    assert "sum" in cats["forward"]
    assert any(n.startswith("recompute segment") for n in cats["recompute"])
    assert {"matmul", "relu"} <= set(cats["recompute"])   # the segment's ops ran again inside backward
    assert "backward pass" in cats["backward"]
    for e in xs:
        assert e["dur"] >= 0
    path = rec.save(str(tmp_path / "trace.json"))
    assert json.load(open(path))["traceEvents"]
