"""The live view inside Jupyter, with no server: `watch(notebook=True)` and `show(run_or_variable)`.

Events travel over the widget's own comm (rtxviz.notebook.transport), batched and dropped by the emitter's rules;
the widget (rtxviz.notebook.widget, anywidget) mounts the page's app in the cell. docs/notebook.md has the rest.

>>> from rtxviz import notebook
>>> notebook.NOTEBOOK_FLUSH_INTERVAL <= 0.1
True
"""

from __future__ import annotations

from .api import NOTEBOOK_FLUSH_INTERVAL, new_widget, show, watch
from .transport import Snapshot, WidgetTransport

__all__ = ["NOTEBOOK_FLUSH_INTERVAL", "Snapshot", "WidgetTransport", "new_widget", "show", "watch"]
