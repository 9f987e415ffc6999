"""A run as a JSON-lines file: one schema-v1 event per line, in order, without the server's ``seq``.

That is exactly the body the ingest endpoint takes (``POST /api/runs/{id}/events``, ``application/x-ndjson``),
so importing a file into a server is posting it in batches (`import_jsonl`), or writing it straight into the
server's SQLite file (`import_jsonl_to_db`) while the server is stopped or running (WAL).

>>> import io
>>> buf = io.StringIO()
>>> write_jsonl([{"seq": 1, "v": 1, "kind": "step_end", "t": 0.0, "step": 0}], buf)
1
>>> buf.getvalue()
'{"v":1,"kind":"step_end","t":0.0,"step":0}\\n'
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from ..engine.errors import RtxvizError
from ..store import StoreError, open_store

#: What a run id may be: the server's URLs take exactly these (``/api/runs/{id}``).
RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_run_id(run_id: str) -> str:
    """`run_id` if the server's API can address it, else RtxvizError saying what an id may be.

    >>> check_run_id("import-1")
    'import-1'
    >>> check_run_id("../../etc")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rtxviz.engine.errors.RtxvizError: import: run id '../../etc' is not 1-64 letters, digits, '_' or '-' (...)
    """
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise RtxvizError(f"import: run id {run_id!r} is not 1-64 letters, digits, '_' or '-' (the API addresses "
                          "runs as /api/runs/{id})")
    return run_id

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode


def _clean(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if k != "seq"}


def _safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_safe(v) for v in obj]
    return obj


#: Lone surrogates: a database written before the server took strict JSON only may hold them (as \\ud800 escapes)
_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_event(ev: dict) -> str:
    """One line of JSON (no seq; NaN/Inf become null, as the schema wants; a lone surrogate becomes U+FFFD, so
    that the line is UTF-8 and the server takes it back)."""
    try:
        text = _encode(_clean(ev))
    except ValueError:
        text = _encode(_safe(_clean(ev)))
    return _SURROGATE.sub("\ufffd", text)


def write_jsonl(events: Iterable[dict], dest: str | IO[str]) -> int:
    """Write `events` to a path or text stream; returns the number of lines."""
    if isinstance(dest, str):
        with open(dest, "w", encoding="utf-8") as f:
            return write_jsonl(events, f)
    n = 0
    for ev in events:
        dest.write(encode_event(ev) + "\n")
        n += 1
    return n


def read_jsonl(path: str) -> Iterator[dict]:
    """The events of a JSON-lines file (blank lines skipped); a bad line raises naming its number.

    Each line is read as strict JSON (orjson: UTF-8, no NaN/Infinity, no lone surrogates), what the server
    accepts, so an import never stores what a reader cannot read back."""
    with open(path, "rb") as f:
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise RtxvizError(f"{path}:{i}: not a JSON event ({exc})") from None


def _run_name(events: list[dict], fallback: str) -> str:
    for ev in events:
        if ev.get("kind") == "run_start" and ev.get("name"):
            return str(ev["name"])
    return fallback


def new_run_id(prefix: str = "import") -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def dropped_count(events: Iterable[Any]) -> int:
    """How many events the run lost, as its events say: the largest `total` of its ``dropped`` notices and `dropped`
    of its ``run_end`` (the emitter's counters). The server keeps it as the run's ``dropped``, from the count each
    batch was posted with, which a JSON-lines file does not hold: an import reads it back from the events.

    >>> dropped_count([{"kind": "dropped", "total": 3}, {"kind": "node"}, {"kind": "run_end", "dropped": 5}])
    5
    >>> dropped_count([{"kind": "step_end"}])
    0
    """
    most = 0
    for ev in events:
        kind = ev.get("kind") if isinstance(ev, dict) else None
        count = ev.get("total") if kind == "dropped" else ev.get("dropped") if kind == "run_end" else None
        if type(count) is int and count > most:
            most = count
    return most


def with_step(ev: Any) -> Any:
    """`ev` with ``"step": null`` when it has no `step`: servers before the user review stored events without one
    (a tool's own posts), and the server now requires it; its absence meant null.

    >>> with_step({"v": 1, "kind": "my_tool.note", "t": 0.0})
    {'v': 1, 'kind': 'my_tool.note', 't': 0.0, 'step': None}
    """
    if isinstance(ev, dict) and "step" not in ev:
        ev["step"] = None
    return ev


def _validated(path: str) -> list[dict]:
    """The events of `path` (a missing `step` filled in: `with_step`), each checked against the schema before any is
    stored (an import stores all or none)."""
    from ..schema import validate_batch

    events = [with_step(ev) for ev in read_jsonl(path)]
    try:
        validate_batch(events)
    except ValueError as exc:
        raise RtxvizError(f"import: {path}: {exc}") from None
    return events


def _server_has_run(base: str, run_id: str, headers: dict[str, str], timeout: float) -> bool:
    req = urllib.request.Request(f"{base}/api/runs/{run_id}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # the user's own server
            resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise RtxvizError(f"import: the server answered {exc.code} to GET /api/runs/{run_id}: "
                          f"{answer_detail(exc.read())}") from None
    except urllib.error.URLError as exc:  # the first request: nobody listens there, or no such host
        raise RtxvizError(unreachable(base, exc)) from None
    return True


def unreachable(base: str, exc: urllib.error.URLError) -> str:
    """What to say when the server at `base` cannot be reached.

    >>> unreachable("http://127.0.0.1:8001", urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")))
    'import: cannot reach the server at http://127.0.0.1:8001 (Connection refused); is `rtxviz serve` running there?'
    """
    reason = exc.reason.strerror if isinstance(exc.reason, OSError) and exc.reason.strerror else exc.reason
    return f"import: cannot reach the server at {base} ({reason}); is `rtxviz serve` running there?"


def answer_detail(body: bytes) -> str:
    """What a server's error answer says: its ``detail`` sentence (every 4xx/5xx of rtxviz serve has one), else the
    body's first 300 characters.

    >>> answer_detail(b'{"detail": "event 0: step: Field required", "errors": []}'), answer_detail(b"<html>")
    ('event 0: step: Field required', '<html>')
    """
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return detail[:2000] if isinstance(detail, str) else body[:300].decode(errors="replace")


def import_jsonl(path: str, url: str, run_id: str | None = None, token: str | None = None,
                 batch: int = 5000, timeout: float = 30.0) -> str:
    """POST a JSON-lines run to a server's ingest endpoint in batches; returns the new run's id.

    As `import_jsonl_to_db`: the whole file is checked against the schema first, and a run id the server already
    has is refused (an import makes a new run; it never appends to one). Each batch is posted with the drop count
    its events have reported so far (`dropped_count`), as the emitter posts its own."""
    run_id = check_run_id(run_id) if run_id is not None else new_run_id()
    events = _validated(path)
    name = _run_name(events, run_id)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    headers = {"Content-Type": "application/x-ndjson", **auth}
    base = url.rstrip("/")
    if _server_has_run(base, run_id, auth, timeout):
        raise RtxvizError(f"import: {base} already has a run {run_id!r}; pick another --run-id")
    dropped = 0
    for start in range(0, max(len(events), 1), batch):
        part = events[start:start + batch]
        body = "\n".join(encode_event(e) for e in part).encode()
        dropped = max(dropped, dropped_count(part))
        q = urllib.parse.urlencode({"name": name, "dropped": dropped})
        req = urllib.request.Request(f"{base}/api/runs/{run_id}/events?{q}", data=body, headers=headers,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # the user's own server
                resp.read()
        except urllib.error.HTTPError as exc:
            last = min(start + batch, len(events)) - 1
            kept = f"; run {run_id} keeps events 0..{start - 1}" if start else ""
            raise RtxvizError(f"import: the server refused events {start}..{last} of {path}: {exc.code} "
                              f"{answer_detail(exc.read())}{kept}") from None
        except urllib.error.URLError as exc:  # the server went away part way
            kept = f"; run {run_id} keeps events 0..{start - 1}" if start else ""
            raise RtxvizError(unreachable(base, exc) + kept) from None
    return run_id


def import_jsonl_to_db(path: str, db: str, run_id: str | None = None) -> str:
    """Validate a JSON-lines run against the schema and append it to a server's SQLite file, with the drop count its
    events report (`dropped_count`); returns its id."""
    run_id = check_run_id(run_id) if run_id is not None else new_run_id()
    events = _validated(path)
    try:
        store = open_store(db)  # a server writing `db` holds it: StoreLocked says to use --url
    except StoreError as exc:
        raise RtxvizError(f"import: {exc}") from None
    try:
        if store.has_run(run_id):
            raise RtxvizError(f"import: {db} already has a run {run_id!r}; pick another --run-id")
        store.append(run_id, _run_name(events, run_id),
                     [(e["kind"], e.get("step"), encode_event(e)) for e in events], dropped=dropped_count(events))
    except StoreError as exc:  # full, or unwritable: nothing of the run was stored
        raise RtxvizError(f"import: {exc}") from None
    finally:
        store.close()
    return run_id
