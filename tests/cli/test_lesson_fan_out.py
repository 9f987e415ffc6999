"""Lesson 3 (fan-out) says what it runs: its docstring and its Markdown describe ``b = a + a`` summed, and the run
is that graph, with a.grad = 2 (d/da of sum(a + a), by hand)."""

from __future__ import annotations

import re

from rtxviz.events import MemoryTransport
from rtxviz.lessons import find, l03_fan_out, run_lesson


def test_the_run_is_a_plus_a_summed():
    keep = MemoryTransport()
    run_lesson(find("fan-out"), transport=keep)
    ev = keep.events
    (leaf,) = [e for e in ev if e["kind"] == "leaf"]
    nodes = [e for e in ev if e["kind"] == "node"]
    assert [e["op"] for e in nodes] == ["add", "sum"]
    assert nodes[0]["inputs"] == [{"leaf": leaf["id"]}, {"leaf": leaf["id"]}]  # both inputs of the add are a
    (grad,) = [e for e in ev if e["kind"] == "leaf_grad" and e["leaf"] == leaf["id"]]
    assert grad["stats"]["values"] == [2.0]


def test_the_texts_describe_that_run():
    doc = l03_fan_out.__doc__ or ""
    text = find("fan-out").text
    for t in (doc, text):
        assert "b = a + a" in t, t
        # no other expression of `a`: the code computes nothing else
        assert not re.search(r"a \* a|a\*a", t), t
