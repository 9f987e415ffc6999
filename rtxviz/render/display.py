"""Jupyter display: a non-leaf Variable and a GraphModel show as their SVG graph (`_repr_svg_`), cut small and
drawn under a short timeout, falling back to the text repr for leaves and on machines without graphviz.

The engine and the graph model know nothing of notebooks: this module gives both their `_repr_svg_`.
"""

from __future__ import annotations

from typing import Any

from ..engine.errors import RtxvizError
from ..engine.variable import Variable
from .graph_model import GraphModel
from .graphviz_run import REPR_MAX_NODES, REPR_TIMEOUT, find_dot, render_model


def svg_or_none(obj: Any, timeout: float = REPR_TIMEOUT, max_nodes: int = REPR_MAX_NODES) -> str | None:
    """SVG text for Jupyter's `_repr_svg_`: None (plain repr instead) for leaves or when `dot` is missing/slow.
    The graph is cut to `max_nodes` (collapsed modules, elided chains) so it lays out well within `timeout`."""
    if find_dot() is None:
        return None
    if not isinstance(obj, GraphModel):
        if getattr(obj, "_node", None) is None:
            return None
        obj = GraphModel.from_variable(obj)
    try:
        return render_model(obj, "svg", timeout=timeout, max_nodes=max_nodes).decode("utf-8")
    except RtxvizError:
        return None


def _repr_svg_(self: Any) -> str | None:
    """Jupyter: the graph as SVG (None falls back to the text repr)."""
    return svg_or_none(self)


Variable._repr_svg_ = _repr_svg_  # type: ignore[attr-defined]
GraphModel._repr_svg_ = _repr_svg_  # type: ignore[attr-defined]
