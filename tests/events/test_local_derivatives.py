"""The grad event's `local` field: d(output)/d(input) of small elementwise ops, checked against closed forms."""

from __future__ import annotations

import math

import numpy as np

from rtxviz import Tensor, Variable
from rtxviz.engine import hooks
from rtxviz.events.hook import EventHook
from rtxviz.schema import validate_batch


def leaf(values, name):
    v = Variable.from_tensor(Tensor(np.array(values, dtype=np.float64)), name=name)
    v.requires_grad = True
    return v


def grads_by_op(events):
    ops = {e["id"]: e["op"] for e in events if e["kind"] == "node"}
    return {ops[e["node"]]: e for e in events if e["kind"] == "grad"}


def test_micrograd_neuron_local_derivatives_are_the_closed_forms():
    # micrograd's neuron: o = tanh(x1*w1 + x2*w2 + b), the classic numbers (x1.grad = -1.5, o = 0.7071)
    x1, w1, x2, w2 = leaf(2.0, "x1"), leaf(-3.0, "w1"), leaf(0.0, "x2"), leaf(1.0, "w2")
    b = leaf(6.8813735870195432, "b")
    events: list[dict] = []
    with EventHook(events.append):
        o = (x1 * w1 + x2 * w2 + b).tanh()
        o.backward()
    validate_batch(events)
    g = grads_by_op(events)
    t = math.tanh(2.0 * -3.0 + 6.8813735870195432)
    assert math.isclose(g["tanh"]["local"][0][0], 1 - t * t, rel_tol=1e-12)
    muls = [e for e in events if e["kind"] == "grad" and e["node"] in
            {n["id"] for n in events if n["kind"] == "node" and n["op"] == "mul"}]
    locals_ = sorted(tuple(v[0] for v in e["local"]) for e in muls)
    assert locals_ == sorted([(-3.0, 2.0), (1.0, 0.0)])  # d(a*b)/da = b, d(a*b)/db = a
    for e in muls + [g["tanh"]]:  # the product the chain rule names is what the engine sent
        for gin, loc in zip(e["inputs"], e["local"], strict=True):
            assert math.isclose(gin["values"][0], e["output"]["values"][0] * loc[0], rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(x1.grad.item(), -1.5, rel_tol=1e-12)


def test_local_is_not_sent_for_broadcast_inputs_large_tensors_or_non_elementwise_ops():
    a, c = leaf([1.0, 2.0, 3.0], "a"), leaf(2.0, "c")
    big = leaf(np.arange(40.0), "big")
    events: list[dict] = []
    with EventHook(events.append, values_max_numel=16):
        ((a * c).sum() + (big.exp()).sum()).backward()
    g = grads_by_op(events)
    assert g["mul"]["local"] == [[2.0, 2.0, 2.0], None]  # c is broadcast: its gradient is a sum, not a product
    assert "local" not in g["exp"] and "local" not in g["sum"]


def test_the_extra_rule_is_invisible_to_other_hooks():
    # another hook (a graph-cache capture, detect_anomaly) must see the same backward ops with or without the
    # events hook computing local derivatives
    class Watcher(hooks.EngineHook):
        def __init__(self):
            self.ops: list[str] = []

        def forward_postprocess(self, op, node, inputs, output):
            self.ops.append(op.name)

    def backward_ops(with_events: bool) -> list[str]:
        x = leaf([0.5, 1.5], "x")
        y = (x.tanh() * x).sum()
        w = Watcher()
        events: list[dict] = []
        if with_events:
            with EventHook(events.append), w:
                y.backward()
            assert any("local" in e for e in events if e["kind"] == "grad")
        else:
            with w:
                y.backward()
        return w.ops

    assert backward_ops(True) == backward_ops(False)
