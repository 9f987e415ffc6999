"""POST /api/runs/{run_id}/events: validate a batch of events, store it, hand it to the hub.

Two body formats:
- ``application/x-ndjson`` (what `watch` sends): one event per line; run name and drop count in the query
  (``?name=...&dropped=N``). Lines are stored as sent, so nothing is re-encoded.
- ``application/json``: ``{"events": [...], "name": ..., "dropped": N}``.

Answers 200 ``{"run_id", "first_seq", "count"}`` once committed; 413 for a body, line or batch over the bounds;
422 naming the first bad event (the whole batch is refused); 415 for another content type; 507 when the store
is full.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from ...schema import EventError, validate_batch, validate_json_batch
from ...store import RunStore, StoreFull
from ..deps import HubDep, Settings, SettingsDep, StoreDep

router = APIRouter(tags=["ingest"])

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


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (send null for NaN/Inf)")


_loads = json.JSONDecoder(parse_constant=_no_constants).decode


def _check(objs: list[Any]) -> list[tuple[str, int | None]]:
    """Validate; return (kind, step) per event."""
    validate_batch(objs)
    return [(o["kind"], o.get("step")) for o in objs]


def _parse_ndjson(body: bytes, s: Settings) -> list[tuple[str, int | None, str]]:
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        raise EventError(f"body is not UTF-8 ({exc})") from None
    texts: list[str] = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if len(line) > s.max_event_bytes:
            raise HTTPException(413, f"event {len(texts)} is {len(line)} bytes; the limit is {s.max_event_bytes}")
        if len(texts) >= s.max_events_per_batch:
            raise HTTPException(413, f"more than {s.max_events_per_batch} events in one batch")
        texts.append(line)
    joined = f"[{','.join(texts)}]"
    # the common case (only core kinds, all valid): pydantic-core parses and validates the batch in one pass
    objs = validate_json_batch(joined)
    if objs is not None and len(objs) == len(texts):
        return [(o["kind"], o.get("step"), t) for o, t in zip(objs, texts, strict=True)]
    try:  # one decoder call for the whole batch is several times faster than one per line
        objs = _loads(joined)
    except ValueError:
        objs = None
    if objs is None or len(objs) != len(texts):
        for i, line in enumerate(texts):  # find the culprit line
            try:
                _loads(line)
            except ValueError as exc:
                raise EventError(f"event {i}: not valid JSON ({exc})") from None
        raise EventError("body is not one JSON object per line")
    return [(k, st, t) for (k, st), t in zip(_check(objs), texts, strict=True)]


def _parse_json(body: bytes, s: Settings) -> tuple[list[tuple[str, int | None, str]], dict]:
    try:
        doc = _loads(body.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise EventError(f"body is not valid JSON ({exc})") from None
    if isinstance(doc, list):
        doc = {"events": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise EventError('body must be {"events": [...], "name": ..., "dropped": N} or a list of events')
    events = doc["events"]
    if len(events) > s.max_events_per_batch:
        raise HTTPException(413, f"{len(events)} events in one batch; the limit is {s.max_events_per_batch}")
    out = []
    for i, ((kind, step), obj) in enumerate(zip(_check(events), events, strict=True)):
        text = json.dumps(obj, separators=(",", ":"))
        if len(text) > s.max_event_bytes:
            raise HTTPException(413, f"event {i} is {len(text)} bytes; the limit is {s.max_event_bytes}")
        out.append((kind, step, text))
    extra = {k: doc[k] for k in ("name", "dropped") if k in doc}
    return out, extra


def _ingest(store: RunStore, s: Settings, run_id: str, name: str | None, dropped: int, body: bytes,
            ctype: str) -> tuple[int, list[str], bool]:
    try:
        if ctype == "application/x-ndjson":
            events = _parse_ndjson(body, s)
        elif ctype == "application/json":
            events, extra = _parse_json(body, s)
            name = extra.get("name", name) if isinstance(extra.get("name", name), str | None) else name
            d = extra.get("dropped", dropped)
            dropped = d if isinstance(d, int) and 0 <= d < 2**63 else dropped
        else:
            raise HTTPException(415, f"content type {ctype!r} not accepted; use application/x-ndjson or "
                                "application/json")
    except EventError as exc:
        raise HTTPException(422, str(exc)) from None
    new_run = not store.has_run(run_id)
    if not events and not new_run:
        return store.last_seq(run_id) + 1, [], False
    try:
        first, texts = store.append(run_id, name, events, dropped=dropped)
    except StoreFull as exc:
        raise HTTPException(507, str(exc)) from None
    lifecycle = new_run or any(k in ("run_start", "run_end", "dropped") for k, _, _ in events)
    return first, texts, lifecycle


@router.post("/runs/{run_id}/events")
async def ingest(request: Request, run_id: RunIdPath, s: SettingsDep, store: StoreDep, hub: HubDep,
                 name: Annotated[str | None, Query(max_length=256)] = None,
                 dropped: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0) -> dict[str, Any]:
    """Append a batch of events to run `run_id` (created on first use)."""
    body = await _read_body(request, s.max_body_bytes)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    first, texts, lifecycle = await run_in_threadpool(_ingest, store, s, run_id, name, dropped, body, ctype)
    if texts:
        hub.publish(run_id, first, texts)
    if lifecycle:
        run = await run_in_threadpool(store.get_run, run_id)
        if run is not None:
            hub.publish_run(run)
    return {"run_id": run_id, "first_seq": first, "count": len(texts)}
