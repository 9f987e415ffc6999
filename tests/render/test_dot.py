"""DOT text and the graph model, without graphviz."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, Variable, nn
from rtxviz.events import EventHook
from rtxviz.render import GNode, GradStat, GraphModel, capture_grads, quote, to_dot
from rtxviz.render.dot import fmt_norm


def _leaf(values, name):
    return Variable.from_tensor(Tensor.from_slice(values, [len(values)], dtype="float64"), name=name)


def test_quote_escapes_quotes_backslashes_and_newlines():
    assert quote('a"b') == '"a\\"b"'
    assert quote("a\\b") == '"a\\\\b"'
    assert quote("a\nb") == '"a\\nb"'
    assert quote("a\r\nb") == '"a\\nb"'


def test_every_label_is_escaped():
    m = GraphModel({"n1": GNode("n1", "output", 'evil"} -> x [label="', (2,), "float32", module='m"od')})
    text = to_dot(m, show_grads=False)
    # the only unescaped quotes are the DOT string delimiters: no label can close its string early
    for line in text.splitlines():
        stripped = re.sub(r'\\.', "", line)
        assert stripped.count('"') % 2 == 0, line
    assert 'evil\\"} -> x [label=\\"' in text


def test_model_from_variable_nodes_edges_and_grads():
    x = _leaf([1.0, 2.0], "x")
    with capture_grads() as grads:
        y = (x * 3.0).sum()
        y.backward()
    m = GraphModel.from_variable(y, grads)
    assert [(n.kind, n.label, n.shape) for n in m.nodes.values()] == [
        ("param", "x", (2,)), ("op", "mul_scalar", (2,)), ("output", "sum", ())]
    edges = {(e.src, e.dst): e for e in m.edges}
    assert set(edges) == {("v1", "n1"), ("n1", "n2")}
    # dL/dx = [3, 3] flows to x; dL/d(3x) = [1, 1] flows from sum to mul
    assert edges[("v1", "n1")].grad.norm == pytest.approx(3 * math.sqrt(2))
    assert edges[("n1", "n2")].grad.norm == pytest.approx(math.sqrt(2))
    assert m.nodes["v1"].grad.norm == pytest.approx(3 * math.sqrt(2))  # the leaf's .grad
    assert m.nodes["n2"].grad.norm == pytest.approx(1.0)


def test_without_capture_ops_say_not_computed_and_leaves_show_grad():
    x = _leaf([1.0, 2.0], "x")
    y = (x * x).sum()
    m = GraphModel.from_variable(y)
    text = to_dot(m)
    assert "grad: not computed" in text
    y.backward()
    m = GraphModel.from_variable(y)
    assert m.nodes["v1"].grad.norm == pytest.approx(math.sqrt(4 + 16))  # 2x


def test_reused_value_is_one_node_with_two_edges():
    x = _leaf([1.0], "x")
    b = x + x
    c = b + b  # Karpathy's reuse example
    m = GraphModel.from_variable(c)
    assert len([n for n in m.nodes.values() if n.kind != "param"]) == 2
    assert sorted((e.src, e.dst, e.index) for e in m.edges) == [
        ("n1", "n2", 0), ("n1", "n2", 1), ("v1", "n1", 0), ("v1", "n1", 1)]


def test_deep_chain_is_walked_without_recursion():
    x = _leaf([1.0], "x")
    y = x
    for _ in range(3000):
        y = y + 1.0
    m = GraphModel.from_variable(y)
    assert len(m.nodes) == 3001
    assert to_dot(m, show_grads=False).count("->") == 3000


def test_marks_vanishing_exploding_nan():
    x, z, w = _leaf([1.0, 2.0], "x"), _leaf([1.0, 1.0], "z"), _leaf([0.0, 1.0], "w")
    with capture_grads() as grads:
        loss = (x * 1e-9).sum() + (z * 1e4).sum() + w.sqrt().sum()
        loss.backward()
    m = GraphModel.from_variable(loss, grads)
    by_label = {n.label: n for n in m.nodes.values()}
    assert by_label["x"].grad.status() == "vanishing"      # 1e-9 * sqrt(2)
    assert by_label["z"].grad.status() == "exploding"      # 1e4 * sqrt(2)
    assert by_label["w"].grad.status() == "nonfinite"      # d sqrt(w)/dw at 0 is Inf
    text = to_dot(m)
    assert 'class="rtx-param rtx-vanishing"' in text
    assert 'class="rtx-param rtx-exploding"' in text
    assert 'class="rtx-param rtx-nonfinite"' in text
    assert "legend_nonfinite" in text and "cluster_legend" in text


def test_an_exactly_zero_gradient_is_its_own_class_as_on_the_page():
    """The page always had a "zero" class; the SVG called a zero gradient vanishing (one table now)."""
    x, u = _leaf([1.0, 2.0], "x"), _leaf([3.0, 4.0], "u")
    with capture_grads() as grads:
        loss = (x * 2.0).sum() + (u * 0.0).sum()
        loss.backward()
    by_label = {n.label: n for n in GraphModel.from_variable(loss, grads).nodes.values()}
    assert by_label["u"].grad.status() == "zero" and by_label["x"].grad.status() == "ok"
    text = to_dot(GraphModel.from_variable(loss, grads))
    assert 'class="rtx-param rtx-zero"' in text and "legend_zero" in text


def test_grad_stat_of_arrays():
    assert GradStat.of(np.array([3.0, 4.0])).norm == 5.0
    s = GradStat.of(np.array([np.nan, np.inf, 1.0], dtype=np.float32))
    assert (s.norm, s.nan, s.inf, s.status()) == (None, 1, 1, "nonfinite")
    assert GradStat.of(np.array([1e30, 1e30], dtype=np.float32)).norm == pytest.approx(math.sqrt(2) * 1e30)
    assert fmt_norm(1.23456e-5) == "1.23e-05" and fmt_norm(0.5) == "0.5"


def _mlp():
    rtxviz.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _cluster_members(text: str) -> dict[str, list[str]]:
    """Cluster label -> node ids declared directly in it (parses our own indentation-structured output)."""
    out, stack = {}, []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("subgraph cluster_"):
            stack.append(None)
        elif s.startswith("label=") and stack and stack[-1] is None:
            stack[-1] = re.match(r'label="([^"]*)"', s).group(1)
            out[stack[-1]] = []
        elif s == "}" and stack:
            stack.pop()
        elif stack and re.match(r'^"[^"]+" \[', s):
            out[stack[-1]].append(re.match(r'^"([^"]+)"', s).group(1))
    return out


def test_module_groups_become_nested_clusters():
    model = _mlp()
    y = model(Tensor.ones([5, 3])).sum()
    m = GraphModel.from_variable(y)
    assert set(m.groups()) == {"model.0", "model.1", "model.2"}
    members = _cluster_members(to_dot(m))
    ops = {m.nodes[k].label for k in members["model.0"]}
    assert ops == {"linear"} and {m.nodes[k].label for k in members["model.1"]} == {"relu"}
    assert "model" in members  # the parent path is drawn around its children
    assert "cluster_" not in to_dot(m, group_modules=False, show_grads=False)


def test_dot_is_deterministic():
    a = to_dot(GraphModel.from_variable(_mlp()(Tensor.ones([2, 3])).sum()))
    b = to_dot(GraphModel.from_variable(_mlp()(Tensor.ones([2, 3])).sum()))
    assert a == b


def test_collapse_folds_modules_and_their_params():
    rtxviz.manual_seed(0)
    layers = []
    for _ in range(20):
        layers += [nn.Linear(4, 4), nn.ReLU()]
    model = nn.Sequential(*layers)
    y = model(Tensor.ones([2, 4])).sum()
    m = GraphModel.from_variable(y)
    assert len(m) == 40 + 40 + 1  # 20×(weight, bias), 40 ops, sum (the constant input is not drawn)
    small = m.fit(30)
    groups = [n for n in small.nodes.values() if n.kind == "group"]
    assert len(small) <= 30
    assert [g.label for g in groups] == ["model"] and groups[0].members == 40 and groups[0].attrs["params"] == 40
    mid = m.collapse(2)
    assert len([n for n in mid.nodes.values() if n.kind == "group"]) == 40
    assert not [n for n in mid.nodes.values() if n.kind == "param"]   # each param folded into its layer
    assert "box3d" in to_dot(small)


def _record(fn):
    events = []
    hook = EventHook(events.append)
    rtxviz.add_hook(hook)
    try:
        hook.new_step(0)
        fn()
    finally:
        rtxviz.remove_hook(hook)
    return [dict(e, seq=i + 1) for i, e in enumerate(events)]


def test_model_from_events_matches_model_from_variable():
    model = _mlp()
    x = Tensor.ones([5, 3])
    holder = {}

    def step():
        with capture_grads() as grads:
            y = model(x).sum()
            y.backward()
        holder["y"], holder["grads"] = y, grads

    events = _record(step)
    a = GraphModel.from_events(events)
    b = GraphModel.from_variable(holder["y"], holder["grads"])
    assert [(n.kind, n.label, n.shape, n.module) for n in a.nodes.values()] == \
           [(n.kind, n.label, n.shape, n.module) for n in b.nodes.values()]
    assert [(e.src, e.dst, e.index) for e in a.edges] == [(e.src, e.dst, e.index) for e in b.edges]
    for ea, eb in zip(a.edges, b.edges, strict=True):
        assert ea.grad.norm == pytest.approx(eb.grad.norm, rel=1e-6)
    for key in a.nodes:
        if a.nodes[key].grad is not None:
            assert a.nodes[key].grad.norm == pytest.approx(b.nodes[key].grad.norm, rel=1e-6)
