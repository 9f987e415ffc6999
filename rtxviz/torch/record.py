"""`record(model)`: the events a watched run would stream, kept in a list (no server): for tests, drawings
(`rtxviz.render(rec.events, "graph.svg")`) and the exports.

>>> import torch
>>> lin = torch.nn.Linear(3, 1)
>>> with record(lin) as rec:
...     with rec.step(0):
...         lin(torch.ones(2, 3)).sum().backward()
>>> [e["op"] for e in rec.events if e["kind"] == "node"][-1], rec.events[0]["kind"]
('sum', 'step_begin')
"""

from __future__ import annotations

from typing import Any

import torch

from .recorder import TorchRecorder


class Recording:
    """A TorchRecorder writing into `events` (plain dicts, as the server stores them, without `seq`)."""

    def __init__(self, model: torch.nn.Module | None = None, values_max_numel: int = 16) -> None:
        self.model = model
        self.events: list[dict[str, Any]] = []
        self.recorder = TorchRecorder(self.events.append, model, values_max_numel=values_max_numel)

    def step(self, index: int) -> _RecStep:
        """`with rec.step(i):` marks training step i (its events carry ``step: i``)."""
        self.recorder.new_step(int(index))
        self.recorder._emit({"kind": "step_begin", "sampled": True})
        return _RecStep(self, int(index))

    def __enter__(self) -> Recording:
        self.recorder.attach()
        return self

    def __exit__(self, *exc: object) -> None:
        self.recorder.detach()


class _RecStep:
    def __init__(self, rec: Recording, index: int) -> None:
        self.rec, self.index = rec, index

    def __enter__(self) -> _RecStep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.rec.recorder._emit({"kind": "step_end"})
        self.rec.recorder.new_step(None)


def record(model: torch.nn.Module | None = None, values_max_numel: int = 16) -> Recording:
    """Record a PyTorch model's events into a list: ``with record(model) as rec: ...; rec.events``."""
    return Recording(model, values_max_numel)
