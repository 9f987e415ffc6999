"""POST /api/runs/{run_id}/events: validate a batch of events, store it, hand it to the hub.

Two body formats:
- ``application/x-ndjson`` (what `watch` sends): one event per line; run name and drop count in the query
  (``?name=...&dropped=N``). Lines are stored as sent, never decoded and re-encoded (the store only puts the
  seq first and escapes characters past ASCII: `rtxviz.store.rows.stored_texts`).
- ``application/json``: ``{"events": [...], "name": ..., "dropped": N}``.

Answers 200 ``{"run_id", "first_seq", "count"}`` once committed; 413 for a body, line or batch over the bounds;
422 naming the first bad event (the whole batch is refused); 415 for another content type; 507 when the store
is full (a bound, or the disk: the same batch succeeds once there is room); 503 when the database cannot be written;
403 when the token is a student's and the run another user's (a new run is owned by the user who posts it first).

At most `Settings.ingest_concurrency` posts are parsed and stored at once, taken in the order they arrived.
A batch over `Settings.ingest_chunk_events` is stored in parts, each handed to the hub once committed (the viewers
work on one part while the next is stored; issue 15); a 507/503 part-way says in ``stored``/``first_seq`` what of
it was kept (docs/server.md, "Large batches").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from operator import itemgetter
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, HTTPException, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from ... import schema
from ...schema import MAX_NAME, EventError, validate_batch
from ...store import AppendsInChunks, EventRow, RunStore, StoreError, StoreForbidden
from ...store.history import FIELDS as HISTORY_FIELDS
from ...store.rows import use_seq_texts
from ...store.sqlite import use_seq_pack
from ..deps import HubDep, IngestSlotsDep, Principal, PrincipalDep, Settings, SettingsDep, StoreDep
from ..hub import Hub

use_seq_texts(schema.seq_texts)  # the stored texts built in C (None without the compiled module: Python's)
use_seq_pack(schema.seq_pack)  # and SQLite's rows with them, in one pass

router = APIRouter(tags=["ingest"])

#: SQLite keeps 64-bit signed integers.
_MAX_INT = 2**63 - 1

RunIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="run id chosen by the emitter")]


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"request body is {declared} bytes; the limit is {limit} (send smaller batches)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"request body exceeds {limit} bytes (send smaller batches)")
        chunks.append(chunk)
    return b"".join(chunks)


#: How deep an event may nest: Python's json module (exports, scripts) reads back about 990 levels at most, and no
#: event the engine sends nests deeper than 5.
MAX_DEPTH = 64

#: Every byte but the brackets and newline: `body.translate(None, _NOT_BRACKETS)` keeps each line's brackets only.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"{[\n")

#: The kinds after which the lobby hears of the run again.
_LIFECYCLE = frozenset(("run_start", "run_end", "dropped"))

_STRICT_JSON = ("UTF-8, no NaN or Infinity (send null), numbers within the float range, no lone surrogate "
                "escapes such as \\ud800")


def _strict_loads(data: bytes, what: str) -> Any:
    """Decode with orjson, which accepts strict JSON only (RFC 8259): what it accepts reads back in every parser."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise EventError(f"{what} is not valid JSON ({exc}); the server takes strict JSON: {_STRICT_JSON}") from None


