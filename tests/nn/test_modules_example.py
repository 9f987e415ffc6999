"""examples/train_digits_resnet.py: a short run (a few steps) streams to a real server on loopback, where the
run's graph shows the BatchNorm ResNet's modules and ops; the full run (its accuracy) is reported by hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from rtxviz.web import create_app
from tests.web.server import ThreadServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(240)


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def test_resnet_example_streams_its_batchnorm_graph_to_the_live_view(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with ThreadServer(create_app(db=str(tmp_path / "resnet.db"))) as url:
        out = subprocess.run([sys.executable, str(ROOT / "examples" / "train_digits_resnet.py"), "--epochs", "1",
                              "--max-steps", "3", "--sample-every", "1", "--watch", url],
                             capture_output=True, text=True, env=env, timeout=200, check=True).stdout
        lines = out.strip().splitlines()
        assert re.fullmatch(r"test accuracy: 0\.\d{3}", lines[-1])
        assert re.search(r"streamed \d+ events \(0 dropped\)", out)
        runs = [r for r in _get(f"{url}/api/runs") if r["name"] == "digits resnet"]  # type: ignore[union-attr]
        assert len(runs) == 1
        steps = _get(f"{url}/api/runs/{runs[0]['id']}/steps")
        assert [s["step"] for s in steps] == [0, 1, 2]  # type: ignore[union-attr]
        page = _get(f"{url}/api/runs/{runs[0]['id']}/events?kind=node&step=1&limit=5000")
        nodes = page["events"]  # type: ignore[index]
    ops = {n["op"] for n in nodes}
    assert {"conv2d", "batch_norm", "relu", "adaptive_avg_pool2d", "cross_entropy"} <= ops
    modules = {n.get("module") for n in nodes}
    assert {"model.stem.1", "model.block1.bn1", "model.block2.shortcut.1", "model.head.3"} <= modules
    bn = [n for n in nodes if n["op"] == "batch_norm"]
    assert len(bn) == 6 and all(n["shape"][0] == 32 for n in bn)  # 6 BatchNorm2d layers, batch 32
