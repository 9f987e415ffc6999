"""The example notebooks run top to bottom (nbclient, a real kernel), and the widget state each saves (what
JupyterLab and nbconvert read without a kernel) holds the graph their text describes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "notebooks"
WIDGET_JS = Path(__file__).resolve().parents[2] / "rtxviz" / "notebook" / "static" / "widget.js"
pytestmark = pytest.mark.skipif(not WIDGET_JS.is_file(), reason="the widget is not built: run `make setup`")


def execute(name: str) -> nbformat.NotebookNode:
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}).execute()
    return nb


def stdout(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def snapshots(nb: nbformat.NotebookNode) -> dict[str, list[dict]]:
    """Each rtxviz widget's saved snapshot, by run name, as events."""
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    out: dict[str, list[dict]] = {}
    for model in state.values():
        s: dict[str, Any] = model["state"]
        if model["model_name"] == "AnyModel" and s.get("snapshot"):
            snap = json.loads(s["snapshot"])
            out[s["run_name"]] = [json.loads(line) for line in snap["ndjson"].split("\n")]
    return out


def leaf_grads(events: list[dict]) -> dict[str, float]:
    names = {e["id"]: e["name"] for e in events if e["kind"] == "leaf"}
    return {names[e["leaf"]]: e["stats"]["norm"] for e in events if e["kind"] == "leaf_grad"}


def test_micrograd_neuron() -> None:
    nb = execute("micrograd_neuron.ipynb")
    # the lecture's closed form: do/dn = 1 - tanh(n)^2 = 1/2
    expect = {"x1": -1.5, "w1": 1.0, "x2": 0.5, "w2": 0.0, "b": 0.5}
    printed = {line.split()[0]: float(line.split()[1]) for line in stdout(nb).splitlines()}
    assert printed == pytest.approx(expect, abs=1e-6)
    snaps = snapshots(nb)
    saved = leaf_grads(snaps["neuron"])
    assert saved == pytest.approx({k: abs(v) for k, v in expect.items()}, abs=1e-6)
    assert [e["op"] for e in snaps["neuron"] if e["kind"] == "node"] == ["mul", "mul", "add", "add", "tanh"]
    assert leaf_grads(snaps["graph"]) == pytest.approx(saved, abs=1e-6)  # show(o): the same graph, after the fact


def test_mlp_digits() -> None:
    nb = execute("mlp_digits.ipynb")
    assert "test accuracy:" in stdout(nb)
    events = snapshots(nb)["digits-mlp"]
    steps = {e["step"] for e in events if e["kind"] == "node"}
    assert len(steps) == 1 and steps.pop() % 5 == 0  # the last recorded step (sample_every=5), whole
    assert [e["op"] for e in events if e["kind"] == "node"][:3] == ["linear", "relu", "linear"]
    params = {".".join(e["name"].split(".")[-2:]) for e in events if e["kind"] == "leaf" and e.get("param")}
    assert params == {"0.weight", "0.bias", "2.weight", "2.bias"}  # announced in step 0, kept for the last


def test_nan_hunt() -> None:
    nb = execute("nan_hunt.ipynb")
    out = stdout(nb)
    assert "loss: nan" in out
    assert "detect_anomaly: exp" in out  # exp(1000) overflows float32: the first non-finite value
    snaps = snapshots(nb)
    origins = [e for e in snaps["nan-hunt"] if e["kind"] == "anomaly" and e.get("origin")]
    assert origins and origins[0]["op"] == "exp" and origins[0]["phase"] == "forward"
    # the fix: d/dz of -log_softmax(z)[1] is softmax(z) - onehot(1); softmax([1000, 0, -5]) = [1, e^-1000, .]
    z = np.array([1000.0, 0.0, -5.0])
    soft = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    expect = soft - np.array([0.0, 1.0, 0.0])
    assert leaf_grads(snaps["fixed"])["logits"] == pytest.approx(math.sqrt((expect ** 2).sum()), rel=1e-6)
