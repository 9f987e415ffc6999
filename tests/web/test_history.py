"""The per-step history (rtxviz/store/history.py, GET /api/runs/{id}/history): from a real engine training run,
the numbers served per step equal the engine's own gradient norms, read from `.grad` after each backward."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import rtxviz.web.app as app_module
from rtxviz.web import create_app

from ..browser.engine_runs import recorded

SPIKE_STEP = 5  # the learning rate is 500x for this step's update: the next step's gradients jump


def training_run(steps: int = 8, spike: int | None = SPIKE_STEP, change: int | None = SPIKE_STEP + 1,
                 seed: int = 0) -> tuple[list[dict], dict[str, Any]]:
    """A small MLP trained with SGD under `watch`, its learning rate 500x at step `spike`; at step `change` the
    batch is 12 rows instead of 16 (shapes change) and the loss gets a weight penalty (nodes are added).
    Returns its events and what the engine itself said per step:
    ``{"params": {name: [‖p.grad‖ per step]}, "tanh": [‖dL/d tanh‖ per step] (retain_grad), "ratio": {name:
    [‖Δp‖/‖p after the update‖ per step]}, "tanh_key": the page's key of the tanh node}``."""
    import rtxviz
    from rtxviz import Tensor, nn, optim

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 1)

        def forward(self, x: Any) -> Any:
            self.h = self.fc1(x).tanh()
            self.h.retain_grad()  # the engine's own dL/d(tanh), to compare with the history's
            return self.fc2(self.h)

    rtxviz.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = MLP()
    opt = optim.SGD(model.parameters(), lr=0.05)
    xs, ys = rng.normal(size=(16, 4)).astype(np.float32), rng.normal(size=(16, 1)).astype(np.float32)
    truth: dict[str, Any] = {"params": {}, "ratio": {}, "tanh": []}

    def body(run: Any) -> None:
        for step in range(steps):
            with run.step(step):
                opt.zero_grad()
                rows = 12 if step == change else 16
                loss = ((model(Tensor(xs[:rows])) - Tensor(ys[:rows])) ** 2).mean()
                if step == change:
                    loss = loss + 1e-3 * (model.fc1.weight ** 2).sum()
                loss.backward()
                truth["tanh"].append(float(np.linalg.norm(model.h.grad.numpy())))
                before = {n: p.numpy().copy() for n, p in model.named_parameters()}
                for n, p in model.named_parameters():
                    truth["params"].setdefault(n, []).append(float(np.linalg.norm(p.grad.numpy())))
                opt.param_groups[0]["lr"] = 25.0 if step == spike else 0.05
                opt.step()
                for n, p in model.named_parameters():
                    # the reporter's ratio: the update's norm over the parameter's norm after it
                    ratio = np.linalg.norm(p.numpy() - before[n]) / np.linalg.norm(p.numpy())
                    truth["ratio"].setdefault(n, []).append(float(ratio))

    events = recorded("history-train", body)
    tanh = next(e for e in events if e["kind"] == "node" and e["op"] == "tanh")
    truth["tanh_key"] = f"{tanh.get('module') or ''}|tanh|1"
    return events, truth


@pytest.fixture(scope="module")
def run() -> tuple[list[dict], dict[str, Any]]:
    return training_run()


def _leaf_key(events: list[dict], param: str) -> str:
    """The page's key of a parameter: L: and its leaf name (the emitter names model.<param>)."""
    names = [e["name"] for e in events if e["kind"] == "leaf" and e.get("name")]
    (name,) = [n for n in names if n.endswith("." + param) or n == param]
    return f"L:{name}"


def _serve(tmp_path, events: list[dict]):
    client = TestClient(create_app(db=str(tmp_path / "runs.db")))
    client.__enter__()
    for i in range(0, len(events), 7):  # small batches: the naming state must carry across them
        r = client.post("/api/runs/train/events", json={"events": events[i:i + 7]})
        assert r.status_code == 200, r.text
    return client


