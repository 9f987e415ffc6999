"""`watch(model)`: stream a PyTorch training loop to an rtxviz server, in the schema rtxviz's own runs use.

The run is the event stream's `Run` (the bounded queue, the sender thread, `sample_every`, `run.step(i)`), with a
`TorchRecorder` in place of the engine hook. Where the loop never calls `run.step(i)`, steps are inferred: a step
begins with the first op that records a graph (an output with a grad_fn) after the previous `optimizer.step()`
(or after `watch` starts), and ends with the next `optimizer.step()` over the model's parameters.

>>> import torch
>>> model = torch.nn.Linear(2, 1)
>>> with watch(model, "http://127.0.0.1:9", run_name="lin", close_timeout=0.1) as run:  # nothing listens on 9
...     model(torch.ones(1, 2)).sum().backward()
>>> run.recorder.attached
False
"""

from __future__ import annotations

import os
from typing import Any

import torch

from ..events.emitter import HttpTransport, Run, Transport, _Step
from .recorder import TorchRecorder


class TorchRun(Run):
    """A watched PyTorch run: `Run`'s queue and sender, fed by a TorchRecorder on `model`."""

    def __init__(self, transport: Transport, model: torch.nn.Module | None, **options: Any) -> None:
        super().__init__(transport, **options)
        self.recorder = TorchRecorder(self._put, model, values_max_numel=options.get("values_max_numel", 16))
        self._explicit = False  # the loop calls run.step(i): no inferred steps
        self._auto_index = 0
        self.recorder.auto_begin = self._auto_begin
        self.recorder.on_optimizer_step = self._auto_end

    # the Run's seam: sampled or not is whether the recorder records
    def _attach(self) -> None:
        self.recorder.recording = self.recorder.attached

    def _detach(self) -> None:
        self.recorder.recording = False

    def start(self) -> TorchRun:
        if not self.started:
            self.recorder.attach()
            super().start()
        return self

    def close(self, error: BaseException | None = None) -> None:
        if self.closed or not self.started:
            return
        self.recorder.auto_begin = None
        super().close(error)
        self.recorder.detach()

    def step(self, index: int) -> _Step:
        """Mark step `index` (see `Run.step`); a loop that calls this gets no inferred steps."""
        self._explicit = True
        self.recorder.auto_begin = None
        return self._begin(index)

    def _begin(self, index: int) -> _Step:
        marker = super().step(index)
        self.recorder.new_step(int(index))
        return marker

    def _end_step(self, index: int) -> None:
        was = self._open_step
        super()._end_step(index)
        if was == index:
            self.recorder.new_step(None)

    def _auto_begin(self) -> None:
        self.recorder.auto_begin = None
        self._begin(self._auto_index)

    def _auto_end(self) -> None:
        if self._explicit or self.closed:
            return
        if self._open_step is not None:
            self._end_step(self._open_step)
        self._auto_index += 1
        self.recorder.auto_begin = self._auto_begin


def watch(model: torch.nn.Module | None = None, url: str | None = None, run_name: str | None = None,
          sample_every: int = 1, token: str | None = None, transport: Transport | None = None,
          **options: Any) -> TorchRun:
    """Stream a PyTorch model's training to an rtxviz server (a context manager returning the run).

    model: its module paths and parameter names label the graph. url: the server (default: RTXVIZ_SERVER).
    sample_every: record every k-th step (the others run with every seam returning at once). Other options as
    `rtxviz.events.watch` (max_queue, values_max_numel, meta, batch_size, flush_interval, close_timeout, run_id).
    ``notebook=True`` (with `height`, `display`): the live view is a widget in this cell, as `rtxviz.watch`'s;
    no server, no URL; `run.widget` is the widget.
    """
    widget = None
    if options.pop("notebook", False):
        from ..notebook.api import widget_transport

        if url is not None or transport is not None:
            raise ValueError("rtxviz.torch.watch(notebook=True) sends no events to a server; got "
                             f"{'url=' + repr(url) if url is not None else 'a transport'} as well")
        widget, transport = widget_transport(run_name, options.pop("height", None), options.pop("display", True),
                                             options)
    if transport is None:
        url = url or os.environ.get("RTXVIZ_SERVER")
        if not url:
            raise ValueError("rtxviz.torch.watch: no server URL; pass url='http://127.0.0.1:8000' or set "
                             "RTXVIZ_SERVER (start a server with `rtxviz serve`)")
        transport = HttpTransport(url, token or os.environ.get("RTXVIZ_TOKEN"),
                                  timeout=float(options.pop("timeout", 2.0)))
    if model is not None and not isinstance(model, torch.nn.Module):
        raise TypeError(f"rtxviz.torch.watch: model must be a torch.nn.Module, got {type(model).__name__}")
    meta = {"framework": "torch", "torch": torch.__version__, **(options.pop("meta", None) or {})}
    run = TorchRun(transport, model, run_name=run_name or ("notebook" if widget is not None else None),
                   sample_every=sample_every, meta=meta, **options)
    if widget is not None:
        from ..notebook.api import attach_widget

        attach_widget(widget, run)
    return run
