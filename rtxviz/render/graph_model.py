"""The one graph model that drawings are made from: built from a Variable's recorded graph or a run's events.

Nodes are leaves (data inputs, constants), params, ops and outputs (ops whose value nothing else consumed); each
carries op, shape, dtype, module path, rule, saved bytes and the gradient that reached it. Edges run forward
(input -> op) and carry the gradient that flowed back along them. Groups collect nodes by module path.

The event fields are the ones the browser reads (rtxviz/schema.py: `leaf`, `node`, `grad`, `leaf_grad`,
`anomaly`), so a Variable and a recorded step give the same picture.

>>> from rtxviz import Tensor, Variable
>>> x = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2]), name="x")
>>> m = GraphModel.from_variable((x * x).sum())
>>> [(n.kind, n.label) for n in m.nodes.values()]
[('param', 'x'), ('op', 'mul'), ('output', 'sum')]
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..engine.graph import TapeNode, walk_nodes
from ..engine.hooks import EngineHook, add_hook, remove_hook
from ..summary import GradStat, worst

#: `GNode.grad_note` values.
NOT_COMPUTED = "not computed"
NOT_CAPTURED = "not captured"
#: Node kinds that stand for operations (the rest are leaves and params).
OP_KINDS = ("op", "output", "group", "elided")
#: Nodes keep their output's shape and dtype once the engine records them (`TapeNode.out_shape`); until then
#: a capture records them in forward.
_NODE_SHAPES = hasattr(TapeNode, "out_shape")


@dataclass
class GNode:
    """One drawn node. `kind`: "leaf", "param", "op", "output" or "group" (a collapsed module)."""

    key: str
    kind: str
    label: str
    shape: tuple | None = None
    dtype: str | None = None
    module: str | None = None
    op: str | None = None
    rule: str = ""
    attrs: dict = field(default_factory=dict)
    saved_bytes: int | None = None
    grad: GradStat | None = None
    anomaly: str | None = None
    engine_id: int | None = None
    members: int = 1
    #: Why `grad` is None: NOT_COMPUTED (backward has not reached the node) or NOT_CAPTURED (backward ran, but
    #: no `capture_grads()` / `keep_grads()` recorded the gradient that passed through the node).
    grad_note: str | None = None


@dataclass
class GEdge:
    """Input `index` of `dst` comes from `src`; `grad` is the gradient that flowed back along it."""

    src: str
    dst: str
    index: int
    grad: GradStat | None = None
    count: int = 1


@dataclass
class GraphModel:
    """Nodes (producers before consumers, a dict keyed by `GNode.key`) and forward edges."""

    nodes: dict[str, GNode] = field(default_factory=dict)
    edges: list[GEdge] = field(default_factory=list)
    title: str | None = None
    collapsed_depth: int | None = None

    # -- queries ---------------------------------------------------------------------------------------------
    def groups(self) -> dict[str, list[str]]:
        """Module path -> keys of the nodes recorded in it (nodes outside every module are left out)."""
        out: dict[str, list[str]] = {}
        for n in self.nodes.values():
            if n.module:
                out.setdefault(n.module, []).append(n.key)
        return out

    def ops(self) -> list[GNode]:
        return [n for n in self.nodes.values() if n.kind in OP_KINDS]

    def __len__(self) -> int:
        return len(self.nodes)

    # -- builders --------------------------------------------------------------------------------------------
    @staticmethod
    def from_variable(output: Any, grads: GradCapture | None = None) -> GraphModel:
        """The graph behind `output` (a Variable): walked iteratively from `output.grad_fn`.

        Leaves show their `.grad`; ops and edges show the gradients recorded by `grads` (a `capture_grads()`
        that was active during backward), else by the global capture of `keep_grads()` when it is on. Without
        either, ops say "grad not captured" once backward has run ("not computed" before). Shapes come from the
        node (`out_shape`), `grads`, the node's saved tensors, or the consumers' saved inputs.
        """
        if grads is None:
            grads = kept_grads()
        model = GraphModel()
        root = getattr(output, "_node", None)
        if root is None:
            name = getattr(output, "name", None) or "value"
            kind = "param" if getattr(output, "requires_grad", False) and getattr(output, "name", None) else "leaf"
            model.nodes["v1"] = GNode("v1", kind, name, tuple(output.shape), output.dtype.name,
                                      grad=_leaf_grad(output, grads))
            return model
        order = list(reversed(walk_nodes(root)))  # producers first
        shapes: dict[int, tuple[tuple, str]] = {}
        for node in order:  # what consumers saved tells the shape of what they consumed
            ins = node.inputs
            if ins is None or node.freed:
                continue
            for e, t in zip(node.next, ins, strict=False):
                if e.__class__ is TapeNode and t is not None:
                    shapes.setdefault(id(e), (tuple(t.data.shape), t.data.dtype.name))
        leaf_keys: dict[int, str] = {}
        node_keys: dict[int, str] = {}
        backward_ran = False  # a freed node or a leaf with .grad: some backward went through this graph
        for node in order:
            backward_ran = backward_ran or node.freed
            for e in node.next:
                if e is not None and e.__class__ is not TapeNode and id(e) not in leaf_keys:
                    key = leaf_keys[id(e)] = f"v{len(leaf_keys) + 1}"
                    name = getattr(e, "name", None)
                    is_param = type(e).__name__ == "Parameter" or (bool(e.requires_grad) and name is not None)
                    g = _leaf_grad(e, grads)
                    backward_ran = backward_ran or g is not None
                    model.nodes[key] = GNode(key, "param" if is_param else "leaf", name or "input",
                                             tuple(e.shape), e.dtype.name, grad=g)
            key = node_keys[id(node)] = f"n{len(node_keys) + 1}"
            shape, dtype = _node_shape(node, output if node is root else None, grads, shapes)
            model.nodes[key] = GNode(
                key, "output" if node is root else "op", node.op.name, shape, dtype, node.module_path,
                node.op.name, node.op.rule or "", dict(node.attrs or {}), None if node.freed else node.saved_nbytes(),
                grads.node_grad(node) if grads is not None else _retained(output, node, root), engine_id=node.id,
            )
            for i, e in enumerate(node.next):
                if e is None:
                    continue
                src = node_keys[id(e)] if e.__class__ is TapeNode else leaf_keys[id(e)]
                g = grads.edge_grad(node, i) if grads is not None else None
                model.edges.append(GEdge(src, key, i, g))
        # A capture that saw this graph's backward leaves the nodes it did not reach "not computed"; with no
        # capture watching, a backward that ran still went through every op: its gradients were not captured.
        captured = any(n.grad is not None for n in model.nodes.values() if n.kind in OP_KINDS and
                       not (n.kind == "output" and grads is None))
        note = NOT_CAPTURED if backward_ran and not captured else NOT_COMPUTED
        for n in model.nodes.values():
            if n.grad is None and n.kind in OP_KINDS:
                n.grad_note = note
        return model

    @staticmethod
    def from_events(events: Iterable[dict], step: int | None | str = "last") -> GraphModel:
        """The graph of one step of a recorded run, from its events (dicts as the server stores them).

        step: an int, None (events outside any step), or "last" (the last step that recorded nodes; all
        events when the run has no steps).
        """
        events = list(events)
        node_steps = [e.get("step") for e in events if e.get("kind") == "node"]
        if step == "last":
            step = node_steps[-1] if node_steps else None
        model = GraphModel(title=None if step is None else f"step {step}")
        leaves = {e["id"]: e for e in events if e.get("kind") == "leaf"}  # leaves are announced once per run
        mine = [e for e in events if e.get("step") == step]
        leaf_grads: dict[int, GradStat | None] = {}
        node_grads: dict[int, dict] = {}
        anomalies: dict[int, str] = {}
        for e in mine:
            k = e.get("kind")
            if k == "grad":
                node_grads[e["node"]] = e
            elif k == "leaf_grad":
                leaf_grads[e["leaf"]] = GradStat.from_stats(e.get("stats"))
            elif k == "anomaly" and e.get("node") is not None:
                anomalies.setdefault(e["node"], e.get("message") or f"{e.get('phase')} NaN/Inf")
        nodes = [e for e in mine if e.get("kind") == "node"]
        consumed = {r["node"] for e in nodes for r in e.get("inputs", ()) if "node" in r}
        node_keys: dict[int, str] = {}
        leaf_keys: dict[int, str] = {}
        for e in nodes:
            for ref in e.get("inputs", ()):
                lid = ref.get("leaf")
                if lid is None or lid in leaf_keys:
                    continue
                le = leaves.get(lid, {})
                if le and not le.get("requires_grad", True):
                    continue  # a constant or data input: not drawn, as in from_variable (no gradient edge)
                key = leaf_keys[lid] = f"v{len(leaf_keys) + 1}"
                label = le.get("name") or ("input" if le else f"leaf {lid}")
                model.nodes[key] = GNode(key, "param" if le.get("param") else "leaf", label,
                                         tuple(le["shape"]) if "shape" in le else None, le.get("dtype"),
                                         grad=leaf_grads.get(lid), engine_id=lid)
            key = node_keys[e["id"]] = f"n{len(node_keys) + 1}"
            ge = node_grads.get(e["id"])
            model.nodes[key] = GNode(
                key, "op" if e["id"] in consumed else "output", e["op"], tuple(e.get("shape", ())), e.get("dtype"),
                e.get("module"), e["op"], e.get("rule", ""), dict(e.get("attrs") or {}), e.get("saved_bytes"),
                GradStat.from_stats(ge["output"]) if ge else None, anomalies.get(e["id"]), engine_id=e["id"],
            )
            for i, ref in enumerate(e.get("inputs", ())):
                src = node_keys.get(ref["node"]) if "node" in ref else leaf_keys.get(ref.get("leaf"))
                if src is None:
                    continue  # a node of another step (a value carried over): not drawn
                g = None
                if ge and i < len(ge.get("inputs", ())):
                    g = GradStat.from_stats(ge["inputs"][i])
                model.edges.append(GEdge(src, key, i, g))
        return model

    # -- collapsing ------------------------------------------------------------------------------------------
    def collapse(self, depth: int) -> GraphModel:
        """Fold every module path deeper than `depth` components into one "group" node per prefix.

        Params consumed only inside one group fold into it; edges between groups are merged (their gradient
        is the most alarming of the merged ones).
        """
        target: dict[str, str] = {}
        groups: dict[str, GNode] = {}
        out = GraphModel(title=self.title, collapsed_depth=depth)
        for n in self.nodes.values():
            if n.kind in ("op", "output") and n.module:
                prefix = ".".join(n.module.split(".")[:depth])
                gkey = "g:" + prefix
                g = groups.get(gkey)
                if g is None:
                    g = groups[gkey] = GNode(gkey, "group", prefix, module=prefix, members=0)
                    out.nodes[gkey] = g
                g.members += 1
                g.grad = worst([g.grad, n.grad])
                g.anomaly = g.anomaly or n.anomaly
                if n.kind == "output":
                    g.shape, g.dtype = n.shape, n.dtype
                target[n.key] = gkey
            else:
                out.nodes[n.key] = replace(n)
                target[n.key] = n.key
        # a param whose every consumer lies in one group belongs to that group
        consumers: dict[str, set[str]] = {}
        for e in self.edges:
            consumers.setdefault(e.src, set()).add(target[e.dst])
        for key, dsts in consumers.items():
            n = self.nodes[key]
            if n.kind == "param" and len(dsts) == 1 and next(iter(dsts)).startswith("g:"):
                gkey = next(iter(dsts))
                target[key] = gkey
                out.nodes.pop(key, None)
                out.nodes[gkey].attrs["params"] = out.nodes[gkey].attrs.get("params", 0) + 1
        out.edges = self._edges_between(target)
        return out

    def _edges_between(self, target: dict[str, str]) -> list[GEdge]:
        """This model's edges with each end moved to `target[end]` (a group or gap it was folded into): edges
        inside one target vanish, parallel ones merge into one that counts them and keeps the worst gradient."""
        merged: dict[tuple[str, str], GEdge] = {}
        for e in self.edges:
            s, d = target[e.src], target[e.dst]
            if s == d:
                continue
            m = merged.get((s, d))
            if m is None:
                merged[(s, d)] = GEdge(s, d, e.index, e.grad, e.count)
            else:
                m.count += e.count
                m.grad = worst([m.grad, e.grad])
        return list(merged.values())

    def max_depth(self) -> int:
        return max((len(n.module.split(".")) for n in self.nodes.values() if n.module), default=0)

    def fit(self, max_nodes: int) -> GraphModel:
        """This model, or the least-collapsed version of it with at most `max_nodes` nodes (the most collapsed
        one when none fits)."""
        if len(self.nodes) <= max_nodes:
            return self
        best = self
        for depth in range(self.max_depth(), 0, -1):
            best = self.collapse(depth)
            if len(best.nodes) <= max_nodes:
                return best
        return best

    def elide(self, max_nodes: int) -> GraphModel:
        """At most `max_nodes` nodes whatever the graph's shape (no modules needed): the first and last ops in
        producer order stay, with the leaves that feed them; everything between becomes one "elided" node
        ("… 19,800 ops …", its most common ops, the most alarming gradient among them). Edges into and out of
        the elided part are merged. A long chain keeps its start and its end around the gap.
        """
        if len(self.nodes) <= max_nodes:
            return self
        ops = [k for k, n in self.nodes.items() if n.kind in OP_KINDS]
        consumers: dict[str, list[str]] = {}
        for e in self.edges:
            consumers.setdefault(e.src, []).append(e.dst)
        k = max(1, (max_nodes - 1) // 2)
        while True:
            kept = set(ops[:k]) | set(ops[-k:])
            leaves = {key for key, n in self.nodes.items() if n.kind not in OP_KINDS and
                      (not consumers.get(key) or any(c in kept for c in consumers[key]))}
            total = len(kept) + len(leaves) + 1
            if total <= max_nodes or k == 1:
                break
            k = max(1, min(k - 1, k * max_nodes // total - 1))
        kept |= leaves
        gkey = "e:1"
        gap = GNode(gkey, "elided", "", members=0)
        counts: dict[str, int] = {}
        folded_leaves = 0
        out = GraphModel(title=self.title, collapsed_depth=self.collapsed_depth)
        target: dict[str, str] = {}
        for n in self.nodes.values():
            if n.key in kept:
                out.nodes[n.key] = replace(n)
                target[n.key] = n.key
                continue
            if gkey not in out.nodes:
                out.nodes[gkey] = gap  # where the gap starts in producer order: the DOT stays in that order
            target[n.key] = gkey
            if n.kind in OP_KINDS:
                gap.members += n.members
                counts[n.label] = counts.get(n.label, 0) + n.members
            else:
                folded_leaves += 1
            gap.grad = worst([gap.grad, n.grad])
            gap.anomaly = gap.anomaly or n.anomaly
        if gkey not in out.nodes:
            return self
        gap.label = f"… {gap.members:,} ops …"
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        gap.attrs = {"ops": dict(top), "leaves": folded_leaves}
        out.edges = self._edges_between(target)
        return out


def _dtype_name(dtype: Any) -> str | None:
    if dtype is None:
        return None
    return getattr(dtype, "name", None) or str(dtype)


def _node_shape(node: TapeNode, output: Any, grads: GradCapture | None,
                shapes: dict[int, tuple[tuple, str]]) -> tuple[tuple | None, str | None]:
    if output is not None:
        return tuple(output.shape), output.dtype.name
    out_shape = getattr(node, "out_shape", None)  # recorded by the engine on every node (once it does)
    if out_shape is not None:
        return tuple(out_shape), _dtype_name(getattr(node, "out_dtype", None))
    if grads is not None:
        known = grads.shapes.get(node)
        if known is not None:
            return known
    if node.out_data is not None:
        return tuple(node.out_data.shape), node.out_data.dtype.name
    return shapes.get(id(node), (None, None))


def _leaf_grad(v: Any, grads: GradCapture | None) -> GradStat | None:
    if grads is not None:
        g = grads.leaf_grad_of(v)
        if g is not None:
            return g
    g = getattr(v, "grad", None)
    return None if g is None else GradStat.of(g.data)


def _retained(output: Any, node: TapeNode, root: TapeNode) -> GradStat | None:
    g = getattr(output, "grad", None) if node is root else None
    return None if g is None else GradStat.of(g.data)


class GradCapture(EngineHook):
    """Records, while active, each node's output shape (forward) and the gradients of a backward pass: the
    gradient that reached each node and what flowed to each of its inputs. Keyed weakly by TapeNode, so the
    capture never keeps a graph alive. Use `capture_grads()`.
    """

    name = "rtxviz.render.capture"

    def __init__(self) -> None:
        self.shapes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.node_grads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.edge_grads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # Variables compare elementwise (==), so leaves are keyed by id with a weak reference to check identity
        self.leaf_grads: dict[int, tuple[Any, GradStat]] = {}
        self._depth = 0

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        if node is not None and not self._depth and not _NODE_SHAPES:
            self.shapes[node] = (tuple(output.data.shape), output.data.dtype.name)

    def backward_begin(self, roots: list, create_graph: bool) -> None:
        self._depth += 1

    def backward_end(self) -> None:
        self._depth = max(0, self._depth - 1)

    def backward_preprocess(self, node: Any, grad_output: Any) -> None:
        self.node_grads[node] = GradStat.of(grad_output.data)
        self.shapes.setdefault(node, (tuple(grad_output.data.shape), grad_output.data.dtype.name))

    def backward_postprocess(self, node: Any, grad_output: Any, grad_inputs: tuple) -> None:
        self.edge_grads[node] = tuple(None if g is None else GradStat.of(g.data) for g in grad_inputs)

    def leaf_grad(self, variable: Any, grad: Any) -> None:
        # the entry goes when the leaf dies (a long-lived capture, `keep_grads()`, must not grow without end);
        # the callback runs at the leaf's death, before its id can be reused
        key = id(variable)
        grads = self.leaf_grads

        def forget(_ref: Any, k: int = key) -> None:
            grads.pop(k, None)

        grads[key] = (weakref.ref(variable, forget), GradStat.of(grad.data))

    # -- lookups ---------------------------------------------------------------------------------------------
    def node_grad(self, node: TapeNode) -> GradStat | None:
        return self.node_grads.get(node)

    def edge_grad(self, node: TapeNode, index: int) -> GradStat | None:
        grads = self.edge_grads.get(node)
        return grads[index] if grads is not None and index < len(grads) else None

    def leaf_grad_of(self, v: Any) -> GradStat | None:
        entry = self.leaf_grads.get(id(v))
        return entry[1] if entry is not None and entry[0]() is v else None


class capture_grads:
    """Context manager: record gradient norms per node (and forward shapes) for `render(..., grads=...)`.

    >>> from rtxviz import Tensor, Variable
    >>> x = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2]), name="x")
    >>> with capture_grads() as grads:
    ...     y = (x * 3.0).sum()
    ...     y.backward()
    >>> m = GraphModel.from_variable(y, grads)
    >>> round(m.nodes["n1"].grad.norm, 4)    # dL/d(x*3) = [1, 1]
    1.4142
    """

    def __init__(self) -> None:
        self.capture = GradCapture()

    def __enter__(self) -> GradCapture:
        add_hook(self.capture)
        return self.capture

    def __exit__(self, *exc: object) -> None:
        remove_hook(self.capture)


_KEPT: GradCapture | None = None


def keep_grads(on: bool = True) -> GradCapture | None:
    """Switch on (or off) a global gradient capture: every later backward records each op's gradient norm
    and the norms along its edges, so `render(loss, "step.svg")` after a training loop draws the last step's
    gradients without a `capture_grads()` block. Returns the capture (None when switched off).

    The capture is keyed weakly by TapeNode: it holds no graph alive and forgets a graph when it is dropped.
    Cost while on: the engine's hook path, plus one norm per gradient in backward (one host sync per node on
    a GPU), so leave it off in timed runs.

    >>> from rtxviz import Tensor, Variable
    >>> x = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2]), name="x")
    >>> _ = keep_grads()
    >>> y = (x * 3.0).sum(); y.backward()
    >>> round(GraphModel.from_variable(y).edges[0].grad.norm, 4)   # 3·[1, 1] flowed back to x
    4.2426
    >>> keep_grads(False)
    """
    global _KEPT
    if on:
        if _KEPT is None:
            _KEPT = GradCapture()
        add_hook(_KEPT)
        return _KEPT
    if _KEPT is not None:
        remove_hook(_KEPT)
        _KEPT = None
    return None


def kept_grads() -> GradCapture | None:
    """The global capture of `keep_grads()`, or None when it is off."""
    return _KEPT
