"""The compiled scan of NDJSON lines (rtxviz/_eventcheck.c `scan`, `schema.scan_lines`) against orjson and
pydantic, the authorities.

The scan reads each line straight from its bytes. It may leave a line to the decoding path (orjson, then the
compiled check and pydantic) that is valid, never the reverse: a line it confirms must decode with orjson, pass
the schema, and give the same kind, step and text as decoding would, and the fields it decodes for the history
must equal orjson's. And it must confirm the lines real emitters send, or the server's hot path would quietly be
the slower one again.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtxviz import schema
from rtxviz.events.emitter import encode_event
from rtxviz.schema import CORE_KINDS, EventError, scan_lines, validate_batch
from rtxviz.store.history import FIELDS, HistoryTracker
from rtxviz.web.deps import Settings
from rtxviz.web.routers import ingest

from .test_schema import COUNTS, minimal_event, node, with_count
from .test_schema_check import CORPUS, mutated

pytestmark = pytest.mark.skipif(schema._scan is None, reason="rtxviz._eventcheck not built (no C compiler)")

LINES = [encode_event(e) for e in CORPUS if e["kind"] in CORE_KINDS]


def valid(line: bytes) -> Any:
    """The event orjson decodes from `line`, if it also passes the schema; else None."""
    try:
        obj = orjson.loads(line)
        validate_batch([obj])
    except (orjson.JSONDecodeError, EventError):
        return None
    return obj


def assert_agrees(line: bytes) -> bool:
    """If the scan confirms `line`, it is valid and the scan says what decoding says. Returns whether confirmed."""
    got = scan_lines([line], FIELDS, orjson.loads)
    if got is None:
        return False
    obj = valid(line)
    assert obj is not None, line
    (row,), (fields,) = got
    assert row == (obj["kind"], obj.get("step"), line.decode())
    if obj["kind"] in FIELDS:
        assert fields == {k: obj[k] for k in FIELDS[obj["kind"]] if k in obj}
    else:
        assert fields is None
    return True


def test_every_kind_the_check_models_the_scan_models() -> None:
    assert set(schema.SCAN_SPECS) == set(schema.SPECS) == CORE_KINDS


def test_the_lines_emitters_send_are_confirmed() -> None:
    assert len(LINES) > 50
    got = scan_lines(LINES, FIELDS, orjson.loads)
    assert got is not None
    for line in LINES:
        assert assert_agrees(line), line


def test_the_bench_and_burst_lines_are_confirmed() -> None:
    from tests.browser.graphs import gpt_graph
    burst = [encode_event(e) for e in gpt_graph(n_blocks=2, ops_per_block=60)]
    assert scan_lines(burst, FIELDS, orjson.loads) is not None
    line = json.dumps({"v": 1, "kind": "node", "t": 1.5, "step": 7, "id": 3, "op": "matmul",
                       "inputs": [{"node": 2}, {"leaf": 3}], "shape": [128, 512], "dtype": "float32",
                       "device": "cpu", "module": "model.fc1", "rule": "dA = dC @ B^T, dB = A^T @ dC",
                       "saved_bytes": 262144}, separators=(",", ":")).encode()
    assert assert_agrees(line)


def _with(**fields: Any) -> bytes:
    return json.dumps(node(**fields), separators=(",", ":")).encode()


GOOD = _with(module="fc")
BAD_LINES = [
    GOOD.replace(b'"fc"', b'"\\ud800"'),            # a lone high surrogate escape
    GOOD.replace(b'"fc"', b'"\\udc00"'),            # a lone low surrogate escape
    GOOD.replace(b'"fc"', b'"\\ud800\\u0041"'),      # a high surrogate and no low one
    GOOD.replace(b'"fc"', b'"f\x01c"'),             # a control character
    GOOD.replace(b'"fc"', b'"f\tc"'),
    GOOD.replace(b'"fc"', b'"\xed\xa0\x80"'),       # a surrogate in UTF-8
    GOOD.replace(b'"fc"', b'"\xc0\x80"'),           # overlong
    GOOD.replace(b'"fc"', b'"\xff"'),
    GOOD.replace(b'"fc"', b'"\xf4\x90\x80\x80"'),   # beyond U+10FFFF
    GOOD.replace(b'"fc"', b'"\\x41"'),              # no such escape
    GOOD.replace(b'"fc"', b'"\\u00zz"'),
    GOOD.replace(b'"t":1.5', b'"t":1e999'),         # infinite as a double
    GOOD.replace(b'"t":1.5', b'"t":-1e309'),
    GOOD.replace(b'"t":1.5', b'"t":1.8e308'),
    GOOD.replace(b'"t":1.5', b'"t":NaN'),
    GOOD.replace(b'"t":1.5', b'"t":Infinity'),
    GOOD.replace(b'"t":1.5', b'"t":01'),
    GOOD.replace(b'"t":1.5', b'"t":1.'),
    GOOD.replace(b'"t":1.5', b'"t":.5'),
    GOOD.replace(b'"t":1.5', b'"t":1e'),
    GOOD.replace(b'"t":1.5', b'"t":-'),
    GOOD.replace(b'"t":1.5', b'"t":"1.0"'),
    GOOD.replace(b'"id":3', b'"id":true'),
    GOOD.replace(b'"id":3', b'"id":3.0'),
    GOOD.replace(b'"id":3', b'"id":3e0'),
    GOOD.replace(b'"id":3', b'"id":18446744073709551616'),  # orjson reads it as a float
    GOOD.replace(b'"shape":[2,3]', b'"shape":[2,3,]'),
    GOOD + b"x",
    GOOD + b"{}",
    GOOD[:-1],
    GOOD[:-1] + b',}',
    GOOD.replace(b'"v":1', b'"v":true'),
    GOOD.replace(b'"kind":"node"', b'"kind":"leaf"'),
    b"\x0c" + GOOD,                                   # form feed is no JSON whitespace
    b"[" + GOOD + b"]",
]


@pytest.mark.parametrize("line", BAD_LINES)
def test_bad_lines_are_never_confirmed(line: bytes) -> None:
    assert valid(line) is None, line
    assert scan_lines([line], FIELDS, orjson.loads) is None
    assert scan_lines([GOOD, line, GOOD], FIELDS, orjson.loads) is None


@pytest.mark.parametrize("line", [
    GOOD.replace(b'"fc"', b'"\\ud83d\\ude00 \\u00e9\\n\\"\\\\\\/"'),  # escapes the scan reads
    GOOD.replace(b'"fc"', "\"é ᵀ Σ 😀\"".encode()),
    GOOD.replace(b'"t":1.5', b'"t":9.9e307'),
    GOOD.replace(b'"t":1.5', b'"t":-0.0e-400'),
    GOOD.replace(b'"t":1.5', b'"t":1e-400'),      # underflows to 0.0, as orjson reads it
    GOOD.replace(b'"t":1.5', b'"t":0e999999'),    # zero, whatever the exponent
    GOOD.replace(b'"t":1.5', b'"t":0.001e310'),   # 1e307: below 1e308 by its digits and exponent
    GOOD.replace(b'"t":1.5', b'"t":12E+3'),
    GOOD.replace(b'"t":1.5', b'"t" : 2 '),
    b" \t" + GOOD + b"\r",
])
def test_valid_lines_are_confirmed_and_agree(line: bytes) -> None:
    assert valid(line) is not None
    assert assert_agrees(line)


def test_what_it_leaves_to_the_decoding_path() -> None:
    for line in (_with(id=2**63 + 5), b'{"v":1,"kind":"cache_hit","t":0.0,"step":0,"n":3}',
                 GOOD.replace(b'"module"', b'"modul\\u0065"'),  # an escaped key
                 GOOD.replace(b'"v":1', b'"v":1,"v":1'),  # a duplicate key (orjson keeps the last)
                 GOOD.replace(b'"t":1.5', b'"t":1.7976931348623157e308'),  # from 1e308 on: rounding decides
                 GOOD.replace(b'{"v":1,"kind":"node",', b'{"t":1.5,"v":1,"kind":"node",').replace(b',"t":1.5', b'', 1)):
        assert valid(line) is not None
        assert scan_lines([line], FIELDS, orjson.loads) is None


def test_depth_past_the_bound_is_left_to_the_careful_path() -> None:
    deep = b"[" * 70 + b"]" * 70
    line = GOOD.replace(b'"device":"cpu"', b'"device":"cpu","attrs":{"a":' + deep + b"}")
    assert scan_lines([line], FIELDS, orjson.loads) is None
    with pytest.raises(Exception, match="nests deeper than 64"):
        ingest._parse_ndjson(line, Settings())


# -- generated: mutated events, and mutated bytes ------------------------------------------------------------
@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(ev=mutated())
def test_what_the_scan_confirms_of_mutated_events_is_valid(ev: dict) -> None:
    assert_agrees(json.dumps(ev, separators=(",", ":")).encode())


_NOISE = st.sampled_from([b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b" ", b"0", b"1", b"-", b".", b"e",
                          b"n", b"\x00", b"\x1f", b"\x80", b"\xc3", b"\xed", b"\xff", b"u", b"d800", b"null",
                          b"true", b"1e999"])


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(line=st.sampled_from(LINES), edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 2), _NOISE),
                                                   min_size=1, max_size=3))
def test_what_the_scan_confirms_of_mutated_bytes_is_valid(line: bytes, edits: list) -> None:
    data = bytearray(line)
    for where, how, noise in edits:
        i = where % (len(data) + 1)
        if how == 0:
            data[i:i] = noise
        elif how == 1:
            del data[i:i + len(noise)]
        else:
            data[i:i + len(noise)] = noise
    assert_agrees(bytes(data))


# -- the server: the same rows and history with and without the scan -----------------------------------------
def test_ingest_and_history_agree_with_and_without_the_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"\n".join(LINES)
    rows, decoded = ingest._parse_ndjson(body, Settings())
    assert any(d is not None and len(d) < len(orjson.loads(t)) for (_, _, t), d in zip(rows, decoded, strict=True))
    monkeypatch.setattr(schema, "_scan", None)
    rows_decoded, full = ingest._parse_ndjson(body, Settings())
    assert rows == rows_decoded
    assert (HistoryTracker().rows("r", rows, 1, decoded) == HistoryTracker().rows("r", rows, 1, full)
            == HistoryTracker().rows("r", rows, 1))


def test_scans_in_several_threads_at_once_agree() -> None:
    """The scan runs without the GIL: threads scanning at once (as the server's worker threads do) each get what
    one scan alone gets."""
    import threading

    want = scan_lines(LINES, FIELDS, orjson.loads)
    bad = LINES[:5] + [BAD_LINES[0]] + LINES[5:]
    results: list = []

    def work() -> None:
        for _ in range(30):
            results.append((scan_lines(LINES, FIELDS, orjson.loads), scan_lines(bad, FIELDS, orjson.loads)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 120
    assert all(good == want and none is None for good, none in results)


# -- a whole body, split and stripped in C; the stored texts built in C ---------------------------------------
@pytest.mark.parametrize("body", [
    b"\n".join(LINES),
    b"\r\n".join(LINES) + b"\r\n",                                   # CRLF ends, a trailing newline
    b"\n\n \t" + b"\n\x0b\x0c\n".join(LINES[:5]) + b" \x0c\n\n",     # blank lines, padding bytes.strip() strips
    LINES[0],
])
def test_a_body_scans_as_its_stripped_lines(body: bytes) -> None:
    lines = [line for line in (raw.strip() for raw in body.split(b"\n")) if line]
    got = scan_lines(body, FIELDS, orjson.loads)
    assert got is not None and got == scan_lines(lines, FIELDS, orjson.loads)
    assert [t for _, _, t in got[0]] == [line.decode() for line in lines]


def test_a_body_over_a_bound_is_left_to_the_careful_path() -> None:
    body = b"\n".join(LINES[:4])
    longest = max(len(line) for line in LINES[:4])
    assert scan_lines(body, FIELDS, orjson.loads, 4, longest) is not None
    assert scan_lines(body + b"\n\n", FIELDS, orjson.loads, 4, longest) is not None  # empty lines do not count
    assert scan_lines(body, FIELDS, orjson.loads, 3, longest) is None
    assert scan_lines(body, FIELDS, orjson.loads, 4, longest - 1) is None
    assert scan_lines(b"", FIELDS, orjson.loads) == ([], [])


def test_the_stored_texts_from_c_are_python_s() -> None:
    from rtxviz.store import rows

    texts = ['{"kind":"a"}', '{"op":"é ᵀ Σ"}', '{"s":"😀"}', '{"x":"\\u0041"}', "{}"]
    events = [("node", 1, t) for t in texts]
    saved, rows._seq_texts = rows._seq_texts, None
    try:
        python = rows.stored_texts(events, 2**40)
        assert python[0] == '{"seq":1099511627776,"kind":"a"}'
    finally:
        rows._seq_texts = saved
    assert schema.seq_texts(events, 2**40) == python
    assert all(t.isascii() for t in python)  # past-ASCII characters escaped: the same JSON
    assert [json.loads(t) for t in python[:-1]] == [{"seq": 2**40 + i, **json.loads(t)}
                                                    for i, t in enumerate(texts[:-1])]  # "{}" is no event
    assert schema.seq_texts([("node", 1, ' {"a":1}')], 1) is None  # not from a "{": Python's path
    assert schema.seq_texts([("node", 1)], 1) is None


# -- user review: a missing `step` and negative counters leave the scan's fast path --------------------------------
@pytest.mark.parametrize("kind", sorted(CORE_KINDS))
def test_a_line_without_step_is_never_confirmed(kind: str) -> None:
    ev = minimal_event(kind)
    assert assert_agrees(encode_event(ev))
    del ev["step"]
    line = encode_event(ev)
    assert valid(line) is None
    assert scan_lines([line], FIELDS, orjson.loads) is None


@pytest.mark.parametrize("kind, where, field", COUNTS)
def test_a_line_with_a_negative_count_is_never_confirmed(kind: str, where: tuple, field: str) -> None:
    low = 1 if field == "sample_every" else 0
    assert assert_agrees(encode_event(with_count(kind, where, low)))
    line = encode_event(with_count(kind, where, low - 1))
    assert valid(line) is None
    assert scan_lines([line], FIELDS, orjson.loads) is None
