"""DOT text from a GraphModel, written by our own code: deterministic, every label escaped, testable without
graphviz.

Ids: nodes keep their model keys (``v1``, ``n3``, ``g:model.fc1`` quoted); module groups become nested
``cluster_m<k>`` subgraphs numbered in order of first appearance. Gradient health is drawn as colour and a
word in the label: vanishing (norm < 1e-7), exploding (norm > 1e3) and NaN/Inf; "grad: not computed" says
backward has not reached a node yet (not the same as a zero gradient).

>>> from rtxviz.render.graph_model import GraphModel, GNode
>>> m = GraphModel({"n1": GNode("n1", "output", 'say "hi"', (2,), "float32")})
>>> 'label="say \\\\"hi\\\\"' in to_dot(m, show_grads=False)
True
"""

from __future__ import annotations

from dataclasses import dataclass

from ..summary import CLASSES, EXPLODING, VANISHING, GradStat
from .graph_model import NOT_CAPTURED, GEdge, GNode, GraphModel

FILL = {"leaf": "#e0f2fe", "param": "#bfdbfe", "op": "#f3f4f6", "output": "#bbf7d0", "group": "#fef3c7",
        "elided": "#f5f5f4"}
#: What to do when backward ran but no gradient was recorded (the legend says it; node labels stay short).
CAPTURE_HINT = ("call rtxviz.render.keep_grads() before backward, or run backward inside "
                "`with rtxviz.render.capture_grads() as g:` and pass grads=g")
#: status -> (border/edge colour, fill override or None, word in the label): the shared classes of rtxviz.summary
MARK = {name: (c.colour, c.fill, c.word) for name, c in CLASSES.items()}
NOT_COMPUTED = CLASSES["none"].colour


@dataclass(frozen=True)
class DotOptions:
    show_grads: bool = True
    show_saved: bool = False
    show_attrs: bool = False
    group_modules: bool = True
    vanishing: float = VANISHING
    exploding: float = EXPLODING
    rankdir: str = "TB"
    legend: bool = True
    #: label each edge with the shape (and dtype) of the tensor it carries: its source's output
    show_shapes: bool = False


