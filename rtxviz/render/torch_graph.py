"""The graph behind a PyTorch tensor, as the events a recorded run holds, for `render(torch_tensor, ...)`.

Recognised by its methods (`grad_fn`, `next_functions`): this layer never imports torch. The walk reads what
PyTorch keeps on every node: its class name, `next_functions`, `_input_metadata` (the output's shape and dtype);
and what `rtxviz.torch` left in `node.metadata["rtxviz"]` when the forward and backward ran under its recorder
(`watch` or `record`): the op name users know, the module path, the gradients of the last backward. Parameters
show the norm of their `.grad`.

>>> op_from_grad_fn("NativeLayerNormBackward0"), op_from_grad_fn("torch::autograd::AccumulateGrad")
('native_layer_norm', 'accumulate_grad')
"""

from __future__ import annotations

import re
from typing import Any

from ..summary import tensor_stats

#: the grad_fn name PyTorch gives the node that accumulates into a leaf's `.grad`
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
#: where rtxviz.torch keeps what it knows of a node, in PyTorch's own per-node dict (`Node.metadata`)
METADATA_KEY = "rtxviz"

_SUFFIX = re.compile(r"Backward\d*$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KNOWN = {"checkpoint_function": "checkpoint"}


def op_from_grad_fn(name: str) -> str:
    """The op name for an autograd node PyTorch calls `name` (``AddmmBackward0`` -> ``addmm``)."""
    base = _SUFFIX.sub("", name.rpartition("::")[2])
    snake = _CAMEL.sub("_", base).lower() or name
    return _KNOWN.get(snake, snake)


def is_torch_tensor(x: Any) -> bool:
    """A PyTorch tensor, told by its type's module and the autograd attribute (no torch import)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "grad_fn") and hasattr(x, "requires_grad")


def _numpy(t: Any) -> Any:
    d = t.detach()
    if not str(d.dtype).startswith(("torch.float32", "torch.float64")):
        d = d.double()
    return d.cpu().numpy()


def events_of(output: Any) -> list[dict]:
    """`node`, `leaf`, `grad` and `leaf_grad` events (step None) for the graph behind a PyTorch tensor."""
    root = output.grad_fn
    if root is None:
        raise TypeError("render: this PyTorch tensor has no graph (grad_fn is None: a leaf, or made without "
                        "grad); render a tensor computed from parameters or inputs with requires_grad=True")
    events: list[dict] = []
    ids: dict[Any, tuple[str, int]] = {}
    order: list[Any] = []
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:  # producers before consumers: a post-order over next_functions
        fn, done = stack.pop()
        if done:
            order.append(fn)
            continue
        if fn in ids:
            continue
        ids[fn] = ("pending", 0)
        stack.append((fn, True))
        for child, _ in reversed(fn.next_functions):
            if child is not None and child not in ids:
                stack.append((child, False))
    n_nodes = n_leaves = 0
    for fn in order:
        meta = fn.metadata.get(METADATA_KEY, {})
        name = fn.name()
        if name == ACCUMULATE_GRAD:
            n_leaves += 1
            ids[fn] = ("leaf", n_leaves)
            v = fn.variable
            events.append({"kind": "leaf", "id": n_leaves, "name": meta.get("name"), "shape": list(v.shape),
                           "dtype": str(v.dtype).removeprefix("torch."), "device": str(v.device),
                           "requires_grad": True, "param": True, "step": None})
            if v.grad is not None:
                events.append({"kind": "leaf_grad", "leaf": n_leaves, "stats": tensor_stats(_numpy(v.grad)),
                               "step": None})
            continue
        n_nodes += 1
        ids[fn] = ("node", n_nodes)
        md = fn._input_metadata
        inputs = [{ids[c][0]: ids[c][1]} for c, _ in fn.next_functions if c is not None]
        events.append({"kind": "node", "id": n_nodes, "op": meta.get("op") or op_from_grad_fn(name),
                       "inputs": inputs, "shape": list(md[0].shape) if md else [],
                       "dtype": str(md[0].dtype).removeprefix("torch.") if md else "?",
                       "device": str(md[0].device) if md else "cpu",
                       "module": meta.get("module"), "attrs": {"grad_fn": name}, "step": None})
        if "grad" in meta:
            events.append({"kind": "grad", "node": n_nodes, "output": meta["grad"],
                           "inputs": meta.get("input_grads", []), "step": None})
    return events
