"""`watch(notebook=True)` and `show(...)`: the live view in the notebook, no server and no port.

`watch` is also `rtxviz.watch`: without `notebook=True` it is the emitter's `watch` (rtxviz.events), untouched.
The widget module (and anywidget) is imported only when a notebook view is asked for.
"""

from __future__ import annotations

from typing import Any

from ..events import emitter

#: The views made from each notebook cell (JupyterLab's cell id), so that re-running a cell closes the old one.
_BY_CELL: dict[str, Any] = {}

#: The emitter's sender flushes a small batch this often: the notebook's draw latency budget is 250 ms.
NOTEBOOK_FLUSH_INTERVAL = 0.05


def _cell_id() -> str | None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - no IPython: not in a notebook
        return None
    ip = get_ipython()
    kernel = getattr(ip, "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell") if hasattr(kernel, "get_parent") else kernel._parent_header
    except Exception:  # pragma: no cover - an old kernel without a parent header
        return None
    cell = (parent or {}).get("metadata", {}).get("cellId")
    return str(cell) if cell else None


def new_widget(run_name: str = "", height: int | None = None, display: bool = True) -> Any:
    """A fresh viewer widget, displayed in the current cell's output (replacing the one this cell made before).

    height: pixels; None keeps the size of the view this cell made before (the user may have dragged it), else
    fits the graph (0)."""
    from .widget import ViewerWidget

    if height is not None and (isinstance(height, bool) or not isinstance(height, int) or height < 0):
        raise ValueError(f"rtxviz.notebook: height must be a number of pixels >= 0 (0: fit the graph), got "
                         f"{height!r}")
    cell = _cell_id()
    old = _BY_CELL.pop(cell, None) if cell is not None else None
    if height is None:
        height = old.height if old is not None else 0
    widget = ViewerWidget(run_name=run_name, height=height)
    if old is not None:
        old.close()  # its comm closes; the kernel holds nothing more of it
    if cell is not None:
        _BY_CELL[cell] = widget
    if display:
        from IPython.display import display as ipy_display

        ipy_display(widget)
    return widget


def watch(url: str | None = None, run_name: str | None = None, *args: Any, notebook: bool = False,
          height: int | None = None, display: bool = True, **options: Any) -> emitter.Run:
    """Watch the engine; with ``notebook=True`` the live view is a widget in this cell (no server, no URL).

    The notebook run is the emitter's `Run` (the same bounded queue and drop rules: a slow or absent front end
    never stalls training) with a transport that sends each batch over the widget's comm; `run.widget` is the
    widget. Without `notebook=True` this is `rtxviz.events.watch(url, ...)`. height: pixels (0: fit the graph;
    None: the size this cell's view had before, else fit); the user can resize the view by its corner.

    >>> import rtxviz
    >>> with rtxviz.watch(notebook=True, run_name="demo", display=False) as run:
    ...     x = rtxviz.Variable.from_tensor(rtxviz.Tensor.from_slice([1.0, 2.0], [2]), name="x")
    ...     (x * x).sum().backward()
    >>> run.widget.run_name, run.stats()["sent"] > 0, "mul" in run.widget.snapshot
    ('demo', True, True)
    """
    if not notebook:
        return emitter.watch(url, run_name, *args, **options)  # the emitter's own signature, untouched
    if args:
        raise TypeError(f"watch(notebook=True): pass options by name (sample_every=..., max_queue=...), got {args!r}")
    if url is not None:
        raise ValueError(f"watch(notebook=True) sends no events to a server; got url={url!r} as well")
    widget, transport = widget_transport(run_name, height, display, options)
    return attach_widget(widget, emitter.watch(run_name=run_name or "notebook", transport=transport, **options))


def widget_transport(run_name: str | None, height: int | None, display: bool,
                     options: dict[str, Any]) -> tuple[Any, Any]:
    """A notebook run's widget and the transport into it, for any Run (`watch` here, `rtxviz.torch.watch`): takes
    the snapshot options out of the run's `options` and gives it the notebook's flush interval."""
    widget = new_widget(run_name or "", height=height, display=display)
    options.setdefault("flush_interval", NOTEBOOK_FLUSH_INTERVAL)
    snapshot_options = {k: options.pop(k) for k in ("snapshot_interval", "snapshot_max_events") if k in options}
    return widget, widget.transport(**snapshot_options)


def attach_widget(widget: Any, run: Any) -> Any:
    """Name `widget` after `run` and make it `run.widget`; returns the run."""
    widget.attach(run)
    run.widget = widget
    return run


def show(obj: Any, height: int | None = None, display: bool = True) -> Any | None:
    """Display the live view of `obj`: a run from `watch(notebook=True)` (its widget, shown again), or a
    Variable (its recorded graph, with the gradients backward left on it, drawn by the same app), or a PyTorch
    tensor (the graph behind its grad_fn, as `rtxviz.render` draws it).
    Returns None once displayed (a cell's last line shows it once), or, with ``display=False``, the widget.
    height: pixels (0: fit the graph; None: the size this cell's view had before, else fit).

    >>> import rtxviz
    >>> x = rtxviz.Variable.from_tensor(rtxviz.Tensor.from_slice([1.0, -2.0], [2]), name="x")
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> w = show(y, display=False)
    >>> import json; '"op":"mul"' in json.loads(w.snapshot)["ndjson"]
    True
    """
    widget = getattr(obj, "widget", None)
    if isinstance(obj, emitter.Run):
        if widget is None:
            raise TypeError(f"rtxviz.notebook.show: run {obj.name!r} streams to a server, not to a notebook; "
                            "start it with rtxviz.watch(notebook=True)")
        if not display:
            return widget
        from IPython.display import display as ipy_display

        ipy_display(widget)
        return None
    if getattr(obj, "_node", None) is None and not hasattr(obj, "grad_fn"):
        raise TypeError(f"rtxviz.notebook.show: expected a run from watch(notebook=True), a Variable or a PyTorch "
                        f"tensor with a grad_fn, got "
                        f"{type(obj).__name__}")
    from .replay import graph_events

    # the graph goes into the snapshot before the widget is displayed: events sent over the comm before the
    # front end has drawn the view would be lost (it reads the snapshot when it renders)
    widget = new_widget(getattr(obj, "name", None) or "graph", height=height, display=False)
    transport = widget.transport()
    lines = [emitter.encode_event(ev) for ev in graph_events(obj)]
    transport.send(None, lines, 0)
    transport.close()
    if not display:
        return widget
    from IPython.display import display as ipy_display

    ipy_display(widget)
    return None