def quote(text: object) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines kept as DOT's ``\\n``, and ``&`` written
    ``&amp;``: graphviz reads entities in labels, so a module named ``a &amp; b`` was drawn as ``a & b``.

    >>> quote('a"b\\\\c\\nd')
    '"a\\\\"b\\\\\\\\c\\\\nd"'
    >>> quote("x &lt; y & z")
    '"x &amp;lt; y &amp; z"'
    """
    s = str(text).replace("&", "&amp;").replace("\\", "\\\\").replace('"', '\\"')
    s = s.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{s}"'


def fmt_norm(x: float | None) -> str:
    """A gradient norm in 3 significant digits: ``1.23e-04``, ``0.5``, ``12.3``."""
    if x is None:
        return "NaN/Inf"
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e4:
        return f"{x:.3g}"
    return f"{x:.2e}"


def fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _grad_line(g: GradStat | None, o: DotOptions, note: str | None = None) -> str:
    if g is None:
        return "grad not captured" if note == NOT_CAPTURED else "grad: not computed"
    status = g.status(o.vanishing, o.exploding)
    if status == "nonfinite":
        return f"grad NaN/Inf ({g.nan} NaN, {g.inf} Inf)"
    word = MARK[status][2]
    return f"‖grad‖ {fmt_norm(g.norm)}" + (f" {word}" if word else "")


def _shape(n: GNode) -> str:
    if n.shape is None:
        return "?"
    dims = "×".join(str(d) for d in n.shape) if n.shape else "scalar"
    return f"{dims} {n.dtype}" if n.dtype else dims


def node_label(n: GNode, o: DotOptions) -> str:
    """The text lines of a node (joined by newlines; `quote` escapes them)."""
    if n.kind == "group":
        lines = [f"[{n.label}]", f"{n.members} ops" + (f", {n.attrs['params']} params" if n.attrs.get("params")
                                                       else "")]
    elif n.kind == "elided":
        ops = list(n.attrs.get("ops", {}).items())
        summary = ", ".join(f"{name} ×{count:,}" for name, count in ops[:3]) + (", …" if len(ops) > 3 else "")
        lines = [n.label, summary]
        if n.attrs.get("leaves"):
            lines.append(f"+ {n.attrs['leaves']:,} inputs/params")
    else:
        lines = [n.label]
    if n.kind not in ("group", "elided") or n.shape is not None:
        lines.append(_shape(n))
    if o.show_attrs and n.kind in ("op", "output"):
        if n.rule:
            lines.append(n.rule)
        for k, v in sorted(n.attrs.items()):
            text = f"{k}={v}"
            lines.append(text if len(text) <= 60 else text[:59] + "…")
    if o.show_saved and n.saved_bytes:
        lines.append(f"saved {fmt_bytes(n.saved_bytes)}")
    if o.show_grads and (n.kind not in ("leaf", "elided") or n.grad is not None):
        lines.append(_grad_line(n.grad, o, n.grad_note))
    if n.anomaly:
        lines.append("⚠ " + (n.anomaly if len(n.anomaly) <= 60 else n.anomaly[:59] + "…"))
    return "\n".join(lines)


def _node_attrs(n: GNode, o: DotOptions) -> str:
    fill, colour, pen = FILL.get(n.kind, "#ffffff"), "#374151", 1.0
    status = "ok"
    if o.show_grads and n.grad is not None:
        status = n.grad.status(o.vanishing, o.exploding)
    if n.anomaly:
        status = "nonfinite"
    if status != "ok":
        colour, override, _ = MARK[status]
        fill, pen = override or fill, 2.5
    elif o.show_grads and n.grad is None and n.kind not in ("leaf", "elided"):
        colour = NOT_COMPUTED
    shape = {"leaf": "ellipse", "param": "ellipse", "group": "box3d", "elided": "box"}.get(n.kind, "box")
    style = "filled" if n.kind in ("leaf", "param", "group") else "rounded,filled"
    if n.kind == "elided":
        style = "filled,dotted"
    elif o.show_grads and n.grad is None and n.kind != "leaf":
        style += ",dashed"
    tip = n.kind  # no engine ids in the text: the same graph gives the same DOT in any process
    if n.module:
        tip += f" in {n.module}"
    return (f"id={quote('rtx-' + n.key)}, class={quote(f'rtx-{n.kind} rtx-{status}')}, "
            f"label={quote(node_label(n, o))}, "
            f"shape={shape}, style={quote(style)}, fillcolor={quote(fill)}, color={quote(colour)}, "
            f"penwidth={pen}, tooltip={quote(tip)}")


def edge_shape(src: GNode | None) -> str | None:
    """What `show_shapes` writes on an edge: the shape its source produced, ``2×3``, or None when unknown (a
    collapsed group's box carries no one shape).

    >>> edge_shape(GNode("n1", "op", "matmul", (2, 3), "float32")), edge_shape(GNode("g", "group", "m", None))
    ('2×3', None)
    """
    if src is None or src.shape is None or src.kind == "group":
        return None
    return "×".join(str(d) for d in src.shape) if src.shape else "scalar"


def _edge_attrs(e: GEdge, o: DotOptions, src: GNode | None = None) -> str:
    parts = []
    lines = []
    shape = edge_shape(src) if o.show_shapes else None
    if shape is not None:
        lines.append(shape)
    if o.show_grads and e.grad is not None:
        status = e.grad.status(o.vanishing, o.exploding)
        colour = MARK[status][0]
        lines.append(fmt_norm(e.grad.norm) if status != "nonfinite" else "NaN/Inf")
        parts += [f"color={quote(colour)}", f"fontcolor={quote(colour)}"]
        if status != "ok":
            parts.append("penwidth=2.5")
    if lines:
        parts.insert(0, f"label={quote(chr(10).join(lines))}")
    if e.count > 1:
        parts.append(f"taillabel={quote('×' + str(e.count))}")
    return ", ".join(parts)


def _cluster_tree(model: GraphModel) -> tuple[dict[str, list[str]], dict[str | None, list[str]]]:
    """Module path -> its nodes, and parent path -> child paths (nesting under the nearest drawn ancestor)."""
    members: dict[str, list[str]] = {}
    for n in model.nodes.values():
        path = n.module if n.kind in ("op", "output", "group") else None
        if n.kind == "group" and n.module and model.collapsed_depth is not None:
            path = ".".join(n.module.split(".")[:-1]) or None  # a group box sits in its parent's cluster
        if path:
            members.setdefault(path, []).append(n.key)
    paths = set(members)
    # ancestors are drawn too when they hold two or more drawn descendants' clusters
    for p in list(paths):
        parts = p.split(".")
        for i in range(1, len(parts)):
            paths.add(".".join(parts[:i]))
    children: dict[str | None, list[str]] = {}
    for p in sorted(paths, key=lambda s: (s.count("."), s)):
        parts = p.split(".")
        parent = None
        for i in range(len(parts) - 1, 0, -1):
            cand = ".".join(parts[:i])
            if cand in paths:
                parent = cand
                break
        children.setdefault(parent, []).append(p)
    return members, children


def to_dot(model: GraphModel, show_grads: bool = True, show_saved: bool = False, show_attrs: bool = False,
           group_modules: bool = True, **options: object) -> str:
    """DOT text of `model`. Options: vanishing, exploding (thresholds), rankdir, legend (see `DotOptions`)."""
    o = DotOptions(show_grads, show_saved, show_attrs, group_modules, **options)  # type: ignore[arg-type]
    out = ["digraph rtxviz {"]
    graph_attrs = [f"rankdir={o.rankdir}", 'fontname="Helvetica"', "fontsize=11", "nodesep=0.25", "ranksep=0.35"]
    if model.title:
        graph_attrs += [f"label={quote(model.title)}", "labelloc=t"]
    out.append(f"  graph [{', '.join(graph_attrs)}];")
    out.append('  node [fontname="Helvetica", fontsize=10];')
    out.append('  edge [fontname="Helvetica", fontsize=8, color="#6b7280", arrowsize=0.6];')
    drawn: set[str] = set()
    if group_modules:
        members, children = _cluster_tree(model)
        counter = [0]

        def emit_cluster(path: str, indent: str) -> None:
            # iterative enough: module nesting is shallow, but keep an explicit stack of work anyway
            stack: list[tuple[str, str, bool]] = [(path, indent, False)]
            while stack:
                p, ind, closing = stack.pop()
                if closing:
                    out.append(f"{ind}}}")
                    continue
                counter[0] += 1
                out.append(f"{ind}subgraph cluster_m{counter[0]} {{")
                out.append(f'{ind}  label={quote(p)}; tooltip={quote(p)}; style="rounded,dashed"; '
                           f'color="#9ca3af"; fontcolor="#4b5563"; fontsize=9;')
                for key in members.get(p, ()):
                    out.append(f"{ind}  {quote(key)} [{_node_attrs(model.nodes[key], o)}];")
                    drawn.add(key)
                stack.append((p, ind, True))
                for child in reversed(children.get(p, ())):
                    stack.append((child, ind + "  ", False))

        for top in children.get(None, ()):
            emit_cluster(top, "  ")
    for n in model.nodes.values():
        if n.key not in drawn:
            out.append(f"  {quote(n.key)} [{_node_attrs(n, o)}];")
    for e in model.edges:
        attrs = _edge_attrs(e, o, model.nodes.get(e.src))
        out.append(f"  {quote(e.src)} -> {quote(e.dst)}" + (f" [{attrs}]" if attrs else "") + ";")
    if o.legend and o.show_grads:
        out.extend(_legend(o, any(n.grad_note == NOT_CAPTURED for n in model.nodes.values())))
    out.append("}")
    return "\n".join(out) + "\n"


def _legend(o: DotOptions, not_captured: bool = False) -> list[str]:
    rows = [
        ("legend_ok", "gradient ok", "#ffffff", MARK["ok"][0], "rounded,filled"),
        ("legend_zero", CLASSES["zero"].legend, MARK["zero"][1], MARK["zero"][0], "rounded,filled"),
        ("legend_vanishing", f"vanishing: ‖grad‖ < {o.vanishing:g}", MARK["vanishing"][1], MARK["vanishing"][0],
         "rounded,filled"),
        ("legend_exploding", f"exploding: ‖grad‖ > {o.exploding:g}", MARK["exploding"][1], MARK["exploding"][0],
         "rounded,filled"),
        ("legend_nonfinite", CLASSES["nonfinite"].legend, MARK["nonfinite"][1], MARK["nonfinite"][0],
         "rounded,filled"),
        ("legend_none", "grad not computed (backward has not reached it)", "#ffffff", NOT_COMPUTED,
         "rounded,filled,dashed"),
    ]
    if not_captured:
        rows.append(("legend_not_captured", "grad not captured: backward ran, but op gradients were not "
                     f"recorded;\n{CAPTURE_HINT}", "#ffffff", NOT_COMPUTED, "rounded,filled,dashed"))
    lines = ["  subgraph cluster_legend {", '    label="legend"; style="rounded"; color="#d1d5db"; fontsize=9;']
    for key, text, fill, colour, style in rows:
        lines.append(f"    {key} [id={quote('rtx-' + key)}, label={quote(text)}, shape=box, style={quote(style)}, "
                     f"fillcolor={quote(fill)}, color={quote(colour)}, penwidth=1.5, fontsize=8];")
    lines.append("    " + " -> ".join(r[0] for r in rows) + " [style=invis];")
    lines.append("  }")
    return lines