def _check_depth(obj: Any, what: str) -> None:
    """Raise EventError when `obj` nests deeper than MAX_DEPTH (iterative: a deep value cannot exhaust the stack).

    >>> _check_depth({"a": [[1]]}, "event 0")
    >>> nested: list = []
    >>> for _ in range(MAX_DEPTH):
    ...     nested = [nested]
    >>> _check_depth(nested, "event 2")
    Traceback (most recent call last):
    ...
    rtxviz.schema.EventError: event 2 nests deeper than 64 levels
    """
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise EventError(f"{what} nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, dict | list))


def _kinds_and_steps(objs: list[Any]) -> list[tuple[str, int | None]]:
    """Validate; return (kind, step) per event."""
    validate_batch(objs)
    return [(o["kind"], o.get("step")) for o in objs]


def _parse_ndjson(body: bytes, s: Settings, fields: dict[str, tuple[str, ...]] = HISTORY_FIELDS,
                  ) -> tuple[list[EventRow], list[Any]]:
    """The rows to store and the events decoded (the store's history reads those: no event is decoded twice).

    One event per line, each line on its own strict JSON: an event split over two lines, or two events on one
    line, is refused, never joined into something else. Lines are stored as sent (stripped; the store puts the
    seq first and escapes characters past ASCII).

    The server's hot path: the compiled scan (`schema.scan_lines`, rtxviz/_eventcheck.c) reads and checks every
    line straight from its bytes and decodes only `fields`, those the store's history reads as it stores
    (`history_fields`: PostgreSQL's; SQLite's reads none, making its history later): decoding whole events into
    Python objects and walking them was ~60% of the ingest path's CPU. When it cannot confirm some line (a
    fault, or what it leaves to pydantic: a generic kind, a duplicate key, a long integer), the batch takes the
    decoding path below, a column at a time in comprehensions; anything out of the ordinary there (a bound
    exceeded, a line that does not parse, one that may nest too deep) goes to `_parse_ndjson_carefully`, which
    finds and names the first fault.
    """
    scanned = schema.scan_lines(body, fields, orjson.loads, s.max_events_per_batch, s.max_event_bytes)
    if scanned is not None:
        return scanned
    lines = [raw.strip() for raw in body.split(b"\n")]
    if b"" in lines:
        lines = [line for line in lines if line]
    if len(lines) > s.max_events_per_batch or max(map(len, lines), default=0) > s.max_event_bytes:
        return _parse_ndjson_carefully(body, s)
    # cheap bound: a line with at most MAX_DEPTH brackets cannot nest deeper; the few others are walked there.
    # Counted over the whole body in one pass (translate keeps brackets and newlines: 13,000 lines 11 -> 5 ms);
    # only a body with some line over the bound counts line by line.
    if max(map(len, body.translate(None, _NOT_BRACKETS).split(b"\n"))) > MAX_DEPTH and any(
            line.count(b"{") + line.count(b"[") > MAX_DEPTH for line in lines):
        return _parse_ndjson_carefully(body, s)
    try:
        objs = [orjson.loads(line) for line in lines]
    except orjson.JSONDecodeError:
        return _parse_ndjson_carefully(body, s)
    validate_batch(objs)  # EventError names the event by its index, as the careful path does
    # orjson has checked the bytes are UTF-8, so decoding cannot fail
    return [(o["kind"], o.get("step"), line.decode()) for o, line in zip(objs, lines, strict=True)], objs


def _parse_ndjson_carefully(body: bytes, s: Settings) -> tuple[list[EventRow], list[Any]]:
    """`_parse_ndjson` line by line: the first line over a bound or not strict JSON is named with its number."""
    texts: list[bytes] = []
    objs: list[Any] = []
    for number, raw in enumerate(body.split(b"\n"), 1):
        line = raw.strip()
        if not line:
            continue
        i = len(texts)
        if len(line) > s.max_event_bytes:
            raise HTTPException(413, f"event {i} (line {number}) is {len(line)} bytes; the limit is "
                                f"{s.max_event_bytes}")
        if i >= s.max_events_per_batch:
            raise HTTPException(413, f"more than {s.max_events_per_batch} events in one batch")
        obj = _strict_loads(line, f"event {i} (line {number})")
        if line.count(b"{") + line.count(b"[") > MAX_DEPTH:  # cheap bound: only bracket-heavy lines are walked
            _check_depth(obj, f"event {i} (line {number})")
        objs.append(obj)
        texts.append(line)
    return [(k, st, t.decode()) for (k, st), t in zip(_kinds_and_steps(objs), texts, strict=True)], objs


def _parse_json(body: bytes, s: Settings) -> tuple[list[EventRow], list[Any], dict[str, Any]]:
    doc = _strict_loads(body, "the body")
    if isinstance(doc, list):
        doc = {"events": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise EventError('body must be {"events": [...], "name": ..., "dropped": N} or a list of events')
    unknown = sorted(set(doc) - {"events", "name", "dropped"})
    if unknown:
        raise EventError(f"body: unknown field(s) {unknown}; the fields are events, name and dropped")
    name = doc.get("name")
    if name is not None and (type(name) is not str or len(name) > MAX_NAME):
        raise EventError(f"body: name must be a string of at most {MAX_NAME} characters or null, got "
                         f"{type(name).__name__} {str(name)[:40]!r}")
    dropped = doc.get("dropped", 0)
    if type(dropped) is not int or not 0 <= dropped <= _MAX_INT:
        raise EventError(f"body: dropped must be an integer from 0 to 2**63-1, got {dropped!r:.40}")
    events = doc["events"]
    if len(events) > s.max_events_per_batch:
        raise HTTPException(413, f"{len(events)} events in one batch; the limit is {s.max_events_per_batch}")
    for i, obj in enumerate(events):
        _check_depth(obj, f"event {i}")
    out = []
    for i, ((kind, step), obj) in enumerate(zip(_kinds_and_steps(events), events, strict=True)):
        text = orjson.dumps(obj).decode()
        if len(text) > s.max_event_bytes:
            raise HTTPException(413, f"event {i} is {len(text)} bytes; the limit is {s.max_event_bytes}")
        out.append((kind, step, text))
    return out, events, {"name": name, "dropped": dropped}


#: What `_ingest` calls after each commit: ``(first_seq, stored texts, the seq the whole batch ends at)``.
Committed = Callable[[int, list[str], int], None]


def _append_as(who: Principal, store: RunStore, run_id: str, name: str | None, events: list[EventRow],
               dropped: int, decoded: list[Any], chunk: int, committed: Committed) -> tuple[int, list[str]]:
    """Append as `who`: a new run is owned by the user (None for the admin); a student's append to another's run
    raises StoreForbidden (403, checked by the store in its transaction); a teacher may add to any run.

    A batch over `chunk` events goes in parts of `chunk` when the store can (`AppendsInChunks`), each handed to
    `committed` once it is committed, so the viewers' work on one part overlaps the store's on the next (issue 15);
    otherwise in one transaction, handed over once committed."""
    if len(events) > chunk and isinstance(store, AppendsInChunks):
        return store.append_chunks(run_id, name, events, chunk, committed, dropped=dropped, owner=who.name,
                                   decoded=decoded, any_run=who.teacher)
    first, texts = store.append(run_id, name, events, dropped=dropped, owner=who.name, decoded=decoded,
                                any_run=who.teacher)
    committed(first, texts, first + len(texts) - 1)
    return first, texts


def _ingest(store: RunStore, s: Settings, run_id: str, name: str | None, dropped: int, body: bytes,
            ctype: str, who: Principal, committed: Committed = lambda first, texts, last: None,
            ) -> tuple[int, list[str], bool]:
    """Parse, validate and store a batch (every event is validated before any is stored: a 422 stores nothing);
    `committed` gets what is stored as it is committed. Returns (first seq, the stored texts, whether the lobby
    should hear of the run)."""
    try:
        if ctype == "application/x-ndjson":
            # the fields the store's history reads as it stores (none for SQLite's: it reads them later)
            events, decoded = _parse_ndjson(body, s, store.history_fields)
        elif ctype == "application/json":
            events, decoded, extra = _parse_json(body, s)
            name = extra["name"] if extra["name"] is not None else name
            dropped = max(dropped, extra["dropped"])
        else:
            raise HTTPException(415, f"content type {ctype!r} not accepted; use application/x-ndjson or "
                                "application/json")
    except EventError as exc:
        raise HTTPException(422, str(exc)) from None
    new_run = not store.has_run(run_id)
    if not events and not new_run:
        if not who.reads_all:  # an empty batch stores nothing, but must not tell a student of another's run
            run = store.get_run(run_id)
            if run is not None and not who.may_read(run):
                raise StoreForbidden(f"run {run_id!r} belongs to another user")
        return store.last_seq(run_id) + 1, [], False
    # StoreFull: 507, StoreUnavailable: 503 (either part-way through a batch stored in parts: `stored` says how
    # much of it is kept), StoreForbidden (another student's run): 403
    first, texts = _append_as(who, store, run_id, name, events, dropped, decoded, s.ingest_chunk_events, committed)
    lifecycle = new_run or not _LIFECYCLE.isdisjoint(map(itemgetter(0), events))
    return first, texts, lifecycle


@router.post("/runs/{run_id}/events")
async def ingest(request: Request, run_id: RunIdPath, s: SettingsDep, store: StoreDep, hub: HubDep,
                 slots: IngestSlotsDep, who: PrincipalDep, name: Annotated[str | None, Query(max_length=256)] = None,
                 dropped: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0) -> dict[str, Any]:
    """Append a batch of events to run `run_id` (created on first use)."""
    body = await _read_body(request, s.max_body_bytes)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    loop = asyncio.get_running_loop()

    def committed(first: int, texts: list[str], last: int) -> None:
        # from the worker thread, right after the commit: the hub lives on the loop (FIFO, so in commit order)
        try:
            loop.call_soon_threadsafe(hub.publish, run_id, first, texts, last)
        except RuntimeError:  # the loop has closed (the server is stopping): no viewer is left to tell
            pass

    try:
        async with slots:  # Settings.ingest_concurrency posts at a time, in the order they arrived
            first, texts, lifecycle = await run_in_threadpool(_ingest, store, s, run_id, name, dropped, body,
                                                              ctype, who, committed)
    except StoreError as exc:
        if exc.stored:  # a failure part-way: what is stored may have created or started the run
            await _announce(store, hub, run_id)
        raise
    if lifecycle:
        await _announce(store, hub, run_id)
    answer: dict[str, Any] = {"run_id": run_id, "first_seq": first, "count": len(texts)}
    viewers = hub.viewers(run_id)
    if viewers is not None:  # unknown (other processes' pages): unsaid, and the sender keeps its fast cadence
        answer["viewers"] = viewers
    return answer


async def _announce(store: RunStore, hub: Hub, run_id: str) -> None:
    run = await run_in_threadpool(store.get_run, run_id)
    if run is not None:
        hub.publish_run(run)
