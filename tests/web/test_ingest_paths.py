"""The NDJSON ingest's two paths agree: the column-at-a-time fast path stores exactly what the line-by-line path
does, and whenever the fast path gives up, the careful one names the same fault the server always named."""

from __future__ import annotations

import json

import pytest
from fastapi import HTTPException

from rtxviz.schema import EventError
from rtxviz.store.history import FIELDS
from rtxviz.web.deps import Settings
from rtxviz.web.routers.ingest import MAX_DEPTH, _parse_ndjson, _parse_ndjson_carefully


def line(kind: str = "step_end", step: int | None = 1, **extra: object) -> str:
    return json.dumps({"v": 1, "kind": kind, "t": 1.5, "step": step, **extra})


GOOD = [
    "\n".join([line("run_start", None, name="r"), line("step_begin", 0, sampled=True), line("my.tool", 0, n=2)]),
    "\r\n".join([line(), line(step=None)]) + "\r\n",           # CRLF line ends, a trailing newline
    "\n\n  " + line() + "  \n\n\t" + line(step=7) + "\n",      # blank lines and padding are skipped
    line("run_start", None, name="ünï \\ud83d\\ude00"),          # non-ASCII text and an escaped surrogate pair
    line("my.deep", 2, x=[[[[1]]]]),                            # nested, but far from the bound
    "",
]


@pytest.mark.parametrize("body", GOOD)
def test_the_fast_path_stores_what_the_careful_path_stores(body):
    s = Settings()
    rows, objs = _parse_ndjson(body.encode(), s)
    careful_rows, careful_objs = _parse_ndjson_carefully(body.encode(), s)
    assert rows == careful_rows
    assert careful_objs == [json.loads(text) for _, _, text in rows]
    # the decoded events the store's history reads: whole, or (the compiled scan) only the fields it reads
    for got, whole in zip(objs, careful_objs, strict=True):
        kind = whole["kind"]
        assert got == whole or got == ({k: whole[k] for k in FIELDS[kind] if k in whole} if kind in FIELDS else None)
    for kind, step, text in rows:  # and each row is its line, as sent, with the kind and step read from it
        obj = json.loads(text)
        assert (obj["kind"], obj.get("step")) == (kind, step)


def deep(levels: int) -> str:
    return '{"v": 1, "kind": "my.deep", "t": 1.0, "step": null, "x": ' + "[" * levels + "]" * levels + "}"


BAD = [
    (line() + "\n" + line()[:-1] + "\n}", EventError, "event 1 (line 2) is not valid JSON"),   # split event
    (line() + " " + line(), EventError, "event 0 (line 1) is not valid JSON"),                 # two on one line
    (line() + "\n" + line().replace('"t": 1.5', '"t": NaN'), EventError, "event 1 (line 2) is not valid JSON"),
    (line() + "\n\n" + deep(MAX_DEPTH + 1), EventError, "event 1 (line 3) nests deeper than 64"),
    (line() + "\n" + line(step="3"), EventError, "event 1 (kind 'step_end'): step"),
    (line() + "\n" + "x" * 300, HTTPException, "event 1 (line 2) is 300 bytes; the limit is 200"),
    ("\n".join([line()] * 4), HTTPException, "more than 3 events in one batch"),
]


@pytest.mark.parametrize("body, error, message", BAD)
def test_a_fault_is_named_as_the_careful_path_names_it(body, error, message):
    s = Settings(max_event_bytes=200, max_events_per_batch=3)
    for parse in (_parse_ndjson, _parse_ndjson_carefully):
        with pytest.raises(error) as caught:
            parse(body.encode(), s)
        text = str(caught.value.detail) if isinstance(caught.value, HTTPException) else str(caught.value)
        assert message in text, (parse.__name__, text)


def test_a_bracket_heavy_line_within_the_depth_bound_is_accepted():
    # more than MAX_DEPTH brackets, but side by side, not nested: the cheap bound sends it to the careful path,
    # whose walk finds it shallow
    body = line("my.wide", 1, x=[[1]] * MAX_DEPTH).encode()
    assert _parse_ndjson(body, Settings()) == _parse_ndjson_carefully(body, Settings())
