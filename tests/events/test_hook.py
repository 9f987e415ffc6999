"""EventHook: the events a small graph produces, checked against hand-derived structure and numbers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rtxviz import Tensor, Variable, no_grad
from rtxviz.engine import hooks
from rtxviz.events import EventHook, validate_event


def var(values, name=None, requires_grad=True, dtype=np.float64):
    return Variable.from_tensor(Tensor(np.asarray(values, dtype=dtype)), requires_grad=requires_grad, name=name)


def record(fn, **kw):
    events: list[dict] = []
    with EventHook(events.append, **kw):
        fn()
    assert not hooks.ACTIVE
    for e in events:  # every event is valid schema-v1 JSON
        validate_event(json.loads(json.dumps(e, allow_nan=False)))
    return events


def kinds(events, kind):
    return [e for e in events if e["kind"] == kind]


def test_mul_sum_graph_and_gradients():
    x = var([1.0, 2.0], "x")
    w = var([3.0, 4.0], "model.w")

    def run():
        (x * w).sum().backward()

    ev = record(run)
    leaves = {e["name"]: e for e in kinds(ev, "leaf")}
    assert set(leaves) == {"x", "model.w"}
    assert leaves["x"]["shape"] == [2] and leaves["x"]["dtype"] == "float64" and leaves["x"]["requires_grad"]
    assert leaves["x"]["values"] == [1.0, 2.0]
    mul, total = kinds(ev, "node")
    assert mul["op"] == "mul" and total["op"] == "sum"
    assert mul["inputs"] == [{"leaf": leaves["x"]["id"]}, {"leaf": leaves["model.w"]["id"]}]
    assert total["inputs"] == [{"node": mul["id"]}]
    assert total["shape"] == [] and total["values"] == [11.0]
    assert mul["rule"] and mul["saved_bytes"] == 32  # mul saves both [2] float64 inputs
    # d/dmul of sum = ones; d/dx = w, d/dw = x
    g_sum, g_mul = kinds(ev, "grad")
    assert g_sum["node"] == total["id"] and g_sum["output"]["values"] == [1.0]
    assert g_mul["output"]["values"] == [1.0, 1.0]
    dx, dw = g_mul["inputs"]
    assert dx["values"] == [3.0, 4.0] and dx["norm"] == pytest.approx(5.0) and dx["mean"] == pytest.approx(3.5)
    assert dw["values"] == [1.0, 2.0] and dw["min"] == 1.0 and dw["max"] == 2.0
    by_leaf = {e["leaf"]: e["stats"] for e in kinds(ev, "leaf_grad")}
    assert by_leaf[leaves["x"]["id"]]["norm"] == pytest.approx(5.0)
    assert by_leaf[leaves["model.w"]["id"]]["norm"] == pytest.approx(math.sqrt(5.0))
    order = [e["kind"] for e in ev]
    assert order.index("backward_begin") < order.index("grad") and order[-1] == "backward_end"
    assert kinds(ev, "backward_begin")[0]["roots"] == [{"node": total["id"]}]


def test_leaf_seen_once_constants_are_leaves_and_big_values_stay_home():
    w = var(np.ones(17), "w")
    data = Tensor(np.arange(17.0))  # a data input that needs no grad

    def run():
        y = w * data
        (y * w).sum()

    ev = record(run)
    leaves = kinds(ev, "leaf")
    assert len(leaves) == 2  # w once, although used twice
    const = [e for e in leaves if not e["requires_grad"]][0]
    assert const["name"] is None and not const["param"] and "values" not in const  # 17 > 16 elements
    assert [e for e in leaves if e["requires_grad"]][0]["param"]


def test_no_grad_detach_and_grad_mode_events():
    x = var([1.0, 2.0], "x")

    def run():
        with no_grad():
            x * 2.0  # not recorded: no node
        x.detach()

    ev = record(run)
    assert not kinds(ev, "node")
    modes = kinds(ev, "grad_mode")
    assert [(m["phase"], m["enabled"]) for m in modes] == [("enter", False), ("exit", True)]
    (det,) = kinds(ev, "detach")
    ids = {e["name"]: e["id"] for e in kinds(ev, "leaf")}
    assert det["source"] == {"leaf": ids["x"]}
    assert det["result"]["leaf"] != ids["x"]


def test_forward_nan_anomaly_names_the_origin():
    x = var([1.0, -1.0], "x")

    def run():
        y = x.log()          # log(-1) = NaN: the origin
        (y * 2.0).sum()      # spreads it

    ev = record(run)
    first, second, *_ = kinds(ev, "anomaly")
    log_node = kinds(ev, "node")[0]
    assert first["phase"] == "forward" and first["op"] == "log" and first["node"] == log_node["id"]
    assert first["origin"] and first["nan"] == 1 and first["bad_inputs"] == []
    assert not second["origin"] and second["bad_inputs"] == [0]
    assert kinds(ev, "node")[0]["values"] == [0.0, None]  # NaN travels as null


def test_backward_anomaly_and_nonfinite_stats():
    x = var([0.0, 4.0], "x")

    def run():
        x.sqrt().sum().backward()  # d sqrt at 0 = 1/(2*0) = inf

    ev = record(run)
    g = [e for e in kinds(ev, "grad") if e["node"] == kinds(ev, "node")[0]["id"]][0]
    s = g["inputs"][0]
    assert s["inf"] == 1 and s["nan"] == 0 and s["norm"] is None and s["values"] == [None, 0.25]
    (a,) = kinds(ev, "anomaly")
    assert a["phase"] == "backward" and a["op"] == "sqrt" and a["origin"] and a["bad_inputs"] == [0]


def test_generic_engine_events_are_forwarded():
    x = var([1.0], "x")
    events: list[dict] = []
    with EventHook(events.append):
        y = x * 3.0
        hooks.emit("checkpoint_begin", segment=2, node=y.grad_fn, value=y, shape=(2, 3), scale=np.float32(0.5))
        hooks.emit("node", oops=True)            # collides with a core kind: wrapped
        hooks.emit("Bad Name!", a=1)             # not a valid kind: wrapped
        hooks.emit("cache_hit", step=5)          # a field may not overwrite the envelope
    ck = kinds(events, "checkpoint_begin")[0]
    assert ck["segment"] == 2 and ck["node"] == {"node": y.grad_fn.id} and ck["value"] == {"node": y.grad_fn.id}
    assert ck["shape"] == [2, 3] and ck["scale"] == 0.5
    wrapped = kinds(events, "engine_event")
    assert [w["name"] for w in wrapped] == ["node", "Bad Name!"]
    hit = kinds(events, "cache_hit")[0]
    assert hit["step"] is None and hit["step_"] == 5
    for e in events:
        validate_event(e)


def test_attrs_are_json_safe():
    x = var(np.ones((2, 3)), "x")
    ev = record(lambda: x.sum(dim=1, keepdim=True))
    (node,) = kinds(ev, "node")
    json.dumps(node["attrs"], allow_nan=False)
    assert node["shape"] == [2, 1]


def test_grad_shared_between_consumer_and_producer_is_consistent():
    x = var([1.0, 2.0, 3.0], "x")

    def run():
        y = x * 2.0
        z = y.tanh()
        z.sum().backward()

    ev = record(run)
    nodes = {e["op"]: e["id"] for e in kinds(ev, "node")}
    grads = {e["node"]: e for e in kinds(ev, "grad")}
    # the gradient tanh sends to its input is the gradient arriving at mul_scalar's output
    assert grads[nodes["tanh"]]["inputs"][0] == grads[nodes["mul_scalar"]]["output"]
    expected = 1 - np.tanh(2 * np.array([1.0, 2.0, 3.0])) ** 2
    assert grads[nodes["mul_scalar"]]["output"]["values"] == pytest.approx(expected.tolist())


def test_select_ops_skip_the_forward_check_only_on_inputs_known_finite(monkeypatch):
    import rtxviz.events.hook as hook_mod

    checked = []
    real = hook_mod.count_nonfinite
    monkeypatch.setattr(hook_mod, "count_nonfinite", lambda a: (checked.append(a.shape), real(a))[1])
    x = var([[1.0, -2.0], [3.0, -4.0]], "x")
    bad = var([np.nan, 1.0], "bad")

    def run():
        y = x * 2.0              # checked: mul can overflow
        y.relu().reshape([4])    # relu of a checked-finite node, reshape of that: no pass needed
        bad.relu()               # a leaf was never checked: relu of it is, and reports the NaN it passes on
        (bad * 1.0).relu()       # a node holding NaN is not known finite: relu is checked too

    ev = record(run)
    ops = [e["op"] for e in kinds(ev, "node")]
    assert ops == ["mul_scalar", "relu", "reshape", "relu", "mul_scalar", "relu"]
    # outputs checked: mul_scalar, relu(bad), mul_scalar, relu(bad * 1) (not the relu and reshape of y), plus one
    # input check by each of the 3 anomalies (which input held the NaN)
    assert checked == [(2, 2), (2,), (2,), (2,), (2,), (2,), (2,)]
    an = kinds(ev, "anomaly")
    by_node = {e["id"]: e["op"] for e in kinds(ev, "node")}
    assert [by_node[a["node"]] for a in an] == ["relu", "mul_scalar", "relu"]
    assert an[0]["bad_inputs"] == [0] and not an[0]["origin"] and an[0]["nan"] == 1


def test_a_gradient_passed_through_is_summarised_once(monkeypatch):
    import rtxviz.events.hook as hook_mod

    seen = []
    real = hook_mod.tensor_stats
    monkeypatch.setattr(hook_mod, "tensor_stats", lambda a, vm=0: (seen.append(id(a)), real(a, vm))[1])
    a, b = var([1.0, 2.0], "a"), var([3.0, 4.0], "b")

    def run():
        ((a * b) + b).sum().backward()   # add sends its output gradient on, unchanged, to both inputs

    ev = record(run)
    add = kinds(ev, "node")[1]
    g_add = [e for e in kinds(ev, "grad") if e["node"] == add["id"]][0]
    assert g_add["output"]["values"] == [1.0, 1.0] and g_add["inputs"][0] == g_add["inputs"][1] == g_add["output"]
    assert len(seen) == len(set(seen))  # no array summarised twice


def test_cached_attrs_keep_bools_and_ints_apart():
    from rtxviz.events.hook import _attrs_json

    assert _attrs_json({"keepdim": True, "dim": (1,)}) == {"keepdim": True, "dim": [1]}
    one = _attrs_json({"keepdim": 1, "dim": (1,)})
    assert one == {"keepdim": 1, "dim": [1]} and type(one["keepdim"]) is int
    assert _attrs_json({"scale": np.float32(0.5)}) == {"scale": 0.5}  # not cacheable: converted each time
