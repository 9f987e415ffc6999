"""Graphs on paper and in notebooks: `render(output, "graph.svg")`, DOT text, graphviz with a timeout.

Importing this package also gives every Variable a `_repr_svg_`, so a non-leaf Variable shows as its graph in
Jupyter (leaves, and machines without graphviz, fall back to the plain repr).

Gradients: leaves always show their `.grad`. Per-op gradient norms and the norms along edges are recorded only
while a capture watches backward: `rtxviz.render.keep_grads()` once (every later backward is recorded, weakly
keyed by graph node), or `with capture_grads() as g:` around one backward and `render(..., grads=g)`. Without
either, ops drawn after backward say "grad not captured" and the legend says how to capture.

Big graphs are cut to `max_nodes` (300; 120 for Jupyter): module groups collapse into boxes, and whatever is
still too big (a long chain with no modules) keeps its first and last ops around one "… N ops …" node.

>>> import rtxviz
>>> from rtxviz.render import render, capture_grads
>>> x = rtxviz.Variable.from_tensor(rtxviz.Tensor.from_slice([1.0, -2.0], [2]), name="x")
>>> with capture_grads() as grads:
...     y = (x * x).sum()
...     y.backward()
>>> render(y, "/tmp/rtxviz_doctest.dot", grads=grads)
'/tmp/rtxviz_doctest.dot'
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterable
from typing import Any

from ..engine.errors import RtxvizError
from ..engine.variable import Variable
from ..files import replacing
from ..summary import EXPLODING, VANISHING, GradStat
from .display import svg_or_none
from .dot import DotOptions, quote, to_dot
from .graph_model import (
    NOT_CAPTURED,
    NOT_COMPUTED,
    GEdge,
    GNode,
    GradCapture,
    GraphModel,
    capture_grads,
    keep_grads,
    kept_grads,
)
from .graphviz_run import (
    DEFAULT_MAX_NODES,
    DEFAULT_TIMEOUT,
    FORMATS,
    GraphvizNotFound,
    RenderFailed,
    RenderTimeout,
    find_dot,
    render_model,
    run_dot,
)
from .torch_graph import events_of, is_torch_tensor

__all__ = [
    "EXPLODING", "NOT_CAPTURED", "NOT_COMPUTED", "VANISHING", "DotOptions", "GEdge", "GNode", "GradCapture",
    "GradStat", "GraphModel", "GraphvizNotFound", "RenderFailed", "RenderTimeout", "capture_grads", "find_dot",
    "graph_model", "keep_grads", "kept_grads", "quote", "render", "render_model", "run_dot", "svg_or_none", "to_dot",
]


def graph_model(source: Any, grads: GradCapture | None = None, step: int | None | str = "last") -> GraphModel:
    """A GraphModel from a Variable, a PyTorch tensor, a GraphModel (returned as is) or a run's events (a list of
    dicts)."""
    if isinstance(source, GraphModel):
        return source
    if isinstance(source, Variable):
        return GraphModel.from_variable(source, grads)
    if is_torch_tensor(source):  # the graph behind a PyTorch tensor (rtxviz.torch's recorder adds names, grads)
        return GraphModel.from_events(events_of(source), step=None)
    if isinstance(source, Iterable) and not isinstance(source, str | bytes):
        return GraphModel.from_events(source, step=step)
    raise TypeError(f"render: expected a Variable, a PyTorch tensor, a GraphModel or a list of events, got "
                    f"{type(source).__name__}")


def render(output: Any, path: str = "graph.svg", show_grads: bool = True, show_saved: bool = False,
           show_attrs: bool = False, group_modules: bool = True, *, grads: GradCapture | None = None,
           max_nodes: int | None = DEFAULT_MAX_NODES, timeout: float = DEFAULT_TIMEOUT, step: int | None | str = "last",
           **dot_options: Any) -> str:
    """Draw the graph behind `output` to `path`; the format follows the extension (.svg, .png, .pdf, or .dot
    for the DOT text alone, which needs no graphviz). Returns `path`.

    output: a Variable (its recorded graph), a PyTorch tensor (the autograd graph behind it: module clusters and
    per-op gradients when it ran under `rtxviz.torch.watch`/`record`, parameters' `.grad` always), a GraphModel,
    or a recorded run's events (`step` picks the step).
    show_grads: gradient norms on nodes and edges, vanishing/exploding/NaN marked; leaves show `.grad`, ops
    and edges show what `grads` (a `capture_grads()` active during backward) recorded, else what the global
    `keep_grads()` capture recorded, else "grad not captured". show_saved: bytes each node keeps for
    backward. show_attrs: the op's rule and attributes. group_modules: module paths as clusters, and above
    `max_nodes` nodes whole modules fold into one box each; a graph still too big (or not grouped) keeps its
    first and last ops around one "… N ops …" node (max_nodes=None: no limit). `dot` runs with a `timeout`.

    >>> render(rtxviz.Variable.from_tensor(rtxviz.Tensor.ones([2])).sum(), "/tmp/g.svg")  # doctest: +SKIP
    '/tmp/g.svg'
    """
    ext = os.path.splitext(str(path))[1].lower().lstrip(".")
    fmt = FORMATS.get(ext)
    if fmt is None:
        raise RtxvizError(f"render: cannot tell the format of {str(path)!r}; use a .svg, .png, .pdf or .dot file")
    model = graph_model(output, grads, step)
    data = render_model(model, fmt, show_grads=show_grads, show_saved=show_saved, show_attrs=show_attrs,
                        group_modules=group_modules, max_nodes=max_nodes, timeout=timeout, **dot_options)
    with replacing(str(path)) as target:  # a failed write never leaves half a drawing where one was
        with open(target, "wb") as f:
            f.write(data)
    return str(path)


class _CallableModule(types.ModuleType):
    """`rtxviz.render(...)` calls `render`, while `rtxviz.render.capture_grads` etc. stay reachable: the package
    can be exported from rtxviz/__init__.py as the module itself without the function shadowing it."""

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        return render(*args, **kwargs)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _CallableModule
