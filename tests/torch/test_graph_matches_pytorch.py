"""The recorded graph is PyTorch's autograd graph, and every gradient summary is the norm PyTorch computed.

For each model: the node events equal the nodes `grad_fn.next_functions` reaches from the loss (AccumulateGrad
nodes are the parameter leaves), edge for edge; each `grad` event's output and input norms equal the gradients
PyTorch handed its own hook on that node (captured by the test, independently of rtxviz's hooks); each
`leaf_grad` equals the parameter's `.grad` after backward.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import rtxviz.torch as rt  # noqa: E402
from rtxviz.schema import validate_event  # noqa: E402

from .models import cases  # noqa: E402

ACC = "torch::autograd::AccumulateGrad"


def pytorch_graph(root):
    """Nodes (not AccumulateGrad) and edges (producer, consumer) by walking next_functions; a parameter producer
    is ("param", tensor)."""
    nodes, edges, todo, seen = [], [], [root], set()
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        nodes.append(fn)
        for child, _ in fn.next_functions:
            if child is None:
                continue
            if child.name() == ACC:
                edges.append((("param", child.variable), fn))
            else:
                edges.append((child, fn))
                todo.append(child)
    return nodes, edges


def _norm(ts):
    ts = [t for t in ts if t is not None]
    return math.sqrt(sum(float(torch.linalg.vector_norm(t.double())) ** 2 for t in ts)) if ts else None


@pytest.mark.parametrize("name", list(cases()))
def test_graph_and_gradients_are_pytorchs(name):
    make_model, make_input, dtype, loss_of = cases()[name]
    torch.manual_seed(0)
    model = make_model().to(dtype)
    x = make_input()
    if x.is_floating_point():
        x = x.to(dtype)
    with rt.record(model) as rec:
        loss = loss_of(model(x))
        nodes, edges = pytorch_graph(loss.grad_fn)
        seen_by_pytorch = {}

        def capture(fn):
            def hook(grad_inputs, grad_outputs):
                keep = [g for (c, _), g in zip(fn.next_functions, grad_inputs, strict=False) if c is not None]
                seen_by_pytorch[fn] = (_norm(grad_outputs), [_norm([g]) for g in keep])
            return hook

        for fn in nodes:
            fn.register_hook(capture(fn))
        loss.backward()
        ids = {fn: rec.recorder.node_id(fn) for fn in nodes}
        leaf_ids = {id(p): rec.recorder.leaf_id_of(p) for p in model.parameters()}

    node_events = {e["id"]: e for e in rec.events if e["kind"] == "node"}
    assert len(node_events) == len(nodes), f"{name}: {len(node_events)} node events, PyTorch's graph has {len(nodes)}"
    assert None not in ids.values() and set(ids.values()) == set(node_events)

    def ref(producer):
        if isinstance(producer, tuple):
            return ("leaf", leaf_ids[id(producer[1])])
        return ("node", ids[producer])

    expected = sorted((ref(p), ids[c]) for p, c in edges)
    recorded = sorted(((("node", r["node"]) if "node" in r else ("leaf", r["leaf"])), e["id"])
                      for e in node_events.values() for r in e["inputs"])
    assert recorded == expected

    grads = {e["node"]: e for e in rec.events if e["kind"] == "grad"}
    rel = 1e-5 if dtype == torch.float32 else 1e-9
    for fn, (out_norm, in_norms) in seen_by_pytorch.items():
        ev = grads[ids[fn]]
        assert ev["output"]["norm"] == pytest.approx(out_norm, rel=rel, abs=1e-12), fn.name()
        assert [s["norm"] if s else None for s in ev["inputs"]] == pytest.approx(in_norms, rel=rel, abs=1e-12)
    assert len(seen_by_pytorch) == len(nodes)

    leaf_grads = {e["leaf"]: e["stats"]["norm"] for e in rec.events if e["kind"] == "leaf_grad"}
    for p in model.parameters():
        if p.grad is not None:
            assert leaf_grads[leaf_ids[id(p)]] == pytest.approx(_norm([p.grad]), rel=rel, abs=1e-12)
    for e in rec.events:  # what the server would accept
        validate_event(e)


def test_module_paths_and_names():
    make_model, make_input, dtype, loss_of = cases()["resnet18"]
    torch.manual_seed(0)
    model = make_model()
    with rt.record(model) as rec:
        loss_of(model(make_input())).backward()
    nodes = [e for e in rec.events if e["kind"] == "node"]
    by_module = {}
    for e in nodes:
        by_module.setdefault(e["module"], []).append(e["op"])
    assert by_module["layer1.0.conv1"] == ["conv2d"]
    assert by_module["layer2.0.downsample.1"] == ["batch_norm"]
    assert "add_" in by_module["layer1.0"]  # `out += identity` in BasicBlock.forward
    assert [e["name"] for e in rec.events if e["kind"] == "leaf" and e["name"] == "fc.weight"] == ["fc.weight"]
    assert {e["module"] for e in nodes if e["op"] == "cross_entropy"} == {None}  # the loss is outside the model


def test_shared_weight_is_one_leaf_with_two_consumers():
    make_model, make_input, dtype, loss_of = cases()["shared_weights"]
    model = make_model().to(dtype)
    with rt.record(model) as rec:
        loss_of(model(make_input().to(dtype))).backward()
    leaf = [e for e in rec.events if e["kind"] == "leaf" and e["name"] == "lin.weight"]
    assert len(leaf) == 1
    consumers = [e for e in rec.events if e["kind"] == "node" and {"leaf": leaf[0]["id"]} in e["inputs"]]
    assert len(consumers) == 2
