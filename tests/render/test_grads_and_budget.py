"""Rendering after backward without a capture block, `keep_grads()`, and the node budget for big graphs with no
modules (long chains elided). Expected numbers are computed here with numpy from the weights, by hand, or from
counts, never read back from the engine's gradients."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

import rtxviz
import rtxviz.render as R
from rtxviz import Tensor, Variable, nn, optim
from rtxviz.render import GraphModel, capture_grads, keep_grads, render, to_dot
from rtxviz.render.dot import fmt_norm

from ._svg import parse

needs_dot = pytest.mark.skipif(R.find_dot() is None,
                               reason="graphviz `dot` is not installed (apt-get install graphviz)")

_NODE = re.compile(r'^\s*"?([\w:]+)"? \[id="[^"]*", (?:class="([^"]*)", )?label="((?:[^"\\]|\\.)*)"')
_EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)"(?: \[(.*)\])?;$')


def parse_dot(text: str) -> tuple[dict[str, tuple[str, list[str]]], list[tuple[str, str, str | None]]]:
    """Our DOT text -> ({key: (class, label lines)}, [(src, dst, edge label or None)])."""
    nodes, edges = {}, []
    for line in text.splitlines():
        m = _NODE.match(line)
        if m:
            nodes[m.group(1)] = (m.group(2) or "legend", m.group(3).replace('\\"', '"').split("\\n"))
            continue
        m = _EDGE.match(line)
        if m:
            lab = re.search(r'(?:^|, )label="([^"]*)"', m.group(3) or "")
            edges.append((m.group(1), m.group(2), lab.group(1) if lab else None))
    return nodes, edges


@pytest.fixture
def kept():
    capture = keep_grads()
    yield capture
    keep_grads(False)


def _leaf(values, name):
    return Variable.from_tensor(Tensor.from_slice(values, [len(values)], dtype="float64"), name=name)


def _mlp_loop(steps=2):
    """The README's loop: SGD steps on a small MLP; returns the model, the last loss, the last step's inputs
    and a numpy copy of the weights that last backward saw (taken before its opt.step())."""
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        xb = rng.standard_normal((5, 3)).astype(np.float32)
        opt.zero_grad()
        loss = model(Tensor._wrap(xb)).sum()
        loss.backward()
        weights = {"model." + name: p.data.astype(np.float64) for name, p in model.named_parameters()}
        opt.step()
    return model, loss, xb.astype(np.float64), weights


def _expected_mlp(x, w):
    """dL/d(each value) of L = sum(relu(x W1ᵀ + b1) W2ᵀ + b2), by the chain rule in numpy."""
    h = x @ w["model.0.weight"].T + w["model.0.bias"]
    r = np.maximum(h, 0)
    d_out = np.ones((x.shape[0], 2))
    d_r = d_out @ w["model.2.weight"]
    d_h = d_r * (h > 0)
    return {
        "out": d_out, "r": d_r, "h": d_h,
        "model.0.weight": d_h.T @ x, "model.0.bias": d_h.sum(0),
        "model.2.weight": d_out.T @ r, "model.2.bias": d_out.sum(0),
    }


def _by_label(nodes):
    return {lines[0]: (key, cls, lines) for key, (cls, lines) in nodes.items()}


# -- after backward, no capture --------------------------------------------------------------------------------
def test_after_backward_without_capture_shapes_leaf_grads_and_not_captured_hint():
    model, loss, x, w = _mlp_loop()
    expected = _expected_mlp(x, w)
    nodes, edges = parse_dot(to_dot(GraphModel.from_variable(loss)))
    ops = [lines for cls, lines in nodes.values() if "rtx-op" in cls or "rtx-output" in cls]
    # shapes are known although backward freed the graph: batch 5, 4 then 2 features, a scalar sum
    assert [lines[:2] for lines in ops] == [["linear", "5×4 float32"], ["relu", "5×4 float32"],
                                           ["linear", "5×2 float32"], ["sum", "scalar float32"]]
    assert all(lines[2] == "grad not captured" for lines in ops)
    assert "grad: not computed" not in "".join(line for _, lines in nodes.values() for line in lines)
    legend = nodes.get("legend_not_captured")
    assert legend is not None and "rtxviz.render.keep_grads()" in " ".join(legend[1])
    assert "capture_grads()" in " ".join(legend[1])
    # leaves show .grad: the gradient of the last backward (SGD does not touch .grad)
    by = _by_label(nodes)
    for name in ("model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"):
        assert by[name][2][-1] == f"‖grad‖ {fmt_norm(float(np.linalg.norm(expected[name])))}"
    assert all(label is None for _, _, label in edges)  # no capture: no edge norms are claimed


def test_before_backward_ops_say_not_computed():
    x = _leaf([1.0, 2.0], "x")
    nodes, _ = parse_dot(to_dot(GraphModel.from_variable((x * x).sum())))
    assert {lines[-1] for cls, lines in nodes.values() if "rtx-op" in cls or "rtx-output" in cls} == \
           {"grad: not computed"}
    assert "legend_not_captured" not in nodes


# -- keep_grads ------------------------------------------------------------------------------------------------
def test_keep_grads_puts_norms_on_ops_and_edges_by_hand(kept):
    x, w = _leaf([1.0, 2.0], "x"), _leaf([3.0, -1.0], "w")
    y = (x * w).sum()
    y.backward()
    nodes, edges = parse_dot(to_dot(GraphModel.from_variable(y)))
    by = _by_label(nodes)
    # L = Σ x·w: dL/d(x·w) = [1, 1]; x receives w = [3, -1], w receives x = [1, 2]; the seed of L is 1
    assert by["mul"][2][-1] == f"‖grad‖ {fmt_norm(math.sqrt(2))}"
    assert by["sum"][2][-1] == "‖grad‖ 1"
    labels = {(nodes[a][1][0], nodes[b][1][0]): lab for a, b, lab in edges if a in nodes and b in nodes}
    assert labels[("x", "mul")] == fmt_norm(math.sqrt(10))
    assert labels[("w", "mul")] == fmt_norm(math.sqrt(5))
    assert labels[("mul", "sum")] == fmt_norm(math.sqrt(2))
    assert "legend_not_captured" not in nodes


@needs_dot
def test_readme_loop_renders_last_step_with_edge_norms(kept, tmp_path):
    model, loss, x, w = _mlp_loop()
    e = _expected_mlp(x, w)
    svg = parse(open(render(loss, str(tmp_path / "step.svg")), "rb").read())
    title = {v["id"][4:]: k for k, v in svg["nodes"].items()}  # our key -> graphviz title
    m = GraphModel.from_variable(loss)
    key = {(n.label, n.shape): n.key for n in m.nodes.values()}
    lin1, relu, lin2, out = key[("linear", (5, 4))], key[("relu", (5, 4))], key[("linear", (5, 2))], key[("sum", ())]

    def edge(a, b):
        return svg["edges"][(title[a], title[b])]

    def norm(a):
        return fmt_norm(float(np.linalg.norm(a)))

    assert edge(lin2, out) == [norm(e["out"])]
    assert edge(relu, lin2) == [norm(e["r"])]
    assert edge(lin1, relu) == [norm(e["h"])]
    assert edge(key[("model.2.weight", (2, 4))], lin2) == [norm(e["model.2.weight"])]
    assert edge(key[("model.0.bias", (4,))], lin1) == [norm(e["model.0.bias"])]
    texts = svg["nodes"][title[relu]]["texts"]
    assert texts == ["relu", "5×4 float32", f"‖grad‖ {norm(e['r'])}"]  # the gradient that reached relu


def test_keep_grads_off_forgets_and_holds_no_graph_alive():
    import gc
    import weakref

    capture = keep_grads()
    try:
        x = _leaf([1.0, 2.0], "x")
        y = (x * 2.0).sum()
        y.backward()
        node = weakref.ref(y._node)
        assert len(capture.node_grads) >= 2
        del y
        gc.collect()
        assert node() is None  # the capture keys weakly: the graph went with the last reference
        tmp = _leaf([1.0], "tmp")
        (tmp * 1.0).sum().backward()
        assert id(tmp) in capture.leaf_grads
        tmp_id = id(tmp)
        del tmp
        gc.collect()
        assert tmp_id not in capture.leaf_grads  # dead leaves leave the long-lived capture
    finally:
        assert keep_grads(False) is None
    assert R.kept_grads() is None
    z = _leaf([1.0], "z")
    y = (z * 2.0).sum()
    y.backward()
    assert all(n.grad is None for n in GraphModel.from_variable(y).ops())


def test_explicit_capture_wins_over_kept(kept):
    x = _leaf([1.0, 2.0], "x")
    with capture_grads() as grads:
        y = (x * 3.0).sum()
        y.backward()
    m = GraphModel.from_variable(y, grads)
    assert m.nodes["n1"].grad.norm == pytest.approx(math.sqrt(2))


# -- the node budget without modules ---------------------------------------------------------------------------
N_CHAIN = 20_000


@pytest.fixture(scope="module")
def chain():
    x = _leaf([1.0, 2.0], "x")
    y = x
    for _ in range(N_CHAIN):
        y = y + 1.0
    return y.sum()


def test_chain_is_elided_to_the_budget(chain):
    m = GraphModel.from_variable(chain)
    assert len(m) == N_CHAIN + 2  # x, the adds, the sum
    small = R.graphviz_run.prepare(m, group_modules=True, max_nodes=100)
    assert len(small) <= 100
    gaps = [n for n in small.nodes.values() if n.kind == "elided"]
    assert len(gaps) == 1
    kept_ops = [n for n in small.nodes.values() if n.kind in ("op", "output")]
    kept_adds = sum(n.label == "add_scalar" or n.label == "add" for n in kept_ops)
    assert gaps[0].members == N_CHAIN - kept_adds  # every add is drawn or counted in the gap
    assert gaps[0].label == f"… {N_CHAIN - kept_adds:,} ops …"
    # start and end survive: x feeds the first op, the last op is the sum; one path runs through the gap
    labels = [n.label for n in small.nodes.values()]
    assert labels[0] == "x" and labels[-1] == "sum"
    into = [e for e in small.edges if e.dst == gaps[0].key]
    out = [e for e in small.edges if e.src == gaps[0].key]
    assert len(into) == 1 and len(out) == 1
    assert len(small.edges) == len(small) - 1  # still a chain
    text = to_dot(small, show_grads=False, group_modules=False)
    assert f"… {N_CHAIN - kept_adds:,} ops …" in text and f"×{N_CHAIN - kept_adds:,}" in text


def test_budget_holds_for_wide_graphs_with_many_leaves():
    leaves = [_leaf([float(i)], f"p{i}") for i in range(300)]
    y = leaves[0] * 1.0
    for p in leaves[1:]:
        y = y + p  # each op brings a new param: leaves count against the budget too
    m = GraphModel.from_variable(y.sum())
    small = m.elide(60)
    assert len(small) <= 60
    gap = next(n for n in small.nodes.values() if n.kind == "elided")
    assert gap.members + len([n for n in small.nodes.values() if n.kind in ("op", "output")]) == 301
    assert gap.attrs["leaves"] + len([n for n in small.nodes.values() if n.kind == "param"]) == 300


def test_elided_gap_carries_the_worst_gradient():
    x = _leaf([4.0], "x")
    with capture_grads() as grads:
        y = x
        for _ in range(25):
            y = y + 1.0
        y = (y * 0.0).sqrt()  # d sqrt(u)/du at u = 0 is Inf: every gradient upstream of it is NaN/Inf
        for _ in range(25):
            y = y + 1.0
        loss = y.sum()
        loss.backward()
    small = GraphModel.from_variable(loss, grads).elide(20)
    gap = next(n for n in small.nodes.values() if n.kind == "elided")
    assert "sqrt" in gap.attrs["ops"] and gap.grad.status() == "nonfinite"  # the mark survives inside the gap
    nodes, _ = parse_dot(to_dot(small))
    assert "rtx-nonfinite" in nodes[gap.key][0].split()
    assert nodes[small.edges[-1].dst][1][-1] == "‖grad‖ 1"  # the sum, downstream of the sqrt, is fine


@needs_dot
def test_a_long_chain_renders_cut_to_the_budget_with_the_elision_node(chain, tmp_path):
    # The uncut 40,000-op graph ran into the 10 s timeout; what keeps it fast is that dot never sees more than
    # the budget's nodes, which is what this asserts (the time itself is a benchmark's business, not a test's)
    path = render(chain, str(tmp_path / "x.svg"), timeout=10.0)
    svg = parse(open(path, "rb").read())
    gap = [v for v in svg["nodes"].values() if "rtx-elided" in v["class"]]
    assert len(gap) == 1 and re.fullmatch(r"… [\d,]+ ops …", gap[0]["texts"][0])
    assert len([v for v in svg["nodes"].values() if not v["id"].startswith("rtx-legend")]) <= R.DEFAULT_MAX_NODES
    flat = render(chain, str(tmp_path / "flat.svg"), group_modules=False, show_grads=False)
    assert any("rtx-elided" in v["class"] for v in parse(open(flat, "rb").read())["nodes"].values())


@needs_dot
def test_jupyter_repr_of_a_long_chain_is_cut_to_the_repr_budget(chain):
    svg = chain._repr_svg_()
    assert svg is not None
    nodes = parse(svg)["nodes"]
    assert any("rtx-elided" in v["class"] for v in nodes.values())
    assert len([v for v in nodes.values() if not v["id"].startswith("rtx-legend")]) <= R.graphviz_run.REPR_MAX_NODES


def test_jupyter_repr_gives_up_quietly_when_dot_is_slow(tmp_path, monkeypatch):
    import stat

    slow = tmp_path / "slowdot"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("RTXVIZ_DOT", str(slow))
    monkeypatch.setattr(R.graphviz_run, "REPR_TIMEOUT", 0.3)
    monkeypatch.setattr(R.display.svg_or_none, "__defaults__", (0.3, R.graphviz_run.REPR_MAX_NODES))
    y = (_leaf([1.0], "a") * 2.0).sum()
    t0 = time.perf_counter()
    assert y._repr_svg_() is None  # Jupyter shows the text repr instead
    assert time.perf_counter() - t0 < 5.0
