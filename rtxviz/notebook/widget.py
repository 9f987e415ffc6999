"""The live viewer as a Jupyter widget (anywidget): the page's app in the cell's output, fed over the comm.

The front end is `static/widget.js`, built from frontend/src/widget.ts by the viewer's build (`make setup`, like
rtxviz/web/static). It mounts the same app as `rtxviz serve`'s page in a frame sized to the cell, draws the
`snapshot` it finds in the widget state, then the live batches `WidgetTransport` sends.

Synced state (saved with the notebook when JupyterLab saves widget state, and embedded by nbconvert's HTML
exporter): `snapshot` (the last graph's events, compact), `run_name`, `height` (pixels; 0: the view fits its graph,
between 320 and 900 px; the user's drag on the view's corner sets it, and the kernel keeps it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..events.emitter import Run
from .transport import WidgetTransport

STATIC = Path(__file__).resolve().parent / "static"
WIDGET_JS = STATIC / "widget.js"


class ViewerNotBuilt(RuntimeError):
    """static/widget.js is missing: the viewer has not been built."""


def _esm() -> str:
    """The front end's source: it travels in the widget state, so a saved notebook renders without the package."""
    if not WIDGET_JS.is_file():
        raise ViewerNotBuilt(f"rtxviz.notebook: the widget's front end {WIDGET_JS} is missing; build the viewer "
                             "with `make setup` (or `cd frontend && npm ci && npm run build`)")
    return WIDGET_JS.read_text(encoding="utf-8")


class ViewerWidget(anywidget.AnyWidget):
    """The viewer in a notebook cell. Made by `rtxviz.notebook.watch(...)` / `show(...)`; rarely by hand.

    >>> w = ViewerWidget(run_name="demo")
    >>> w.run_name, w.height, w.snapshot
    ('demo', 0, '')
    """

    _esm = traitlets.Unicode("").tag(sync=True)  # set in __init__: the file is read when a widget is made
    snapshot = traitlets.Unicode("").tag(sync=True)
    run_name = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(0).tag(sync=True)  # 0: fit the graph

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(_esm=_esm(), **kwargs)

    def transport(self, **options: Any) -> WidgetTransport:
        """An emitter transport whose batches go to this widget (and whose snapshot lands in `snapshot`)."""
        return WidgetTransport(self._send_batch, self._set_snapshot, **options)

    def _send_batch(self, content: dict, buffers: list[bytes]) -> None:
        self.send(content, buffers)

    def _set_snapshot(self, text: str) -> None:
        self.snapshot = text

    def attach(self, run: Run) -> None:
        """Name the widget after `run`."""
        self.run_name = run.name
