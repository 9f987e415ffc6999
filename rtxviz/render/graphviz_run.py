"""Run graphviz's `dot` ourselves: with a timeout and network-simplex limits, so a big graph never hangs the
caller (the PyPI `graphviz` wrapper has no timeout). Missing `dot` and timeouts raise errors that say what to do.

>>> from rtxviz.render.graph_model import GraphModel, GNode
>>> model = GraphModel({"n1": GNode("n1", "output", "sum", (), "float32")})
>>> svg = render_model(model, "svg")            # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from ..engine.errors import RtxvizError
from .dot import to_dot
from .graph_model import GraphModel

#: Formats `dot` is asked for, by file extension.
FORMATS = {"svg": "svg", "png": "png", "pdf": "pdf", "dot": "dot", "gv": "dot"}
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_NODES = 300
NSLIMIT = 2
#: Jupyter's `_repr_svg_` blocks the notebook while it runs: a smaller graph and a short timeout, then the repr.
REPR_MAX_NODES = 120
REPR_TIMEOUT = 3.0

INSTALL_HINT = (
    "graphviz's `dot` program is needed to draw graphs, and it is not installed (the `graphviz` Python package is "
    "only a wrapper). Install it with one of:\n"
    "  Debian/Ubuntu:  sudo apt-get install graphviz\n"
    "  macOS:          brew install graphviz\n"
    "  conda:          conda install -c conda-forge graphviz\n"
    "or set RTXVIZ_DOT to the path of the `dot` executable. Without it, write the DOT text with "
    "render(output, 'graph.dot') or rtxviz.render.to_dot(...)."
)


class GraphvizNotFound(RtxvizError, RuntimeError):
    """The `dot` executable is not installed or not on PATH."""


class RenderTimeout(RtxvizError, TimeoutError):
    """`dot` took longer than the timeout (the graph is too big to lay out in time)."""


class RenderFailed(RtxvizError, RuntimeError):
    """`dot` exited with an error."""


def find_dot() -> str | None:
    """The `dot` executable: $RTXVIZ_DOT, else `dot` on PATH, else None."""
    env = os.environ.get("RTXVIZ_DOT")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    return shutil.which("dot")


def run_dot(dot_text: str, fmt: str = "svg", timeout: float = DEFAULT_TIMEOUT, nslimit: float = NSLIMIT,
            n_nodes: int | None = None) -> bytes:
    """Lay out and draw `dot_text`; returns the output bytes (SVG text, PNG or PDF data).

    Raises GraphvizNotFound (with install instructions), RenderTimeout (suggesting collapsing), RenderFailed.
    """
    exe = find_dot()
    if exe is None:
        raise GraphvizNotFound(INSTALL_HINT)
    cmd = [exe, f"-T{fmt}", f"-Gnslimit={nslimit}", f"-Gnslimit1={nslimit}"]
    try:
        proc = subprocess.run(cmd, input=dot_text.encode("utf-8"), capture_output=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:  # subprocess.run has killed dot by now
        size = f" ({n_nodes} nodes)" if n_nodes is not None else ""
        raise RenderTimeout(
            f"render: graphviz `dot` did not finish within {timeout:g} s{size}. Collapse module groups and "
            "elide long chains with a smaller budget (render(..., group_modules=True, max_nodes=100)), draw a "
            "smaller part of the graph, or pass a larger timeout=..."
        ) from None
    except OSError as exc:
        raise GraphvizNotFound(f"could not run {exe!r}: {exc}\n{INSTALL_HINT}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise RenderFailed(f"render: `dot -T{fmt}` failed (exit {proc.returncode}): {err[:2000]}")
    return proc.stdout


def prepare(model: GraphModel, group_modules: bool = True, max_nodes: int | None = DEFAULT_MAX_NODES) -> GraphModel:
    """At most `max_nodes` nodes (None: no limit): module groups collapse first (when grouping modules), then
    the middle of what is still too big is elided into one "… N ops …" node (any graph, modules or not)."""
    if max_nodes is None or len(model) <= max_nodes:
        return model
    if group_modules:
        model = model.fit(max_nodes)
    return model.elide(max_nodes)


def render_model(model: GraphModel, fmt: str = "svg", show_grads: bool = True, show_saved: bool = False,
                 show_attrs: bool = False, group_modules: bool = True, max_nodes: int | None = DEFAULT_MAX_NODES,
                 timeout: float = DEFAULT_TIMEOUT, **dot_options: Any) -> bytes:
    """DOT from `model` (cut to `max_nodes`, see `prepare`) run through `dot`; `fmt` "dot" skips graphviz."""
    model = prepare(model, group_modules, max_nodes)
    text = to_dot(model, show_grads=show_grads, show_saved=show_saved, show_attrs=show_attrs,
                  group_modules=group_modules, **dot_options)
    if fmt == "dot":
        return text.encode("utf-8")
    return run_dot(text, fmt, timeout=timeout, n_nodes=len(model))
