"""Defects from a user review, through the server: run_end's counts against what the server stores, one shape for
every 422, an event without `step`, negative counters."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

import rtxviz.events as events
from rtxviz import Tensor, Variable
from rtxviz.web import create_app

from ..events.test_schema import COUNTS, minimal_event, with_count
from .server import ThreadServer

NDJSON = {"Content-Type": "application/x-ndjson"}

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "runs.db"))) as c:
        yield c


def post(client: TestClient, run_id: str, evs: list[dict], json_body: bool = False, **params: object):
    if json_body:
        return client.post(f"/api/runs/{run_id}/events", json={"events": evs}, params=params)
    return client.post(f"/api/runs/{run_id}/events", content="\n".join(json.dumps(e) for e in evs),
                       headers=NDJSON, params=params)


def assert_422(r, *words: str) -> None:
    """One shape for every 422: `detail` a sentence naming the fault, `errors` the structured list."""
    assert r.status_code == 422, r.text
    body = r.json()
    assert isinstance(body["detail"], str), body
    for w in words:
        assert w in body["detail"], (w, body["detail"])
    assert isinstance(body["errors"], list) and body["errors"], body
    assert all(isinstance(e["loc"], list) and isinstance(e["msg"], str) for e in body["errors"]), body


# -- run_end's counts ---------------------------------------------------------------------------------------------
def test_run_end_counts_what_the_server_stores():
    # user review: run_end.sent counted the events acknowledged when run_end was built, before the final flush
    w = Variable.from_tensor(Tensor(np.ones(4, np.float32)), name="w")
    with ThreadServer(create_app(db=":memory:")) as url:
        with events.watch(url, run_name="counted", flush_interval=0.05, close_timeout=30) as run:
            for i in range(20):
                with run.step(i):
                    (w * w).sum().backward()
        with urllib.request.urlopen(f"{url}/api/runs/{run.id}") as resp:
            info = json.loads(resp.read())
        with urllib.request.urlopen(f"{url}/api/runs/{run.id}/events?limit=10000") as resp:
            stored = json.loads(resp.read())["events"]
    end = stored[-1]
    assert end["kind"] == "run_end" and end["dropped"] == info["dropped"] == 0
    assert end["sent"] == info["n_events"] == len(stored) > 100


# -- 422s ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method, path, words", [
    ("post", "/api/runs/r1/events?dropped=-1", ["query parameter 'dropped'", "greater than or equal to 0", "-1"]),
    ("post", "/api/runs/r1/events?name=" + "n" * 300, ["query parameter 'name'", "at most 256"]),
    ("post", "/api/runs/" + "x" * 65 + "/events", ["path parameter 'run_id'", "should match pattern"]),
    ("get", "/api/runs?limit=abc", ["query parameter 'limit'", "valid integer", "'abc'"]),
    ("get", "/api/runs/r1/events?limit=0", ["query parameter 'limit'", "greater than or equal to 1", "'0'"]),
    ("get", "/api/runs/r1/history", ["query parameter 'name'", "Field required"]),
])
def test_a_request_fastapi_refuses_has_a_readable_detail(client, method, path, words):
    # user review: FastAPI's own 422s had `detail` as a list of {loc, msg}, ours a string
    r = client.post(path, content=b"", headers=NDJSON) if method == "post" else client.get(path)
    assert_422(r, *words)
    assert r.json()["errors"][0]["loc"][0] in ("query", "path")


@pytest.mark.parametrize("json_body", [False, True])
def test_a_bad_event_has_the_same_shape(client, json_body):
    r = post(client, "r1", [minimal_event("step_begin"), {**minimal_event("node"), "shape": "x"}], json_body)
    assert_422(r, "event 1 (kind 'node'): shape: Input should be a valid list")
    assert r.json()["errors"] == [{"loc": ["body"], "msg": r.json()["detail"], "type": "event_error"}]


def test_a_body_that_is_not_json_has_the_same_shape(client):
    r = client.post("/api/runs/r1/events", content=b"{", headers={"Content-Type": "application/json"})
    assert_422(r, "not valid JSON")


# -- `step` -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("json_body", [False, True])
@pytest.mark.parametrize("kind", ["step_end", "node", "my_tool.tick"])
def test_an_event_without_step_is_refused_naming_it(client, kind, json_body):
    ev = minimal_event(kind) if kind != "my_tool.tick" else {"v": 1, "kind": kind, "t": 1.0, "step": None}
    del ev["step"]
    r = post(client, "r1", [minimal_event("step_begin"), ev], json_body)
    assert_422(r, f"event 1 (kind '{kind}'): step: Field required")
    assert client.get("/api/runs/r1").status_code == 404  # nothing of the batch is stored


# -- counters -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("json_body", [False, True])
@pytest.mark.parametrize("kind, where, field", COUNTS)
def test_a_negative_count_is_refused_naming_the_field_and_the_value(client, kind, where, field, json_body):
    name = field.removeprefix("anomaly.")
    r = post(client, "r1", [with_count(kind, where, -1)], json_body)
    assert_422(r, f"event 0 (kind '{kind}'): {name}: Input should be greater than or equal to", "got -1")
    assert post(client, "r1", [with_count(kind, where, 1)], json_body).status_code == 200


class Thing(BaseModel):
    name: str = Field(min_length=1)


def test_a_route_s_json_body_refused_by_fastapi_has_the_same_shape(tmp_path):
    # routes given to create_app (rtxviz lesson's POST /api/lessons/start) take pydantic bodies: their 422s too
    extra = APIRouter()

    @extra.post("/things")
    def things(body: Thing) -> dict:
        return {"name": body.name}

    with TestClient(create_app(db=str(tmp_path / "r.db"), routers=[extra])) as c:
        assert c.post("/api/things", json={"name": "a"}).json() == {"name": "a"}
        assert_422(c.post("/api/things", json={"name": 3}), "body field 'name': Input should be a valid string, got 3")
        assert_422(c.post("/api/things", content=b'{"name": ', headers={"Content-Type": "application/json"}),
                   "the body, at character", "JSON decode error")