def test_history_equals_the_engines_norms(tmp_path, run):
    events, truth = run
    client = _serve(tmp_path, events)
    try:
        for param, norms in truth["params"].items():
            h = client.get("/api/runs/train/history", params={"name": _leaf_key(events, param)}).json()
            assert h["steps"] == list(range(len(norms)))
            np.testing.assert_allclose(h["grad_norm"], norms, rtol=1e-5)
            np.testing.assert_allclose(h["update_ratio"], truth["ratio"][param], rtol=1e-4)
            assert h["nonfinite"] == [0] * len(norms)
        h = client.get("/api/runs/train/history", params={"name": truth["tanh_key"]}).json()
        np.testing.assert_allclose(h["grad_norm"], truth["tanh"], rtol=1e-5)
        assert all(r is None for r in h["update_ratio"])  # an op is not updated
        # the spike: the step after the 500x update has gradients over 10x the step before it
        w = truth["params"]["fc1.weight"]
        assert w[SPIKE_STEP + 1] > 10 * w[SPIKE_STEP]
    finally:
        client.__exit__(None, None, None)


def test_unknown_name_is_empty_unknown_run_404_and_bad_name_422(tmp_path, run):
    client = _serve(tmp_path, run[0][:40])
    try:
        assert client.get("/api/runs/train/history", params={"name": "no|such|1"}).json()["steps"] == []
        r = client.get("/api/runs/nope/history", params={"name": "x"})
        assert r.status_code == 404 and "nope" in r.json()["detail"]
        r = client.get("/api/runs/train/history")
        assert r.status_code == 422 and "name" in r.text
        r = client.get("/api/runs/train/history", params={"name": ""})
        assert r.status_code == 422
    finally:
        client.__exit__(None, None, None)


def _open(db: str, **options: Any):
    """The store the server would open for `db` (under tests/web/conftest.py's PostgreSQL pass, a database on the
    test server: the same one again for the same path, so a second open is a restart)."""
    return app_module.open_store(db, **options)


def _rows(events: list[dict]):
    import json

    return [(e["kind"], e.get("step"), json.dumps(e)) for e in events]


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_history_survives_a_restart_in_the_middle_of_a_step(tmp_path, run, where):
    """The naming state (leaf names, the step's node ids) is rebuilt from the stored events after a restart: a
    step split over two server processes gets the same history as one stored at once, whether the cut falls
    between the step's node events (forward) or its grad events (backward)."""
    events, truth = run
    kind = "node" if where == "forward" else "grad"
    cut = [i for i, e in enumerate(events) if e["kind"] == kind and e.get("step") == 3][1]  # after the first
    path = str(tmp_path / "split.db")
    s = _open(path)
    s.append("r", None, _rows(events[:cut]))
    s.close()
    s = _open(path)
    s.append("r", None, _rows(events[cut:]))
    whole = _open(":memory:")
    whole.append("r", None, _rows(events))
    for key in [_leaf_key(events, p) for p in truth["params"]] + [truth["tanh_key"]]:
        assert s.history("r", key) == whole.history("r", key) and len(s.history("r", key)) == 8
    np.testing.assert_allclose([r[1] for r in s.history("r", truth["tanh_key"])], truth["tanh"], rtol=1e-5)
    # deleting the run deletes its history
    assert s.delete_run("r") and s.history("r", truth["tanh_key"]) == []
    s.close()


def test_a_failed_batch_leaves_the_history_as_it_was(tmp_path, run):
    """A batch refused by the store (over its bound) adds no history, and the naming state it took in is
    dropped: the same batch sent again, once there is room, gives the same history as one that never failed."""
    from rtxviz.store import StoreFull

    events, truth = run
    rows = _rows(events)
    s = _open(str(tmp_path / "full.db"), max_events_per_run=len(rows) - 1)
    half = len(rows) // 2
    s.append("r", None, rows[:half])
    s.history("r", truth["tanh_key"])  # a store that makes it when read (SQLite) has taken in the first half
    with pytest.raises(StoreFull):
        s.append("r", None, rows[half:])
    s.max_events_per_run = len(rows)
    s.append("r", None, rows[half:])
    whole = _open(":memory:")
    whole.append("r", None, rows)
    assert s.history("r", truth["tanh_key"]) == whole.history("r", truth["tanh_key"])
    s.close()
    whole.close()


