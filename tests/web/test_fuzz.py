"""Fuzzing the ingest endpoint (issue 17): hypothesis over the event schema (events of every kind, with fields of
right and wrong types, odd numbers and odd text, encoded in either body format) and over raw bytes (random, and
valid bodies with bytes flipped, cut or spliced). Whatever comes in: no 5xx, and everything stored reads back as
strict JSON with the documented types through every read endpoint (test_bad_input.read_back_strictly).

Sized to run in CI in well under a minute (about 15 s on a loaded 2-core machine).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtxviz.schema import CORE_KINDS
from rtxviz.web import create_app

from .test_bad_input import read_back_strictly

pytestmark = pytest.mark.timeout(300)

FUZZ = settings(max_examples=80, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, store_backend: str) -> Iterator[TestClient]:
    # store_backend (tests/web/conftest.py): one client per store, not one for both
    with TestClient(create_app(db=str(tmp_path_factory.mktemp("fuzz") / "runs.db"))) as c:
        yield c


# -- values: the right types, the wrong ones, and the awkward ones ------------------------------------------------
odd_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\ud800", "a\udcffb", "\U0001f600", "\x00", "\\u0000", "NaN", "Infinity", "ünï", "\n"]),
)
odd_number = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, 1e308, -0.0]),
)
scalar = st.one_of(st.none(), st.booleans(), odd_number, odd_text)
value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(odd_text, inner, max_size=4)), max_leaves=12)
shape = st.lists(st.integers(min_value=0, max_value=64), max_size=4)
ref = st.one_of(st.fixed_dictionaries({"node": st.integers(0, 100)}),
                st.fixed_dictionaries({"leaf": st.integers(0, 9)}))
stats = st.fixed_dictionaries({"shape": shape, "norm": st.floats(0, 10), "min": st.floats(-1, 0),
                               "max": st.floats(0, 1)})
#: plausible fields of each kind (so that many examples are valid and get stored), wrong ones mixed in below
FIELDS: dict[str, st.SearchStrategy] = {
    "run_start": st.fixed_dictionaries({"name": odd_text}, optional={"meta": st.dictionaries(odd_text, value,
                                                                                               max_size=3)}),
    "run_end": st.fixed_dictionaries({}, optional={"status": st.sampled_from(["ok", "error", "maybe"])}),
    "step_begin": st.fixed_dictionaries({}, optional={"sampled": st.one_of(st.booleans(), scalar)}),
    "node": st.fixed_dictionaries({"id": st.integers(0, 100), "op": odd_text, "inputs": st.lists(ref, max_size=3),
                                   "shape": shape, "dtype": st.just("float32"), "device": st.just("cpu")},
                                  optional={"attrs": st.dictionaries(odd_text, value, max_size=3)}),
    "leaf": st.fixed_dictionaries({"id": st.integers(0, 9), "shape": shape, "dtype": st.just("float32"),
                                   "device": st.just("cpu"), "requires_grad": st.booleans()}),
    "leaf_grad": st.fixed_dictionaries({"leaf": st.integers(0, 9), "stats": stats}),
    "my_tool.tick": st.dictionaries(st.sampled_from(["a", "b", "n", "seq"]), value, max_size=3),
}
kinds = st.sampled_from(sorted(FIELDS) + sorted(CORE_KINDS - set(FIELDS)) + ["Bad Kind", "x" * 70])


@st.composite
def events(draw: st.DrawFn) -> dict:
    kind = draw(kinds)
    ev: dict = {"v": 1, "kind": kind, "t": draw(st.floats(0, 2e9)), "step": draw(st.none() | st.integers(0, 50))}
    ev.update(draw(FIELDS.get(kind, st.just({}))))
    if draw(st.integers(0, 3)) == 0:  # one envelope field of any type, often a wrong one
        ev[draw(st.sampled_from(["v", "t", "step", "kind"]))] = draw(value)
    if draw(st.integers(0, 5)) == 0:
        ev[draw(odd_text)] = draw(value)  # an extra field
    return ev


def encode(ev: object, ascii_only: bool) -> str:
    # allow_nan: the sender may be anything, including a stdlib encoder that writes NaN and Infinity
    return json.dumps(ev, ensure_ascii=ascii_only, allow_nan=True)


def body_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate sent raw: invalid UTF-8 on the wire


def check(client: TestClient, run_id: str, body: bytes, ctype: str) -> None:
    r = client.post(f"/api/runs/{run_id}/events", content=body, headers={"Content-Type": ctype})
    assert r.status_code < 500, (r.status_code, r.text, body[:300])
    if r.status_code == 200:
        read_back_strictly(client)
    else:
        assert r.status_code in (413, 415, 422), r.text
        assert isinstance(r.json()["detail"], str) and r.json()["detail"]  # one shape for every 4xx


@FUZZ
@given(evs=st.lists(events(), min_size=0, max_size=6), ascii_only=st.booleans(), as_json=st.booleans(),
       run_id=st.sampled_from(["f1", "f2", "f3"]), separator=st.sampled_from(["\n", "\r\n", "\n\n"]))
def test_events_of_the_schema_any_types_never_5xx_and_read_back_strictly(client, evs, ascii_only, as_json, run_id,
                                                                        separator):
    if as_json:
        body = body_bytes(encode({"events": evs}, ascii_only))
        check(client, run_id, body, "application/json")
    else:
        body = body_bytes(separator.join(encode(e, ascii_only) for e in evs))
        check(client, run_id, body, "application/x-ndjson")


VALID = json.dumps({"v": 1, "kind": "node", "t": 1.5, "step": 2, "id": 7, "op": "mul", "inputs": [{"leaf": 1}],
                    "shape": [2, 3], "dtype": "float32", "device": "cpu"})


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid two-event NDJSON body with a few bytes changed, cut out, or spliced in."""
    body = bytearray(f"{VALID}\n{VALID}".encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        op = draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and at < len(body):
            body[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del body[at:at + draw(st.integers(1, 8))]
        else:
            body[at:at] = draw(st.sampled_from([b"\n", b"{", b"}", b"[", b",", b"\"", b"\\ud800", b"1e999",
                                                b"NaN", b"\xff", b"\xed\xa0\x80", b"true", b"\"3\""]))
    return bytes(body)


@FUZZ
@given(body=st.one_of(st.binary(max_size=200), mutated()),
       ctype=st.sampled_from(["application/x-ndjson", "application/json", "text/plain"]))
def test_raw_bytes_never_5xx_and_what_is_stored_reads_back_strictly(client, body, ctype):
    check(client, "raw", body, ctype)
