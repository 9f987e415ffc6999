"""The SQLite store's rows made in one compiled pass (`schema.seq_pack`, rtxviz/_eventcheck.c) are the rows its
Python makes (`stored_texts`, then `pack_rows`), and every stored text is ASCII: JSON equal to the event as sent,
with its seq. The Python side is the reference; json.loads is the judge of "the same JSON"."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtxviz import schema
from rtxviz.store import SQLiteStore, rows, sqlite
from rtxviz.store.sqlite import PACK_MAX, PACK_SEP, PACKED_KINDS, pack_rows

pytestmark = pytest.mark.skipif(schema._compiled is None, reason="the compiled module is not built")

KINDS = ["node", "grad", "leaf_grad", "step_begin", "optimizer_step"]
#: text that JSON carries raw: ASCII, two- and three-byte UTF-8 (é, ᵀ, Σ), past U+FFFF (🙂), and escapes as sent
TEXT = st.text(alphabet=st.sampled_from(list("ab \"\\/") + ["é", "ᵀ", "Σ", "·", "🙂", "\u2028", "\x7f"]),
               max_size=12)


def event(kind: str, step: int | None, note: str) -> tuple[str, int | None, str]:
    return kind, step, json.dumps({"v": 1, "kind": kind, "step": step, "note": note}, ensure_ascii=False,
                                  separators=(",", ":"))


EVENTS = st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from([None, 0, 1, 2**40]), TEXT), max_size=150)


def fresh(kind: str, step: int | None) -> tuple[str, int | None]:
    """The row's kind and step as the server's scan makes them: a new str per row (equal, not the same object), and
    an int that is new past CPython's small-int cache (2**40 here) and the shared one below it (0, 1, 2)."""
    return "".join(list(kind)), None if step is None else int(str(step))


@contextmanager
def python_only() -> Iterator[None]:
    """The store's own Python for the stored texts and rows, as without the compiled module."""
    saved = rows._seq_texts, sqlite._seq_pack
    rows._seq_texts, sqlite._seq_pack = None, None
    try:
        yield
    finally:
        rows._seq_texts, sqlite._seq_pack = saved


def python_pack(run_id: str, first: int, events: list) -> tuple[list[str], list]:
    with python_only():
        texts = rows.stored_texts(events, first)
        return texts, pack_rows(run_id, first, events, texts)


@settings(max_examples=300, deadline=None)
@given(EVENTS, st.sampled_from([1, 7, 2**40]))
def test_the_compiled_rows_are_python_s(spec: list, first: int) -> None:
    events = [event(*fresh(k, s), n) for k, s, n in spec]
    got = schema.seq_pack(events, first, "run-é", PACKED_KINDS, PACK_MAX, PACK_SEP)
    assert got == python_pack("run-é", first, events)


@settings(max_examples=100, deadline=None)
@given(EVENTS)
def test_a_stored_text_is_ascii_and_the_event_as_sent(spec: list) -> None:
    events = [event(k, s, n) for k, s, n in spec]
    got = schema.seq_pack(events, 5, "r", PACKED_KINDS, PACK_MAX, PACK_SEP)
    assert got is not None
    texts, _ = got
    for seq, (text, (_, _, sent)) in enumerate(zip(texts, events, strict=True), 5):
        assert text.isascii()
        assert json.loads(text) == {"seq": seq, **json.loads(sent)}


@pytest.mark.parametrize("extra", [1, 6])
def test_a_long_run_of_one_kind_splits_at_pack_max(extra: int) -> None:
    events = [event(*fresh("grad", 3), "Σ") for _ in range(2 * PACK_MAX + extra)]
    got = schema.seq_pack(events, 1, "r", PACKED_KINDS, PACK_MAX, PACK_SEP)
    assert got is not None
    texts, flat = got
    bodies = flat[4::5]
    assert [b.count(PACK_SEP) + 1 for b in bodies] == [PACK_MAX, PACK_MAX, extra]
    assert flat[1::5] == [1, 1 + PACK_MAX, 1 + 2 * PACK_MAX]
    assert (texts, flat) == python_pack("r", 1, events)


