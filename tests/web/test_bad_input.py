"""Bad input (issue 17, points 1-5): each answered 4xx with a reason naming the field, nothing of it stored, and
whatever the server does store reads back as strict JSON with the documented types.

`read_back_strictly` is the check the fuzz test (test_fuzz.py) shares: every read endpoint of every run, parsed by
orjson (RFC 8259 only: no NaN/Infinity tokens, no lone surrogates, no numbers beyond the float range).
"""

from __future__ import annotations

import json

import orjson
import pytest
from fastapi.testclient import TestClient

from rtxviz.web import create_app

NDJSON = {"Content-Type": "application/x-ndjson"}


def ev(kind="step_begin", step=0, **fields):
    return {"v": 1, "kind": kind, "t": 1.0, "step": step, **fields}


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "runs.db"))) as c:
        yield c


def check_envelope(e: dict) -> None:
    """The documented envelope types: v the integer 1, t a number (never a bool or string), step int or null."""
    assert type(e["v"]) is int and e["v"] == 1, e
    assert type(e["t"]) in (int, float), e
    assert "step" in e and (e["step"] is None or type(e["step"]) is int), e
    assert type(e["seq"]) is int, e


def read_back_strictly(client: TestClient) -> int:
    """Read every run through every read endpoint, parsing strictly; return how many events were read."""
    r = client.get("/api/runs")
    assert r.status_code == 200, r.text
    runs = orjson.loads(r.content)
    n = 0
    for run in runs:
        rid = run["id"]
        assert type(run["name"]) is str
        for path in (f"/api/runs/{rid}", f"/api/runs/{rid}/steps", f"/api/runs/{rid}/graph"):
            r = client.get(path)
            assert r.status_code == 200, (path, r.text)
            orjson.loads(r.content)
        r = client.get(f"/api/runs/{rid}/events", params={"limit": 10_000})
        assert r.status_code == 200, r.text
        page = orjson.loads(r.content)
        for e in page["events"]:
            check_envelope(e)
        n += len(page["events"])
        for s in orjson.loads(client.get(f"/api/runs/{rid}/steps").content):
            assert type(s["step"]) is int and type(s["sampled"]) is bool, s
        with client.websocket_connect(f"/api/runs/{rid}/ws") as ws:
            hello = orjson.loads(ws.receive_text())
            if hello["last_seq"]:
                msg = orjson.loads(ws.receive_text())
                assert msg["type"] == "events" and msg["first_seq"] == 1
    return n


def post(client, run_id, body: bytes | str, json_body: bool = False):
    headers = {"Content-Type": "application/json"} if json_body else NDJSON
    return client.post(f"/api/runs/{run_id}/events", content=body, headers=headers)


def assert_refused(client, r, status: int, *words: str, run_id: str = "bad") -> None:
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    for w in words:
        assert w in detail, (w, detail)
    assert client.get(f"/api/runs/{run_id}").status_code == 404  # nothing of a refused batch is kept
    read_back_strictly(client)


@pytest.mark.parametrize("json_body", [False, True])
def test_deep_nesting_is_a_422_not_a_500(client, json_body):
    # issue 17.1: 1,500 levels raised RecursionError (500) in either body format
    deep = "[" * 1500 + "]" * 1500
    line = f'{{"v": 1, "kind": "my.tool", "t": 1.0, "step": null, "x": {deep}}}'
    body = f'{{"events": [{line}]}}' if json_body else line
    assert_refused(client, post(client, "bad", body, json_body), 422, "not valid JSON")
    # below the parser's limit but past the server's: still refused, naming the depth
    mid = "[" * 100 + "]" * 100
    line = f'{{"v": 1, "kind": "my.tool", "t": 1.0, "step": null, "x": {mid}}}'
    body = f'{{"events": [{line}]}}' if json_body else line
    assert_refused(client, post(client, "bad", body, json_body), 422, "event 0", "deeper than 64")


def test_an_event_split_over_two_lines_is_refused(client):
    # issue 17.2: the line count matched the joined array (one split event, one line holding two events), so an
    # invalid line was stored; /steps then answered 500
    a = json.dumps(ev("my.tool", 0, x=[{}, {}]))
    head, tail = a.split("{}, ")  # '{"v": ..., "x": [' and '{}]}'
    two = json.dumps(ev("step_begin", 0)) + "," + json.dumps(ev("step_begin", 1))
    body = "\n".join([head + "{}", tail, two])
    assert_refused(client, post(client, "bad", body), 422, "event 0 (line 1)", "not valid JSON")
    # a string split across lines
    line = json.dumps(ev("my.tool", 0, note="a b"))
    assert_refused(client, post(client, "bad", line.replace("a b", "a\nb")), 422, "event 0", "not valid JSON")


