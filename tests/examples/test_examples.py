"""The sequence examples run a few steps: the loss falls clearly, and a watched run streams the graph (the events
the live view draws) with the model's own ops and module paths."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Collect:
    """A Transport that keeps every event the run sends, decoded."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def send(self, run: Any, lines: list[bytes], dropped: int) -> None:
        self.events += [json.loads(line) for line in lines]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def lstm_example() -> ModuleType:
    return load("train_lstm")


@pytest.fixture(scope="module")
def gpt_example() -> ModuleType:
    return load("train_char_gpt")


@pytest.fixture(scope="module")
def trained_lstm(lstm_example: ModuleType) -> tuple:
    return lstm_example.train(steps=60, log_every=0)


def test_lstm_loss_falls(trained_lstm: tuple) -> None:
    _, losses = trained_lstm
    # from about 0.5 to well under what repeating the input scores (1 - E[cos ω] ≈ 0.048)
    assert np.mean(losses[-5:]) < 0.03 < 0.3 < losses[0]


def test_lstm_run_streams_its_graph(lstm_example: ModuleType) -> None:
    sink = Collect()
    lstm_example.train(steps=11, log_every=0, transport=sink)
    nodes = [e for e in sink.events if e.get("kind") == "node"]
    assert any(e["op"] == "lstm_layer" and e.get("module") == "model.lstm" for e in nodes)
    assert any(e["op"] == "linear" and e.get("module") == "model.head" for e in nodes)
    assert any(e.get("kind") == "grad" for e in sink.events)


def test_lstm_closed_loop_starts_on_the_wave(lstm_example: ModuleType, trained_lstm: tuple) -> None:
    model, _ = trained_lstm
    preds = lstm_example.continue_wave(model, 0.3, 1.0, seen=30, ahead=3)
    truth = np.sin(0.3 * np.arange(30, 33) + 1.0)
    assert np.abs(preds - truth).max() < 0.15


def test_char_gpt_loss_falls_and_it_samples(gpt_example: ModuleType) -> None:
    model, data, losses = gpt_example.train(steps=30, log_every=0)
    assert losses[0] > 3.5  # about log(vocabulary) at the start
    assert np.mean(losses[-5:]) < losses[0] - 1.0
    text = gpt_example.sample(model, data, prompt="Love ", length=40)
    assert text.startswith("Love ") and len(text) == 45 and set(text) <= set(data.chars)


def test_char_gpt_run_streams_its_graph(gpt_example: ModuleType) -> None:
    sink = Collect()
    gpt_example.train(steps=1, log_every=0, transport=sink)
    nodes = [e for e in sink.events if e.get("kind") == "node"]
    assert any(e["op"] == "scaled_dot_product_attention" and e.get("module") == "model.blocks.0.self_attn"
               for e in nodes)
    assert any(e["op"] == "embedding" for e in nodes)
