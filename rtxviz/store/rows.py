"""What both SQL stores derive alike from a batch of events and from their rows (standard library only).

`stored_texts` puts each event's seq into its text; `batch_facts` reads what a batch changes about its run (name,
meta, status, last step); `user_row` and the two messages are the accounts' shared pieces. SQLiteStore and
PostgresStore differ in how they lock, number and write; what they store is computed here once.

>>> stored_texts([("leaf", None, '{"kind":"leaf"}'), ("node", 0, ' {"kind":"node","rule":"Σ dY"}')], 7)
['{"seq":7,"kind":"leaf"}', '{"seq":8,"kind":"node","rule":"\\\\u03a3 dY"}']
>>> f = batch_facts([("run_start", None, '{"kind":"run_start","name":"demo"}'), ("node", 3, "{}")], None, None)
>>> f.name, f.status, f.last_step, f.changed
('demo', 'running', 3, True)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from .base import EventRow, UserRecord

# the store imports the standard library only at import (pydantic stays out of the exports and the CLI's reads);
# the server hands in the compiled `schema.seq_texts` through `use_seq_texts`
_seq_texts: Callable[[list, int], list[str] | None] | None = None


def use_seq_texts(fn: Callable[[list, int], list[str] | None]) -> None:
    """Build `stored_texts` with `fn` where it can (``schema.seq_texts``: the same texts, about a quarter of the
    time of the comprehension below; None from it for a batch it does not take)."""
    global _seq_texts
    _seq_texts = fn


_NON_ASCII = re.compile("[^\x00-\x7f]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xD800 <= code <= 0xDFFF:
        raise ValueError(f"stored text: a lone surrogate (U+{code:04X}) is not text; it cannot be stored as UTF-8")
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def ascii_json(text: str) -> str:
    """JSON `text` with every character past ASCII written as its escape (a pair of them past U+FFFF): the same
    JSON (outside strings JSON text is ASCII; inside them an escape reads as its character), one byte a character.
    A lone surrogate (a str that is not text) raises ValueError, as binding it as UTF-8 did.

    >>> ascii_json('{"rule":"dW = dYᵀ @ X","emoji":"🙂"}')
    '{"rule":"dW = dY\\\\u1d40 @ X","emoji":"\\\\ud83d\\\\ude42"}'
    """
    return text if text.isascii() else _NON_ASCII.sub(_escape, text)


def stored_texts(events: Sequence[EventRow], first: int) -> list[str]:
    """Each event's JSON text with ``"seq":N`` put first, N counting from `first`, and every character past ASCII
    escaped (`ascii_json`): the text as stored and sent. A str of one byte a character is bound, joined and
    written without a conversion: wider characters (a backward rule's ᵀ or Σ) made SQLite's whole ingest ~7%
    dearer (benchmarks/README.md, fifteenth session)."""
    if _seq_texts is not None and type(events) is list:
        texts = _seq_texts(events, first)
        if texts is not None:
            return texts
    return [f'{{"seq":{seq},{ascii_json(text[1:] if text[:1] == "{" else text.lstrip()[1:])}'
            for seq, (_, _, text) in enumerate(events, first)]


class BatchFacts(NamedTuple):
    """What a batch says about its run: `name`/`meta` (from a ``run_start``, else the ones given), `status`
    ("running", "ok", "error", or None for no change), `last_step` (None when no event has a step), and `changed`
    (the run's record changed in a way the run list shows: started, ended, or reported drops)."""

    name: str | None
    meta: dict[str, Any] | None
    status: str | None
    last_step: int | None
    changed: bool


_LIFECYCLE = frozenset(("run_start", "run_end", "dropped"))


def batch_facts(events: Sequence[EventRow], name: str | None, meta: dict[str, Any] | None) -> BatchFacts:
    """The run facts of a batch (see `BatchFacts`); only ``run_start`` and ``run_end`` events are decoded."""
    last_step = next((step for _, step, _ in reversed(events) if step is not None), None)
    status = None
    changed = False
    if not _LIFECYCLE.isdisjoint(map(itemgetter(0), events)):  # rare: one of each per run (the test at C speed)
        for kind, _, text in events:
            if kind == "run_start":
                obj = json.loads(text)
                name, meta = obj.get("name") or name, obj.get("meta") or meta
                status, changed = "running", True
            elif kind == "run_end":
                status = "ok" if json.loads(text).get("status", "ok") == "ok" else "error"
                changed = True
            elif kind == "dropped":
                changed = True
    return BatchFacts(name, meta, status, last_step, changed)


def user_row(row: Sequence[Any]) -> UserRecord:
    """A `UserRecord` from a ``SELECT name, teacher, created FROM users`` row."""
    return {"name": row[0], "teacher": bool(row[1]), "created": float(row[2])}


def forbidden(run_id: str, owner: str) -> str:
    """StoreForbidden's message (it does not say whose run it is: that is not the asker's to know)."""
    return f"run {run_id} belongs to another user, not {owner}: choose another run id"


def user_exists(name: str, where: str, reason: str) -> str:
    """UserExists' message, by which unique column refused the user."""
    if "token" in reason:
        return f"that token is already another user's (in {where}); make a new token"
    return f"a user named {name} exists already in {where}; choose another name"
