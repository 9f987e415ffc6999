"""The node events' `saved` field against the engine's real saved tensors: what each recorded node keeps for its
backward (its TapeNode's inputs, output and ctx.state arrays, read from the node itself, not from the hook), their
bytes, shapes, and which of them share one buffer (told apart here by numpy's own `shares_memory`)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rtxviz import Tensor, Variable, accel
from rtxviz.engine import hooks
from rtxviz.engine.ops.nn_conv import conv2d
from rtxviz.engine.ops.nn_norm import dropout
from rtxviz.events import EventHook, validate_event
from rtxviz.events import hook as hook_module
from tests.native import need_native


@pytest.fixture(params=["compiled", "python"])
def saved_path(request, monkeypatch):
    """Each test once through the compiled `saved_entries` and once through the Python loop it replaces."""
    if request.param == "compiled":
        need_native(accel.saved_entries is not None)
    else:
        monkeypatch.setattr(hook_module, "_native_saved_entries", None)
    return request.param


def var(shape, name=None, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape)
    return Variable.from_tensor(Tensor(data), requires_grad=True, name=name)


def record(fn):
    events: list[dict] = []
    with EventHook(events.append):
        out = fn()
    assert not hooks.ACTIVE
    for e in events:
        validate_event(json.loads(json.dumps(e, allow_nan=False)))
    return {e["id"]: e for e in events if e["kind"] == "node"}, out


def engine_saved(node) -> list[tuple[str, int | None, np.ndarray]]:
    """What the node holds, read from its own fields (inputs, out_data, state), independently of saved_tensors()."""
    got: list[tuple[str, int | None, np.ndarray]] = []
    for i, t in enumerate(node.inputs or ()):
        if t is not None:
            got.append(("input", i, t.data))
    if node.out_data is not None:
        got.append(("output", None, node.out_data))
    state = node.state if isinstance(node.state, (tuple, list)) else (node.state,)
    got.extend(("state", j, a) for j, a in enumerate(s for s in state if isinstance(s, np.ndarray)))
    return got


def walk(root) -> list:
    seen, order, stack = set(), [], [root]
    while stack:
        n = stack.pop()
        if n is None or getattr(n, "_is_var", False) or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(n.next)
    return order


def test_saved_matches_the_engines_tensors_and_aliases(saved_path):
    x, w = var([4, 3], "x", 1), var([3, 5], "model.w", 2)
    img, k = var([2, 1, 5, 5], "img", 3), var([2, 1, 3, 3], "model.k", 4)

    def run():
        h = (x @ w).exp()          # matmul saves x and w; exp saves its output
        sq = h * h                 # saves h twice: one buffer (exp's output)
        flat = sq.reshape([20])    # a view of sq
        y = flat * flat            # saves that view twice: sq's buffer, which nothing saved before
        c = conv2d(img, k)         # keeps its columns in ctx.state
        d = dropout(c, 0.5, True)  # keeps its mask
        return y.sum() + d.sum()

    nodes, out = record(run)
    tape = walk(out.grad_fn)
    assert len(tape) == len(nodes)
    first: list[tuple[np.ndarray, dict]] = []  # every saved array so far, with where it was saved
    checked_state = 0
    for node in sorted(tape, key=lambda n: n.id):
        ev = nodes[node.id]
        truth = engine_saved(node)
        got = ev.get("saved", [])
        assert [(e["role"], e.get("index")) for e in got] == [(r, i) for r, i, _ in truth], node
        assert [e["bytes"] for e in got] == [int(a.nbytes) for _, _, a in truth]
        assert [e["shape"] for e in got] == [list(a.shape) for _, _, a in truth]
        assert [e["dtype"] for e in got] == [a.dtype.name for _, _, a in truth]
        assert ev["saved_bytes"] == sum(int(a.nbytes) for _, _, a in truth)
        checked_state += sum(r == "state" for r, _, _ in truth)
        for e, (role, i, a) in zip(got, truth, strict=True):
            earlier = next((where for b, where in first if np.shares_memory(a, b)), None)
            assert e.get("alias") == earlier, (node, role, i)
            here = {"node": node.id, "role": role} | ({"index": i} if i is not None else {})
            first.append((a, earlier or here))
    assert checked_state >= 2  # conv2d's columns and dropout's mask were among them
    by_op: dict[str, list[dict]] = {}
    for e in sorted(nodes.values(), key=lambda e: e["id"]):
        by_op.setdefault(e["op"], []).append(e)
    (exp,), (square, flat_sq) = by_op["exp"], by_op["mul"]
    # by hand: the square of exp's output saves one buffer twice, exp's own output
    assert [s["alias"] for s in square["saved"]] == [{"node": exp["id"], "role": "output"}] * 2
    # the view of the square's output: saved first by the second mul's input 0, then aliased by its input 1
    assert "alias" not in flat_sq["saved"][0]
    assert flat_sq["saved"][1]["alias"] == {"node": flat_sq["id"], "role": "input", "index": 0}


def test_a_node_that_saves_nothing_has_no_saved_field(saved_path):
    x = var([3], "x")
    nodes, _ = record(lambda: x.reshape([3, 1]) + 1.0)
    reshape = next(e for e in nodes.values() if e["op"] == "reshape")
    assert "saved" not in reshape and reshape["saved_bytes"] == 0


def test_old_node_events_without_saved_stay_valid():
    ev = {"v": 1, "kind": "node", "t": 0.0, "step": 0, "id": 1, "op": "exp", "inputs": [{"leaf": 1}],
          "shape": [2], "dtype": "float32", "device": "cpu", "saved_bytes": 8}
    assert validate_event(ev) == ev


@pytest.mark.skipif(accel.saved_entries is None and os.environ.get("RTXVIZ_REQUIRE_NATIVE") != "1",
                    reason="rtxviz._native not built")
def test_the_compiled_entries_are_the_python_loops_dicts():
    """Both builders on the same nodes, each with an alias table of its own: equal lists, equal tables (views of
    views, float32 and float64, conv2d's columns kept as its state, a buffer saved by two nodes)."""
    base = np.arange(24.0).reshape(4, 6)
    x = Variable.from_tensor(Tensor(base[1:, ::2]), requires_grad=True, name="x")  # a strided view
    w = var([3, 2], "w", 5)
    f32 = Variable.from_tensor(Tensor(np.arange(6, dtype=np.float32).reshape(3, 2)), requires_grad=True)
    events: list[dict] = []
    with EventHook(events.append):
        h = x @ w
        g = (h * h.reshape([6]).reshape([3, 2])).exp()
        c = conv2d(var([1, 1, 4, 4], "img", 6), var([1, 1, 2, 2], "k", 7))
        out = g.sum() + c.sum() + (f32 * f32).sum().to(dtype="float64")
    nodes = walk(out.grad_fn)
    compiled, python = EventHook(lambda e: None), EventHook(lambda e: None)
    for node in sorted(nodes, key=lambda n: n.id):
        got = compiled._saved(node)
        want = python._saved_python(node)
        assert got == want, node
        assert [list(e) for e in got] == [list(e) for e in want]  # the same key order in the JSON
    assert compiled._buffers.keys() == python._buffers.keys()
    assert [v[1] for v in compiled._buffers.values()] == [v[1] for v in python._buffers.values()]
    assert all(a[0]() is b[0]() for a, b in zip(compiled._buffers.values(), python._buffers.values(), strict=True))
    with pytest.raises(TypeError, match="saved_entries"):
        accel.saved_entries(1, None, None, None, [], {}, 10)