def test_two_writers_of_one_run_keep_one_history(tmp_path, run, request):
    """Two server processes on one PostgreSQL database (``rtxviz serve --workers 2``), a run's batches arriving at
    either: each process rebuilds its naming state from the database when the other stored the batch before, so
    the history is that of one writer. (SQLite has one writer a file: nothing to test there.)"""
    # tests/web/conftest.py's store_backend (autouse) says which store this pass runs on
    backend = request.getfixturevalue("store_backend") if "store_backend" in request.fixturenames else "sqlite"
    if backend != "postgres":
        pytest.skip("one writer per SQLite file")
    events, truth = run
    rows = _rows(events)
    path = str(tmp_path / "shared.db")
    a, b = _open(path), _open(path)
    for i in range(0, len(rows), 9):
        (a if (i // 9) % 2 == 0 else b).append("r", None, rows[i:i + 9])
    whole = _open(":memory:")
    whole.append("r", None, rows)
    for key in [_leaf_key(events, p) for p in truth["params"]] + [truth["tanh_key"]]:
        assert a.history("r", key) == whole.history("r", key) == b.history("r", key)
        assert len(a.history("r", key)) == 8
    for st in (a, b, whole):
        st.close()


def test_nan_gradients_are_marked_nonfinite():
    s = _open(":memory:")
    leaf = '{"kind":"leaf","id":1,"name":"w"}'
    s.append("r", None, [("leaf", None, leaf), ("step_begin", 0, '{"kind":"step_begin","step":0}'),
                         ("leaf_grad", 0, '{"kind":"leaf_grad","leaf":1,"stats":{"norm":null,"nan":3}}')])
    assert s.history("r", "L:w") == [(0, None, None, 1)]
    s.close()


def test_values_are_named_as_the_page_names_them_checkpoint_recomputation_included():
    """The known graph of the browser tests (a checkpoint whose segment is recomputed in backward): the history's
    names are the keys the page draws (hand-derived in tests/browser/test_viewer.py)."""
    from ..browser.graphs import XSS, known_graph
    from ..browser.test_viewer import ADD, CKPT, EXP, MATMUL, MUL, RELU, SUM

    s = _open(":memory:")
    s.append("k", None, _rows(known_graph()))
    # every value with a gradient, the recomputed relu and mul under their rc1: keys, the leaves by name; exp (off
    # the loss's path) and x (needs no gradient) have none
    for key in (MATMUL, ADD, CKPT, SUM, RELU, MUL, "L:model.fc.bias", f"L:{XSS}"):
        assert len(s.history("k", key)) == 1, key
    for key in (EXP, "L:x", "model.block|relu|1"):
        assert s.history("k", key) == [], key
    s.close()


@pytest.mark.parametrize("text", [
    '{"v":1,"kind":"grad","t":0,"step":0,"node":7,"output":{"shape":[2],"norm":2.5,"values":[1.5,2.0]},"inputs":[]}',
    '{"v": 1, "kind": "grad", "t": 0, "step": 0, "node": 7, "output": {"shape": [2], "norm": 2.5}, "inputs": []}',
    '{"output":{"shape":[2],"norm":2.5},"inputs":[{"shape":[2],"norm":9.0}],"kind":"grad","step":0,"node":7}',
    '{"kind":"grad","step":0,"inputs":[{"norm":9.0}],"output":{"norm":2.5,"min":null},"node":7}',
])
def test_a_grad_events_output_norm_is_read_whatever_its_layout(text):
    """The grad events are read by their node and output alone (history.py's _grad_fields); any spacing or key
    order (another emitter, a re-encoded import) reads the same as decoding the whole event."""
    from rtxviz.store.history import HistoryTracker

    t = HistoryTracker()
    rows = t.rows("r", [("step_begin", 0, '{"kind":"step_begin","step":0}'),
                        ("node", 0, '{"kind":"node","id":7,"op":"exp","module":"m","inputs":[]}'),
                        ("grad", 0, text)])
    assert rows == {("m|exp|1", 0): [2.5, None, 0]}
