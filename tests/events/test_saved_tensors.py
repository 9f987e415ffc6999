"""The node events' `saved` field against the engine's real saved tensors: what each recorded node keeps for its
backward (its TapeNode's inputs, output and ctx.state arrays, read from the node itself, not from the hook), their
bytes, shapes, and which of them share one buffer (told apart here by numpy's own `shares_memory`)."""

from __future__ import annotations

import json

import numpy as np

from rtxviz import Tensor, Variable
from rtxviz.engine import hooks
from rtxviz.engine.ops.nn_conv import conv2d
from rtxviz.engine.ops.nn_norm import dropout
from rtxviz.events import EventHook, validate_event


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


def test_saved_matches_the_engines_tensors_and_aliases():
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


def test_a_node_that_saves_nothing_has_no_saved_field():
    x = var([3], "x")
    nodes, _ = record(lambda: x.reshape([3, 1]) + 1.0)
    reshape = next(e for e in nodes.values() if e["op"] == "reshape")
    assert "saved" not in reshape and reshape["saved_bytes"] == 0


def test_old_node_events_without_saved_stay_valid():
    ev = {"v": 1, "kind": "node", "t": 0.0, "step": 0, "id": 1, "op": "exp", "inputs": [{"leaf": 1}],
          "shape": [2], "dtype": "float32", "device": "cpu", "saved_bytes": 8}
    assert validate_event(ev) == ev
