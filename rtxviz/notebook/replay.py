"""A Variable's recorded graph as the events a watched run would have sent, so `show(variable)` draws it with the
same app: `leaf` and `node` events (producers first), then `grad` / `leaf_grad` for the gradients backward left.

The graph comes from `GraphModel.from_variable` (rtxviz.render), the model the SVG is drawn from: shapes,
dtypes, module paths and rules are the ones the SVG shows, and gradients are there when they were kept
(`.grad` on leaves; `keep_grads()` / `capture_grads()` for the ops).

>>> from rtxviz import Tensor, Variable
>>> x = Variable.from_tensor(Tensor.from_slice([3.0], [1]), name="x")
>>> y = (x * x).sum()
>>> y.backward()
>>> [(e["kind"], e.get("op") or e.get("name")) for e in graph_events(y)][:3]
[('run_start', 'x'), ('leaf', 'x'), ('node', 'mul')]
>>> [e["stats"]["norm"] for e in graph_events(y) if e["kind"] == "leaf_grad"]
[6.0]
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from ..render.graph_model import OP_KINDS, GraphModel
from ..render.torch_graph import events_of, is_torch_tensor
from ..summary import GradStat


def _stats(g: GradStat, shape: tuple | None) -> dict:
    return {"shape": list(shape or ()), "norm": g.norm, "min": None, "max": None, "nan": g.nan, "inf": g.inf}


def graph_events(output: Any, name: str | None = None) -> Iterator[dict]:
    """The events that draw `output`'s graph (see the module docstring), in an order the viewer applies. A PyTorch
    tensor's graph is read from its grad_fn, as `rtxviz.render` reads it."""
    t = time.time()
    base = {"v": 1, "t": t, "step": None}
    if is_torch_tensor(output):
        yield {**base, "kind": "run_start", "name": name or "graph"}
        for ev in events_of(output):
            yield {**base, **ev}
        return
    model = GraphModel.from_variable(output)
    yield {**base, "kind": "run_start", "name": name or getattr(output, "name", None) or
           next((n.label for n in model.nodes.values()), "graph")}
    ids = {key: i + 1 for i, key in enumerate(model.nodes)}
    inputs: dict[str, list] = {key: [] for key in model.nodes}
    for e in sorted(model.edges, key=lambda e: e.index):
        inputs[e.dst].append(e)
    grads: list[dict] = []
    for key, n in model.nodes.items():
        shape = list(n.shape or ())
        if n.kind not in OP_KINDS:
            yield {**base, "kind": "leaf", "id": ids[key], "name": n.label, "shape": shape, "dtype": n.dtype or "?",
                   "device": "cpu", "requires_grad": n.kind == "param", "param": n.kind == "param"}
            if n.grad is not None:
                grads.append({**base, "kind": "leaf_grad", "leaf": ids[key], "stats": _stats(n.grad, n.shape)})
            continue
        refs = [{"node": ids[e.src]} if model.nodes[e.src].kind in OP_KINDS else {"leaf": ids[e.src]}
                for e in inputs[key]]
        yield {**base, "kind": "node", "id": ids[key], "op": n.op or n.label, "inputs": refs, "shape": shape,
               "dtype": n.dtype or "?", "device": "cpu", "module": n.module, "rule": n.rule}
        if n.grad is not None:
            grads.append({**base, "kind": "grad", "node": ids[key], "output": _stats(n.grad, n.shape),
                          "inputs": [None if e.grad is None else _stats(e.grad, model.nodes[e.src].shape)
                                     for e in inputs[key]]})
    yield from grads
