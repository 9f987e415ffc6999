"""The server through FastAPI's TestClient: ingest, REST, WebSocket, errors, auth, persistence."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from rtxviz.web import create_app

NDJSON = {"Content-Type": "application/x-ndjson"}


def ev(kind="step_begin", step=0, **fields):
    return {"v": 1, "kind": kind, "t": 1.0, "step": step, **fields}


def node(i, step=0):
    return ev("node", step, id=i, op="mul", inputs=[{"leaf": 1}], shape=[2], dtype="float32", device="cpu")


def ndjson(events):
    return "\n".join(json.dumps(e) for e in events)


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "runs.db"))) as c:
        yield c


def post(client, run_id, events, **params):
    return client.post(f"/api/runs/{run_id}/events", content=ndjson(events), headers=NDJSON, params=params)


def test_ingest_then_read_back(client):
    start = ev("run_start", None, name="mlp", meta={"lr": 0.1})
    r = post(client, "run1", [start, ev("step_begin", 0), node(1), node(2), ev("step_begin", 1), node(3, 1)])
    assert r.status_code == 200
    # viewers: none streams run1 (a PostgreSQL store, whose viewers may be in other processes, does not say)
    assert r.json() in ({"run_id": "run1", "first_seq": 1, "count": 6, "viewers": 0},
                        {"run_id": "run1", "first_seq": 1, "count": 6})
    assert post(client, "run1", [ev("step_end", 1)]).json()["first_seq"] == 7
    (run,) = client.get("/api/runs").json()
    assert run["id"] == "run1" and run["name"] == "mlp" and run["meta"] == {"lr": 0.1}
    assert run["n_events"] == 7 and run["last_step"] == 1 and run["status"] == "running"
    page = client.get("/api/runs/run1/events", params={"after": 2, "limit": 3}).json()
    assert [e["seq"] for e in page["events"]] == [3, 4, 5] and page["more"] and page["next_after"] == 5
    assert [e["id"] for e in client.get("/api/runs/run1/graph", params={"step": 0}).json()["events"]] == [1, 2]
    assert [s["step"] for s in client.get("/api/runs/run1/steps").json()] == [0, 1]
    kinds = client.get("/api/runs/run1/events", params={"kind": "node"}).json()["events"]
    assert [e["seq"] for e in kinds] == [3, 4, 6]
    assert client.get("/api/runs/nope").status_code == 404


def test_json_body_format_and_drop_count(client):
    body = {"events": [ev("step_begin", 0), ev("dropped", None, total=5, new=5)], "name": "j", "dropped": 5}
    assert client.post("/api/runs/j1/events", json=body).status_code == 200
    run = client.get("/api/runs/j1").json()
    assert run["name"] == "j" and run["dropped"] == 5


@pytest.mark.parametrize("body, words", [
    ('{"v": 1, "kind": "node", "t": 1, "step": 0}', ["event 0", "id"]),
    (ndjson([ev(), node(1), {**node(2), "shape": "big"}]), ["event 2", "shape"]),
    ('{"v": 1, "kind": "step_end", "t": 1, "step": 0}\n{not json', ["event 1", "not valid JSON"]),
    ('{"v": 1, "kind": "step_end", "t": NaN}', ["NaN"]),
    ('{"v": 1, "kind": "step_end", "t": 1, "step": 0, "seq": 3}', ["seq"]),
    ('{"v": 1, "kind": "step_end", "t": 1, "step": 0}{"v": 1}', ["event 0"]),
])
def test_malformed_events_get_422_with_a_message(client, body, words):
    r = client.post("/api/runs/bad/events", content=body, headers=NDJSON)
    assert r.status_code == 422, r.text
    for w in words:
        assert w in r.json()["detail"]
    assert client.get("/api/runs/bad").status_code == 404  # nothing of a refused batch is kept


def test_mixed_kinds_and_nan_lookalikes_take_the_careful_path(client):
    # core kinds with a generic one (the fast path declines the batch), and "NaN"/"Infinity" inside strings (the
    # fast path declines too, as it cannot tell them from tokens): all accepted, stored verbatim, in order
    events = [ev("step_begin", 0), node(1), ev("checkpoint", 0, phase="begin", segment=0),
              ev("lesson.note", 0, text="NaN and Infinity are not JSON numbers"), node(2)]
    r = post(client, "mixed", events)
    assert r.status_code == 200 and r.json()["count"] == 5, r.text
    got = client.get("/api/runs/mixed/events").json()["events"]
    assert [e["kind"] for e in got] == ["step_begin", "node", "checkpoint", "lesson.note", "node"]
    assert got[3]["text"] == "NaN and Infinity are not JSON numbers" and [e["seq"] for e in got] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("body", [
    '{"v": 1, "kind": "lesson.note", "t": 1, "x": [1, NaN]}',
    '{"v": 1, "kind": "node", "t": 1, "id": 1, "op": "mul", "inputs": [], "shape": [-Infinity], "dtype": "f", '
    '"device": "cpu"}',
])
def test_nan_tokens_are_refused_in_every_kind(client, body):
    r = client.post("/api/runs/nan/events", content=body, headers=NDJSON)
    assert r.status_code == 422 and "not valid JSON" in r.json()["detail"]


def test_oversized_requests_get_413(tmp_path):
    app = create_app(db=str(tmp_path / "x.db"), max_body_bytes=10_000, max_events_per_batch=5, max_event_bytes=500)
    with TestClient(app) as c:
        assert post(c, "r", [ev()] * 6).status_code == 413
        assert post(c, "r", [ev("note", None, text="x" * 600)]).status_code == 413
        r = post(c, "r", [ev("note", None, text="x" * 400)] * 30)
        assert r.status_code == 413 and "limit" in r.json()["detail"]
        assert post(c, "r", [ev()] * 5).status_code == 200


def test_wrong_content_type_gets_415(client):
    r = client.post("/api/runs/r/events", content=ndjson([ev()]), headers={"Content-Type": "text/plain"})
    assert r.status_code == 415


def test_token_required_everywhere(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "t.db"), token="s3cret")) as c:
        assert c.get("/api/runs").status_code == 401
        assert post(c, "r", [ev()]).status_code == 401
        assert c.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.post("/api/runs/r/events", content=ndjson([ev()]),
                      headers={**NDJSON, "Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/api/runs", params={"token": "s3cret"}).json()[0]["id"] == "r"
        with pytest.raises(WebSocketDisconnect) as closed:
            with c.websocket_connect("/api/runs/r/ws") as ws:
                ws.receive_text()
        assert closed.value.code == 1008
        with c.websocket_connect("/api/runs/r/ws?token=s3cret") as ws:
            assert json.loads(ws.receive_text())["type"] == "hello"


def test_restart_keeps_runs_and_continues_sequence(tmp_path):
    db = str(tmp_path / "keep.db")
    with TestClient(create_app(db=db)) as c:
        post(c, "keep", [ev("run_start", None, name="kept"), node(1), node(2)])
    with TestClient(create_app(db=db)) as c:
        (run,) = c.get("/api/runs").json()
        assert (run["id"], run["name"], run["n_events"]) == ("keep", "kept", 3)
        assert [e["id"] for e in c.get("/api/runs/keep/graph").json()["events"]] == [1, 2]
        assert post(c, "keep", [node(3)]).json()["first_seq"] == 4


def read_events(ws, n):
    got = []
    while len(got) < n:
        msg = json.loads(ws.receive_text())
        if msg["type"] == "events":
            assert [e["seq"] for e in msg["events"]] == list(range(msg["first_seq"],
                                                                   msg["first_seq"] + len(msg["events"])))
            got.extend(msg["events"])
    return got


def test_websocket_replays_then_streams_live_in_order_to_several_clients(client):
    post(client, "live", [ev("run_start", None, name="live"), node(1)])
    with client.websocket_connect("/api/runs/live/ws") as a, client.websocket_connect("/api/runs/live/ws?after=1") as b:
        hello = json.loads(a.receive_text())
        assert hello["type"] == "hello" and hello["run"]["name"] == "live"
        json.loads(b.receive_text())
        for i in range(2, 12):
            post(client, "live", [node(i)])
        ga, gb = read_events(a, 12), read_events(b, 11)
    assert [e["seq"] for e in ga] == list(range(1, 13))
    assert [e["seq"] for e in gb] == list(range(2, 13))
    assert [e["id"] for e in ga[1:]] == list(range(1, 12))


def test_lobby_announces_new_runs(client):
    with client.websocket_connect("/api/ws") as lobby:
        assert json.loads(lobby.receive_text()) == {"type": "hello", "v": 1, "runs": []}
        post(client, "new1", [ev("run_start", None, name="fresh")])
        msg = json.loads(lobby.receive_text())
    assert msg["type"] == "runs" and msg["run"]["name"] == "fresh"


def test_cross_origin_is_closed_by_default(client):
    r = client.options("/api/runs", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in r.headers
    with pytest.raises(WebSocketDisconnect):
        with client.websocket_connect("/api/ws", headers={"Origin": "http://evil.example"}) as ws:
            ws.receive_text()
    with client.websocket_connect("/api/ws", headers={"Origin": "http://testserver"}) as ws:
        assert json.loads(ws.receive_text())["type"] == "hello"


def test_static_index_and_delete(client):
    r = client.get("/")
    assert r.status_code == 200 and "rtxviz" in r.text
    post(client, "gone", [ev()])
    assert client.delete("/api/runs/gone").status_code == 200
    assert client.get("/api/runs/gone").status_code == 404
    assert client.get("/api/health").json()["schema"] == 1


@pytest.mark.parametrize("params", [{"step": 10**23}, {"after": 10**23}, {"step": -1}, {"after": -1}])
def test_out_of_range_numbers_in_queries_get_422_not_500(client, params):
    post(client, "r1", [ev("step_begin", 0)])
    response = client.get("/api/runs/r1/events", params=params)
    assert response.status_code == 422
    assert client.get("/api/runs/r1/events").status_code == 200  # and the server is fine afterwards


@pytest.mark.parametrize("host, status", [("127.0.0.1:8000", 200), ("[::1]:8000", 200), ("localhost", 200),
                                          ("evil.example:8000", 400), ("[::2]:8000", 400)])
def test_loopback_host_check_reads_ipv6_literals(tmp_path, host, status):
    from rtxviz.web import Settings

    app = create_app(db=str(tmp_path / "h.db"), settings=Settings(allowed_hosts=["127.0.0.1", "localhost", "::1"]))
    with TestClient(app) as c:
        assert c.get("/api/health", headers={"host": host}).status_code == status


@pytest.mark.parametrize("step", [10**23, -1])
def test_out_of_range_step_in_an_event_gets_422(client, step):
    response = post(client, "r2", [ev("step_begin", step)])
    assert response.status_code == 422 and "step" in response.text
    assert post(client, "r2", [ev("step_begin", 0)]).status_code == 200


def test_every_route_is_registered_once():
    """A router included twice answers the same, so only the route table shows it (the history router was, and
    each request to a later route was matched against both copies first). FastAPI names each operation once in
    the OpenAPI document and warns of a duplicate."""
    import warnings

    from rtxviz.web import create_app

    app = create_app(db=":memory:")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        app.openapi()
    assert [str(w.message) for w in caught if "Duplicate Operation ID" in str(w.message)] == []
