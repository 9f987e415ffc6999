"""A backward that raises (a saved tensor modified in place) reaches the event stream: an `anomaly` event with
reason "error" at the node, then `backward_end`, so the page marks the node and stops showing a running pass."""

from __future__ import annotations

import numpy as np
import pytest

from rtxviz import Variable
from rtxviz.engine.versions import InplaceError
from rtxviz.events import EventHook
from rtxviz.schema import validate_batch


def test_an_in_place_error_marks_its_node_and_ends_the_pass() -> None:
    events: list[dict] = []
    a = Variable(np.array([1.0, 2.0]), requires_grad=True)
    with EventHook(events.append):
        h = a * 1.0
        z = h * h
        h.add_(1.0)
        with pytest.raises(InplaceError):
            z.sum().backward()
    validate_batch(events)
    mul = next(e for e in events if e["kind"] == "node" and e["id"] == z.grad_fn.id)
    marks = [e for e in events if e["kind"] == "anomaly"]
    assert [(m["reason"], m["node"], m["op"]) for m in marks] == [("error", mul["id"], "mul")]
    assert "modified in place" in marks[0]["message"] and marks[0]["message"].startswith("InplaceError")
    assert [e["kind"] for e in events][-2:] == ["anomaly", "backward_end"]
