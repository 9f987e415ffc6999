"""The Python a reader copies from docs/graph_cache.md and docs/checkpointing.md runs as written (the graph cache's
block imported a module that does not exist, `rtxviz.engine.graph_cache`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

import rtxviz
from rtxviz import nn

DOCS = Path(__file__).resolve().parents[2] / "docs"


def python_blocks(doc: str) -> list[str]:
    """The ```python blocks of docs/<doc>, in order."""
    return re.findall(r"```python\n(.*?)```", (DOCS / doc).read_text(), re.S)


def test_the_graph_cache_block_runs_and_replays() -> None:
    block = python_blocks("graph_cache.md")[0]
    rtxviz.manual_seed(0)
    scope: dict[str, Any] = {}
    try:
        exec(compile(block, "docs/graph_cache.md", "exec"), scope)  # it starts with init_graph_cache(1024)
        stats = rtxviz.graph_cache_stats()
    finally:
        rtxviz.init_graph_cache()  # no graph of this model left in the process-wide cache for the next test
    # one capture (cache_graph), then a replay for each of the 9 later batches and one for run_cached's call
    assert stats["captures"] == 1 and stats["misses"] == 0
    assert stats["hits"] == len(scope["batches"]) - 1 + 1
    assert np.isfinite(scope["loss"].item())


def test_the_checkpointing_block_runs_and_its_gradient_is_the_unchecked_one() -> None:
    block = python_blocks("checkpointing.md")[0]
    rtxviz.manual_seed(0)
    layers = [nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(9)]
    x = rtxviz.Variable.from_tensor(rtxviz.randn(3, 4))
    scope: dict[str, Any] = {"block": layers[0], "layer1": layers[1], "layer2": layers[2], "layers": layers,
                             "x": x, "h": x * 2}
    exec(compile(block, "docs/checkpointing.md", "exec"), scope)
    # the block's last line, EVERY(4) over the nine layers, against the same layers run without checkpointing
    (checked,) = rtxviz.grad(scope["out"].sum(), [x])
    plain = x
    for layer in layers:
        plain = layer(plain)
    (expected,) = rtxviz.grad(plain.sum(), [x])
    np.testing.assert_allclose(checked.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