@pytest.mark.parametrize("events", [
    [("node", 1, '{"a":"\x1e"}')],  # the separator: Python's path names it (ValueError)
    [("node", 1, ' {"a":1}')],  # not from a "{"
    [("node", True, '{"a":1}'), ("node", 1, '{"a":1}')],  # a step that is not an int
    [(b"node", 1, '{"a":1}'), ("node", 1, '{"a":1}')],  # a kind that is not a str
    [("node", 1)],
    [("node", 1, '{"a":"\ud800"}')],  # a lone surrogate: Python's path refuses it
])
def test_what_the_compiled_pass_does_not_take_is_left_to_python(events: list) -> None:
    assert schema.seq_pack(events, 1, "r", PACKED_KINDS, PACK_MAX, PACK_SEP) is None


def test_the_compiled_pass_takes_only_a_frozenset_of_kinds() -> None:
    with pytest.raises(TypeError, match="seq_pack"):
        schema.seq_pack([("node", 1, '{"a":1}')], 1, "r", set(PACKED_KINDS), PACK_MAX, PACK_SEP)  # type: ignore


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store with the compiled texts and rows, as the server has it (restored after the test)."""
    monkeypatch.setattr(sqlite, "_seq_pack", schema.seq_pack)
    monkeypatch.setattr(rows, "_seq_texts", schema.seq_texts)


@pytest.mark.usefixtures("compiled")
def test_a_lone_surrogate_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"))
    try:
        store.append("r", None, [event("node", 0, "ok")])
        with pytest.raises(ValueError, match="lone surrogate"):
            store.append("r", None, [event("node", 0, "x"), ("grad", 0, '{"kind":"grad","a":"\ud800"}')])
        assert [seq for seq, _ in store.events("r")] == [1]
    finally:
        store.close()


@pytest.mark.usefixtures("compiled")
def test_a_run_id_that_is_not_a_str_is_left_to_python() -> None:
    class Name(str):
        pass

    events = [event("node", 0, "a"), event("node", 0, "b")]
    got = sqlite.packed_batch(Name("r"), 1, events)
    with python_only():
        assert got == sqlite.packed_batch(Name("r"), 1, events)


@pytest.mark.usefixtures("compiled")
def test_a_text_holding_the_separator_is_refused_by_name_and_stores_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"))
    try:
        store.append("r", None, [event("node", 0, "ok")])
        with pytest.raises(ValueError, match=r"event 1 of the batch \(grad\) holds the character U\+001E"):
            store.append("r", None, [event("node", 0, "x"), ("grad", 0, '{"kind":"grad","a":"\x1e"}')])
        assert [seq for seq, _ in store.events("r")] == [1]
    finally:
        store.close()


def file_rows(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT run_id, seq, kind, step, body FROM events ORDER BY run_id, seq").fetchall()
    finally:
        con.close()


@pytest.mark.usefixtures("compiled")
def test_the_store_writes_the_same_file_either_way(tmp_path: Path) -> None:
    events = [event(k, s, n) for k, s, n in [("step_begin", 0, ""), ("node", 0, "dW = dYᵀ @ X"),
                                             ("node", 0, "Σ dY"), ("grad", 0, "🙂"), ("grad", 0, ""),
                                             ("leaf_grad", 0, "é"), ("step_end", 0, "")]]
    assert schema.seq_pack(events, 1, "r", PACKED_KINDS, PACK_MAX, PACK_SEP) is not None  # not Python's path
    answers = {}
    for name in ("compiled", "python"):
        store = SQLiteStore(str(tmp_path / f"{name}.db"))
        try:
            if name == "python":
                with python_only():
                    answers[name] = store.append("r", None, events), store.events("r")
            else:
                answers[name] = store.append("r", None, events), store.events("r")
        finally:
            store.close()
    assert answers["compiled"] == answers["python"]
    assert file_rows(tmp_path / "compiled.db") == file_rows(tmp_path / "python.db")
    assert len(file_rows(tmp_path / "python.db")) == 5  # node x2, grad x2 share rows
    (_, texts), stored = answers["compiled"]
    assert [t for _, t in stored] == texts
    assert [json.loads(t) for t in texts] == [{"seq": i, **json.loads(e[2])} for i, e in enumerate(events, 1)]
    assert all(t.isascii() for t in texts)