@pytest.mark.parametrize("number", ["1e999", "-1e400", "1" + "0" * 400 + ".0"])
@pytest.mark.parametrize("json_body", [False, True])
def test_numbers_beyond_float_range_are_refused(client, number, json_body):
    # issue 17.3: "t": 1e999 was stored as Infinity through the JSON body
    line = f'{{"v": 1, "kind": "step_end", "t": {number}, "step": 0}}'
    body = f'{{"events": [{line}]}}' if json_body else line
    assert_refused(client, post(client, "bad", body, json_body), 422, "not valid JSON", "infinity")
    generic = f'{{"v": 1, "kind": "my.tool", "t": 1.0, "step": null, "x": {{"y": [{number}]}}}}'
    body = f'{{"events": [{generic}]}}' if json_body else generic
    assert_refused(client, post(client, "bad", body, json_body), 422, "not valid JSON")


@pytest.mark.parametrize("json_body", [False, True])
@pytest.mark.parametrize("escape", ["\\ud800", "\\udcff", "x\\ude00y"])
def test_lone_surrogates_are_refused(client, json_body, escape):
    # issue 17.4: a lone surrogate in a run name answered 500 (UnicodeEncodeError in SQLite)
    line = f'{{"v": 1, "kind": "run_start", "t": 1.0, "step": null, "name": "train{escape}.py"}}'
    body = f'{{"events": [{line}]}}' if json_body else line
    assert_refused(client, post(client, "bad", body, json_body), 422, "not valid JSON", "surrogate")


def test_a_surrogate_pair_is_a_character_and_accepted(client):
    line = '{"v": 1, "kind": "run_start", "t": 1.0, "step": null, "name": "smile \\ud83d\\ude00"}'
    assert post(client, "ok", line).status_code == 200
    assert client.get("/api/runs/ok").json()["name"] == "smile \U0001f600"
    read_back_strictly(client)


@pytest.mark.parametrize("field, value", [
    ("t", '"1.5"'), ("t", "true"), ("t", "null"), ("step", '"3"'), ("step", "true"), ("step", "3.0"),
    ("step", "-1"), ("v", "true"), ("v", "1.0"), ("v", '"1"'), ("sampled", "1"), ("sampled", '"yes"'),
])
@pytest.mark.parametrize("kind", ["step_begin", "my.tool"])
@pytest.mark.parametrize("json_body", [False, True])
def test_wrong_types_are_refused_naming_the_field(client, field, value, kind, json_body):
    # issue 17.5: "t": "1.5", "step": "3", "step": true, "v": true were stored as sent (and /steps said 3)
    if field == "sampled" and kind != "step_begin":
        pytest.skip("sampled is a step_begin field")
    obj = json.dumps(ev(kind, 0))
    line = obj.replace("}", f', "{field}": {value}}}') if field not in ev() else None
    if line is None:
        fields = json.loads(obj)
        fields[field] = "PLACEHOLDER"
        line = json.dumps(fields).replace('"PLACEHOLDER"', value)
    body = f'{{"events": [{line}]}}' if json_body else line
    assert_refused(client, post(client, "bad", body, json_body), 422, "event 0", field)


@pytest.mark.parametrize("doc, words", [
    ({"events": [], "name": 5}, ["name", "int"]),
    ({"events": [], "name": "x" * 300}, ["name", "256"]),
    ({"events": [], "dropped": True}, ["dropped", "True"]),
    ({"events": [], "dropped": "3"}, ["dropped"]),
    ({"events": [], "dropped": -1}, ["dropped"]),
    ({"events": [], "dropped": 2**63}, ["dropped"]),
    ({"events": [], "nmae": "typo"}, ["unknown", "nmae"]),
    ({"events": {}}, ["events"]),
])
def test_json_body_fields_are_checked(client, doc, words):
    # the JSON body's name and dropped were silently ignored when of the wrong type (true counted as 1 drop)
    assert_refused(client, client.post("/api/runs/bad/events", json=doc), 422, *words)


def test_good_input_of_every_shape_reads_back_strictly(client):
    lines = [ev("run_start", None, name="ünï cödé", meta={"lr": 1e-3, "deep": {"a": [1, 2, {"b": None}]}}),
             ev("step_begin", 0, sampled=True), ev("my.tool", 0, big=2**62, small=-1e-300, s="\\ud800 as text"),
             ev("step_begin", 1, sampled=False), {"v": 1, "kind": "step_end", "t": 2, "step": 1}]
    assert post(client, "good", "\r\n".join(json.dumps(e) for e in lines) + "\n\n").status_code == 200
    doc = {"events": [ev("step_end", 1)], "name": "named", "dropped": 2}
    assert client.post("/api/runs/good/events", json=doc).status_code == 200
    assert read_back_strictly(client) == 6
    assert client.get("/api/runs/good/steps").json() == [{"step": 0, "seq": 2, "sampled": True},
                                                          {"step": 1, "seq": 4, "sampled": False}]
    run = client.get("/api/runs/good").json()
    assert run["dropped"] == 2 and run["name"] == "named"  # the latest batch names the run


@pytest.mark.parametrize("kind", ["[]", "{}", '["node"]', "null", "3"])
def test_a_kind_that_is_not_a_string_is_a_422(client, kind):
    # found by test_fuzz.py: a list or dict kind was looked up in a set of kinds and raised TypeError (500)
    line = f'{{"v": 1, "kind": {kind}, "t": 1.0, "step": 0}}'
    assert_refused(client, post(client, "bad", line), 422, "event 0", "kind")
