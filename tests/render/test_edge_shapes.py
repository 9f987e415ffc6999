"""Shapes on edges in the DOT text and the graphviz SVG: each edge carries its source's output shape, read from the
engine's own tensors (not from the model the renderer built)."""

from __future__ import annotations

import numpy as np

from rtxviz import Tensor, Variable
from rtxviz.render import render
from rtxviz.render.dot import to_dot
from rtxviz.render.graph_model import GraphModel

from ._svg import parse
from .test_svg import needs_dot


def _graph():
    x = Variable.from_tensor(Tensor(np.ones((4, 3))), name="x")
    w = Variable.from_tensor(Tensor(np.ones((3, 5))), name="w")
    h = x @ w
    y = h.exp()
    loss = y.sum()
    dims = {"x": x.data.shape, "w": w.data.shape, "matmul": h.data.shape, "exp": y.data.shape}
    return loss, {k: "×".join(map(str, v)) for k, v in dims.items()}


def test_dot_edges_carry_the_source_shape_only_when_asked():
    loss, want = _graph()
    model = GraphModel.from_variable(loss)
    off = to_dot(model, show_grads=False)
    on = to_dot(model, show_grads=False, show_shapes=True)
    assert "label=\"4×5\"" not in off
    labels = {m.label: m for m in model.nodes.values()}
    for name, shape in want.items():
        src = labels[name].key
        edges = [ln for ln in on.splitlines() if ln.strip().startswith(f'"{src}" ->')]
        assert edges and all(f'label="{shape}"' in ln for ln in edges), (name, edges)


@needs_dot
def test_svg_edge_texts_are_the_shapes(tmp_path):
    loss, want = _graph()
    svg = parse(open(render(loss, str(tmp_path / "g.svg"), show_grads=False, show_shapes=True), "rb").read())
    by_key = {k: v["texts"][0] for k, v in svg["nodes"].items()}
    got = {by_key[a]: texts for (a, _), texts in svg["edges"].items()}
    for name, shape in want.items():
        assert got[name] == [shape], name


def test_render_command_shapes_flag(tmp_path):
    import argparse

    from rtxviz.cli.render import configure_render, run_render

    from ..cli.test_render import _recorded_db

    db = tmp_path / "runs.db"
    _recorded_db(db)  # Linear(3, 4) -> ReLU -> Linear(4, 1) on a batch of 2, summed
    p = argparse.ArgumentParser()
    configure_render(p)
    out = tmp_path / "run.dot"
    assert run_render(p.parse_args(["demo", "-o", str(out), "--db", str(db), "--shapes", "--no-grads"])) == 0
    text = out.read_text()
    # by hand: the first linear and the relu give 2×4, the second linear 2×1
    assert text.count('label="2×4"') >= 2 and 'label="2×1"' in text
    assert run_render(p.parse_args(["demo", "-o", str(out), "--db", str(db), "--no-grads"])) == 0
    assert 'label="2×4"' not in out.read_text()
