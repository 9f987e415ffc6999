"""A watched PyTorch run streamed to a live server: every event is accepted by the schema and stored, none
dropped, including after an idle stretch longer than the server keeps a connection open."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

torch = pytest.importorskip("torch")

import rtxviz.torch as rt  # noqa: E402

from ..web.server import ThreadServer  # noqa: E402
from .models import TinyGPT  # noqa: E402


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_stream_to_a_live_server(tmp_path):
    from rtxviz.web.app import create_app

    server = ThreadServer(create_app(db=str(tmp_path / "runs.db")))
    server.config.timeout_keep_alive = 1  # the server drops idle connections after 1 s (uvicorn's default: 5 s)
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randint(0, 11, (2, 6)), torch.arange(12) % 11
    with server as url:
        with rt.watch(model, url, run_name="gpt", sample_every=2, close_timeout=20) as run:
            for i in range(4):
                with run.step(i):
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y).backward()
                    opt.step()
                if i == 1:
                    time.sleep(1.6)  # idle: the sender's keep-alive connection is closed by the server
        stats = run.stats()
        info = _get(f"{url}/api/runs/{run.id}")
        graph = _get(f"{url}/api/runs/{run.id}/graph?step=2")
        steps = _get(f"{url}/api/runs/{run.id}/steps")
    assert stats["dropped"] == 0 and stats["failed_batches"] == 0, stats
    assert info["n_events"] == stats["sent"] and info["dropped"] == 0
    assert info["meta"]["framework"] == "torch"
    nodes = [e for e in graph["events"] if e["kind"] == "node"]
    assert len(nodes) > 50 and {"embedding", "layer_norm", "softmax"} <= {e["op"] for e in nodes}
    assert len(steps["steps"] if isinstance(steps, dict) else steps) == 4
