"""The HTML and Chrome-trace exports of a PyTorch run's events."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import rtxviz.torch as rt  # noqa: E402
from rtxviz.export import app_is_built, chrome_trace, export_html  # noqa: E402

from .test_checkpoint import Net  # noqa: E402


def _run():
    torch.manual_seed(0)
    model = Net(reentrant=True)
    with rt.record(model) as rec:
        with rec.step(0):
            model(torch.randn(2, 3)).sum().backward()
    return rec.events


def test_chrome_trace_has_forward_ops_backward_and_the_recomputed_segment():
    events = _run()
    trace = chrome_trace(events)["traceEvents"]
    forward = [e for e in trace if e.get("cat") == "forward"]
    assert [e["name"] for e in forward] == [e["op"] for e in events if e["kind"] == "node" and not e.get("recomputed")
                                            ] + [e["op"] for e in events if e.get("recomputed")]
    assert all(e["dur"] >= 0 for e in trace if "dur" in e)  # node events carry forward's time, in order
    assert any(e.get("cat") == "recompute" and e["name"] == "recompute segment 1" for e in trace)
    assert sum(e.get("cat") == "backward" and e["name"].endswith(" backward") for e in trace) == sum(
        e["kind"] == "grad" for e in events)
    assert any(e["name"] == "step 0" for e in trace)


def test_html_export_embeds_the_run(tmp_path):
    if not app_is_built():
        pytest.skip("the viewer is not built (make setup builds it)")
    events = _run()
    path = export_html([{**e, "seq": i + 1} for i, e in enumerate(events)], str(tmp_path / "run.html"),
                       run={"id": "torch-run", "name": "torch"})
    text = open(path, encoding="utf-8").read()
    assert "<html" in text.lower() and json.dumps("CheckpointFunctionBackward") in text
