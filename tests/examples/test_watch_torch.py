"""examples/watch_torch.py: the plain PyTorch loop it watches learns (the docstring and the README say it trains
resnet18 on the digits), the run streams resnet18's graph, and `--serve` records where `rtxviz render` reads."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import numpy as np
import pytest

from tests.examples.test_examples import Collect, load

pytest.importorskip("torch")
# not importorskip: importing torchvision beside this torch fails unless the example's stub goes first (docs/torch.md)
if importlib.util.find_spec("torchvision") is None:
    pytest.skip("needs torchvision", allow_module_level=True)


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return load("watch_torch")


@pytest.fixture(scope="module")
def trained(example: ModuleType) -> tuple[list[float], Collect]:
    sink = Collect()
    losses = example.train(None, steps=30, sample_every=10, batch=16, seed=0, transport=sink, svg=None)
    return losses, sink


def test_the_watched_resnet_learns_the_digits(trained: tuple[list[float], Collect]) -> None:
    losses, _ = trained
    assert len(losses) == 30
    # a random guess over 10 classes costs log(10) ≈ 2.3 nats; a loop that learns ends well below where it began
    # (lr 0.05 with momentum 0.9 went from 2.9 to 7-11 within 30 steps: it diverged)
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses
    assert np.mean(losses[-5:]) < np.log(10)


def test_the_run_streams_resnet18_with_its_checkpointed_stage(trained: tuple[list[float], Collect]) -> None:
    _, sink = trained
    nodes = [e for e in sink.events if e.get("kind") == "node"]
    assert any(e["op"] == "conv2d" and str(e.get("module", "")).startswith("net.layer1") for e in nodes)
    assert any(e.get("recomputed") for e in nodes), "layer3's checkpoint recomputation is not in the stream"
    assert any(e.get("kind") == "optimizer_step" for e in sink.events)


def test_serve_records_where_render_reads(example: ModuleType, tmp_path, monkeypatch) -> None:
    # as live_demo.py (issue 17.12): a run in ~/.rtxviz/torch-demo.db was out of `rtxviz render latest`'s reach
    db = str(tmp_path / "where-render-reads.db")
    monkeypatch.setenv("RTXVIZ_DB", db)
    assert example.build_parser().parse_args(["--serve"]).db == db
