"""SVG/PNG/PDF through graphviz (skipped without `dot`), errors, Jupyter display (the render command: tests/cli)."""

from __future__ import annotations

import stat

import pytest

import rtxviz
import rtxviz.render as R
from rtxviz import Tensor, Variable, nn
from rtxviz.render import GraphvizNotFound, RenderTimeout, capture_grads, render
from rtxviz.summary import CLASSES

from ._svg import parse

needs_dot = pytest.mark.skipif(R.find_dot() is None,
                               reason="graphviz `dot` is not installed (apt-get install graphviz)")


def _leaf(values, name):
    return Variable.from_tensor(Tensor.from_slice(values, [len(values)], dtype="float64"), name=name)


@needs_dot
def test_svg_nodes_edges_labels_and_marks(tmp_path):
    x, z, w = _leaf([1.0, 2.0], "x"), _leaf([1.0, 1.0], "z"), _leaf([0.0, 1.0], "w")
    with capture_grads() as grads:
        loss = (x * 3.0).sum() + (z * 1e4).sum() + w.sqrt().sum() + (x * 1e-9).sum()
        loss.backward()
    path = render(loss, str(tmp_path / "g.svg"), grads=grads)
    svg = parse(open(path, "rb").read())
    nodes = svg["nodes"]
    labels = {k: v["texts"][0] for k, v in nodes.items()}
    assert {"x", "z", "w", "mul_scalar", "sqrt", "sum", "add"} <= set(labels.values())
    by = {v["texts"][0]: v for v in nodes.values()}
    assert "rtx-nonfinite" in by["w"]["class"] and by["w"]["stroke"] == CLASSES["nonfinite"].colour
    assert "rtx-exploding" in by["z"]["class"]
    outputs = [v["texts"][0] for v in nodes.values() if "rtx-output" in v["class"]]
    assert outputs == ["add"]
    # x gets 3·[1,1] + 1e-9·[1,1] -> ‖grad‖ = (3 + 1e-9)·√2 ≈ 4.24
    assert "‖grad‖ 4.24" in by["x"]["texts"]
    # the edge from x into x*3 carries 3·[1,1]; into x*1e-9 carries 1e-9·[1,1] (vanishing)
    x_key = next(k for k, v in nodes.items() if v["texts"][0] == "x")
    edge_labels = sorted(t for (a, _), texts in svg["edges"].items() if a == x_key for t in texts)
    assert edge_labels == ["1.41e-09", "4.24"]
    assert {"rtx-legend_nonfinite", "rtx-legend_vanishing"} <= {v["id"] for v in nodes.values()}


@needs_dot
def test_svg_clusters_per_module(tmp_path):
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    y = model(Tensor.ones([2, 3])).sum()
    svg = parse(open(render(y, str(tmp_path / "m.svg")), "rb").read())
    assert {"model", "model.0", "model.1", "model.2"} <= set(svg["clusters"].values())
    texts = [v["texts"] for v in svg["nodes"].values()]
    assert ["relu", "2×4 float32", "grad: not computed"] in texts
    assert ["model.0.weight", "4×3 float32", "grad: not computed"] in texts


@needs_dot
def test_png_pdf_dot_by_extension(tmp_path):
    y = (_leaf([1.0], "a") * 2.0).sum()
    assert open(render(y, str(tmp_path / "g.png")), "rb").read()[:8] == b"\x89PNG\r\n\x1a\n"
    assert open(render(y, str(tmp_path / "g.pdf")), "rb").read()[:5] == b"%PDF-"


def test_dot_extension_needs_no_graphviz(tmp_path, monkeypatch):
    monkeypatch.setenv("RTXVIZ_DOT", str(tmp_path / "missing"))
    y = (_leaf([1.0], "a") * 2.0).sum()
    text = open(render(y, str(tmp_path / "g.dot"))).read()
    assert text.startswith("digraph rtxviz {")
    with pytest.raises(rtxviz.RtxvizError, match="svg, .png, .pdf or .dot"):
        render(y, str(tmp_path / "g.jpeg"))


def test_missing_dot_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("RTXVIZ_DOT", str(tmp_path / "missing"))
    y = (_leaf([1.0], "a") * 2.0).sum()
    with pytest.raises(GraphvizNotFound) as info:
        render(y, str(tmp_path / "g.svg"))
    msg = str(info.value)
    assert "apt-get install graphviz" in msg and "brew install graphviz" in msg and "conda" in msg
    assert isinstance(info.value, rtxviz.RtxvizError)
    assert y._repr_svg_() is None  # Jupyter falls back to the text repr


def test_timeout_kills_dot_and_suggests_collapsing(tmp_path, monkeypatch):
    slow = tmp_path / "slowdot"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("RTXVIZ_DOT", str(slow))
    y = (_leaf([1.0], "a") * 2.0).sum()
    with pytest.raises(RenderTimeout, match="Collapse module groups"):
        render(y, str(tmp_path / "g.svg"), timeout=0.5)


@needs_dot
def test_big_graph_collapses_to_budget(tmp_path):
    rtxviz.manual_seed(0)
    layers = []
    for _ in range(30):
        layers += [nn.Linear(3, 3), nn.ReLU()]
    y = nn.Sequential(*layers)(Tensor.ones([1, 3])).sum()
    svg = parse(open(render(y, str(tmp_path / "big.svg"), max_nodes=80, show_grads=False), "rb").read())
    groups = [v for v in svg["nodes"].values() if "rtx-group" in v["class"]]
    assert len(svg["nodes"]) <= 80 and len(groups) == 60
    assert groups[0]["texts"][1] == "1 ops, 2 params" or groups[0]["texts"][1] == "1 ops"


@needs_dot
def test_jupyter_repr_svg():
    y = (_leaf([1.0, 2.0], "a") * 2.0).sum()
    svg = y._repr_svg_()
    assert svg is not None and "<svg" in svg
    assert _leaf([1.0], "leaf")._repr_svg_() is None
    assert "<svg" in R.GraphModel.from_variable(y)._repr_svg_()


def test_render_module_is_callable_and_keeps_its_names(tmp_path):
    y = (_leaf([1.0], "a") * 2.0).sum()
    assert R(y, str(tmp_path / "c.dot")).endswith("c.dot")
    assert callable(R.capture_grads)
