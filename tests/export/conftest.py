from __future__ import annotations

import pytest

import rtxviz
from rtxviz import Tensor, nn
from rtxviz.engine.checkpoint import checkpoint
from rtxviz.events import EventHook


def record_run(steps: int = 2, with_checkpoint: bool = False) -> list[dict]:
    """A small training run's events as the server stores them (seq from 1), recorded through EventHook."""
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    events: list[dict] = [{"v": 1, "kind": "run_start", "t": 0.0, "step": None, "name": "exported-demo"}]
    hook = EventHook(events.append)
    rtxviz.add_hook(hook)
    try:
        for step in range(steps):
            hook.new_step(step)
            events.append({"v": 1, "kind": "step_begin", "t": events[-1]["t"], "step": step})
            model.zero_grad()
            x = Tensor.ones([2, 3])
            out = checkpoint(model, x) if with_checkpoint else model(x)
            out.sum().backward()
            hook.new_step(None)
            events.append({"v": 1, "kind": "step_end", "t": events[-1]["t"], "step": step})
    finally:
        rtxviz.remove_hook(hook)
    events[0]["t"] = events[1]["t"]
    return [dict(e, seq=i + 1) for i, e in enumerate(events)]


@pytest.fixture
def run_events() -> list[dict]:
    return record_run()
