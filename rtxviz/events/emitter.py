"""The emitter: `watch()` attaches the engine to an rtxviz server without ever blocking training.

The engine thread encodes each event (orjson, ~0.6 µs) and appends the bytes to a bounded deque (when it is full
the event is dropped and counted). A daemon sender thread wakes every `flush_interval` seconds (or when a batch
is ready) and POSTs up to `batch_size` events as NDJSON to ``/api/runs/{run_id}/events`` over one keep-alive
connection. While the server answers that no page watches the run (``"viewers": 0``), the sender waits
`idle_flush_interval` (1 s) instead: on a machine that trains, each post costs the server about a millisecond of
CPU however small it is, and ten a second of them were a good part of what streaming took from training. The
first answer after a page opens the run brings the cadence back (within that second).
A failed send (server down, slow, or rejecting) loses that batch, counts it as dropped and backs off; the drop
count travels to the server in the next batch that gets through (a `dropped` event and the `dropped` query
parameter). A batch is never sent twice: when the server stored part of it before failing (a large batch is
stored in parts; its 507/503 answer says ``"stored": N``), those N count as sent and only the rest as dropped.
On exit the sender gets `close_timeout` seconds to flush, then is abandoned.

>>> import rtxviz.events as ev
>>> with ev.watch("http://127.0.0.1:9", run_name="demo", close_timeout=0.2) as run:   # nothing listens on 9
...     for i in range(3):
...         with run.step(i):
...             pass
>>> run.stats()["sent"], run.stats()["dropped"] > 0
(0, True)
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse
from collections import deque
from typing import Any, Protocol

from ..engine import hooks as _hooks
from .fields import jsonable
from .hook import EventHook

_orjson: Any
try:  # optional: a much faster JSON encoder; the stdlib's is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

log = logging.getLogger("rtxviz.events")

#: The run that `step()`, `optimizer_step()` and `report_*()` report to (the innermost `watch`).
_CURRENT: list[Run] = []


class Transport(Protocol):
    """Where batches go. `send` raises on any failure (the batch is then counted as dropped); it may return the
    number of pages watching the run, as the server said (None: unknown, so the sender keeps its fast cadence)."""

    def send(self, run: Run, lines: list[bytes], dropped: int) -> int | None: ...

    def close(self) -> None: ...


class PartlyStored(RuntimeError):
    """The server refused a batch after storing its first `stored` events (docs/server.md, "Large batches"): those
    are kept and shown, so they count as sent and are never sent again; the rest count as dropped."""

    def __init__(self, message: str, stored: int) -> None:
        super().__init__(message)
        self.stored = stored


def stored_before_failure(answer: bytes) -> int:
    """How many of a refused batch's events the server kept: its answer's ``stored`` (0 when it has none).

    >>> stored_before_failure(b'{"detail": "disk full", "stored": 2000, "first_seq": 4001}')
    2000
    >>> stored_before_failure(b'{"detail": "bad"}'), stored_before_failure(b'<html>')
    (0, 0)
    """
    try:
        stored = json.loads(answer).get("stored", 0)
    except (ValueError, AttributeError):
        return 0
    return stored if type(stored) is int and stored > 0 else 0


def answer_detail(answer: bytes) -> str:
    """What a refusal says: the ``detail`` sentence every error answer of rtxviz serve has (a 422's structured
    ``errors`` list beside it only repeats it), else the answer's first 300 characters.

    >>> answer_detail(b'{"detail": "event 1 (kind node): step: Field required", "errors": []}')
    'event 1 (kind node): step: Field required'
    >>> answer_detail(b'<html>')
    '<html>'
    """
    try:
        detail = json.loads(answer).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return detail[:300] if isinstance(detail, str) else answer[:300].decode(errors="replace")


def viewers_of(answer: bytes) -> int | None:
    """How many pages watch the run, from the server's answer to a post (None when it does not say: a server
    whose viewers may be in other processes, or an older one).

    >>> viewers_of(b'{"run_id": "r", "first_seq": 1, "count": 3, "viewers": 0}'), viewers_of(b'{"count": 3}')
    (0, None)
    """
    try:
        viewers = json.loads(answer).get("viewers")
    except (ValueError, AttributeError):
        return None
    return viewers if type(viewers) is int and viewers >= 0 else None


class HttpTransport:
    """POSTs NDJSON batches with the stdlib's http.client over one keep-alive connection.

    timeout: for connecting and sending. answer_timeout: how long a post that reached the server waits for its
    answer (never less than `timeout`). The server stores a batch before it answers, so a post given up on while
    the server works on it is stored yet counted dropped: a server on the training machine, starved of CPU by the
    loop beside it, answers late, not never (issue 21). Only a server silent for `answer_timeout` is given up on.
    """

    def __init__(self, url: str, token: str | None = None, timeout: float = 2.0,
                 answer_timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"watch: unsupported URL scheme {parts.scheme!r} in {url!r}; use http:// or https://")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname or "127.0.0.1", parts.port
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        self.answer_timeout = max(float(answer_timeout), float(timeout))
        self.headers = {"Content-Type": "application/x-ndjson"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self.host, self.port, timeout=self.timeout)
        return self._conn

    def send(self, run: Run, lines: list[bytes], dropped: int) -> int | None:
        query = urllib.parse.urlencode({"name": run.name, "dropped": dropped})
        path = f"{self.base}/api/runs/{run.id}/events?{query}"
        body = b"\n".join(lines)
        reused = self._conn is not None
        conn = self._connection()
        try:
            conn.request("POST", path, body=body, headers=self.headers)
            resp = self._answer(conn)
            detail = resp.read()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.close()
            if not reused:
                raise
            # a keep-alive connection the server closed while idle (uvicorn: after 5 s; a loop whose unsampled
            # steps send nothing for longer meets it): the request never reached it, so send once more afresh
            conn = self._connection()
            try:
                conn.request("POST", path, body=body, headers=self.headers)
                resp = self._answer(conn)
                detail = resp.read()
            except Exception:
                self.close()
                raise
        except Exception:
            self.close()
            raise
        if resp.status != 200:
            message = f"server answered {resp.status}: {answer_detail(detail)}"
            stored = stored_before_failure(detail) if resp.status in (503, 507) else 0
            raise PartlyStored(message, stored) if stored else RuntimeError(message)
        return viewers_of(detail)

    def _answer(self, conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
        """The response to the request just sent, waited for up to `answer_timeout`."""
        if conn.sock is not None:
            conn.sock.settimeout(self.answer_timeout)
        try:
            return conn.getresponse()
        finally:
            if conn.sock is not None:
                conn.sock.settimeout(self.timeout)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class MemoryTransport:
    """A Transport that keeps every event it is sent, decoded, in `events`: a run recorded in memory (the lessons'
    offline export, tests). Nothing assigns `seq`, which a server adds as it stores.

    >>> keep = MemoryTransport()
    >>> with watch(transport=keep, run_name="kept", close_timeout=1.0) as run:
    ...     pass
    >>> [e["kind"] for e in keep.events]
    ['run_start', 'run_end']
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def send(self, run: Run, lines: list[bytes], dropped: int) -> int | None:
        self.events.extend(json.loads(line) for line in lines)
        return None

    def close(self) -> None:
        pass


class _Step:
    """The marker `run.step(i)` returns: begins step i now; `with` also ends it on exit."""

    __slots__ = ("run", "index")

    def __init__(self, run: Run | None, index: int) -> None:
        self.run, self.index = run, index

    def __enter__(self) -> _Step:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.run is not None:
            self.run._end_step(self.index)


_NULL_STEP = _Step(None, -1)

# ensure_ascii=False: a lone surrogate stays a character (then replaced, below) instead of becoming a \\udcff
# escape, which the server refuses as not strict JSON
_std_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False,
                               ensure_ascii=False).encode
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so that it encodes as UTF-8.

    Python decodes an undecodable file name (``sys.argv[0]``, a path) into lone surrogates (PEP 383); sent as
    they are, they make the batch invalid UTF-8, which the server refuses, and the run would be lost.

    >>> valid_text("train\\udcff.py"), valid_text("plain")
    ('train\\ufffd.py', 'plain')
    """
    return _SURROGATE.sub("\ufffd", text)


def _default(obj: Any) -> Any:
    """orjson's hook for what it cannot encode itself (numpy scalars, arrays, odd objects): the bounded form."""
    out = jsonable(obj, max_len=2000)
    if out is obj:  # jsonable gave it back unchanged: orjson would ask again
        raise TypeError(f"cannot encode {type(obj).__name__}")
    return out


def _encode_std(ev: dict) -> bytes:
    try:
        text = _std_encode(ev)
    except (ValueError, TypeError):  # NaN or an odd object slipped through: make it JSON-safe
        text = _std_encode(jsonable(ev, max_len=2000))
    try:
        return text.encode()
    except UnicodeEncodeError:  # lone surrogates (an undecodable file name): replaced, never the event lost
        return valid_text(text).encode()


if _orjson is not None:
    _dumps = _orjson.dumps

    def encode_event(ev: dict) -> bytes:
        """One event as compact JSON bytes (NaN/Inf become null, as the schema wants).

        orjson when installed (about 15x faster than the stdlib on these small dicts, and it runs on the
        training thread), else the stdlib encoder.

        >>> encode_event({"v": 1, "kind": "x", "t": float("nan")})
        b'{"v":1,"kind":"x","t":null}'
        >>> encode_event({"v": 1, "kind": "x", "t": 0.0, "file": "a\\udcff"})  # U+FFFD for the lone surrogate
        b'{"v":1,"kind":"x","t":0.0,"file":"a\\xef\\xbf\\xbd"}'
        """
        try:
            return _dumps(ev, default=_default)
        except TypeError:  # non-string keys, integers beyond 64 bits, lone surrogates...
            return _encode_std(ev)
else:  # pragma: no cover - the stdlib fallback
    encode_event = _encode_std


class Run:
    """One watched run: the hook, the bounded queue, the sender thread. Made by `watch()`."""

    def __init__(self, transport: Transport, run_name: str | None = None, sample_every: int = 1,
                 max_queue: int = 100_000, values_max_numel: int = 16, batch_size: int = 2000,
                 flush_interval: float = 0.1, close_timeout: float = 2.0, meta: dict | None = None,
                 run_id: str | None = None, idle_flush_interval: float = 1.0) -> None:
        if sample_every < 1:
            raise ValueError(f"watch: sample_every must be >= 1, got {sample_every}")
        if max_queue < 1 or batch_size < 1:
            raise ValueError(f"watch: max_queue and batch_size must be >= 1, got {max_queue}, {batch_size}")
        self.transport = transport
        self.id = run_id or time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
        # valid_text: a script name that is not valid UTF-8 would make every batch's URL unencodable
        self.name = valid_text(run_name or os.path.basename(sys.argv[0] or "") or "run")[:200]
        self.sample_every = int(sample_every)
        self.meta = meta or {}
        self.batch_size, self.flush_interval, self.close_timeout = batch_size, flush_interval, close_timeout
        #: the wait between posts while the server says no page watches the run (module docstring)
        self.idle_flush_interval = max(float(idle_flush_interval), float(flush_interval))
        self._watched = True  # until an answer says otherwise
        self._q: deque = deque()
        self._ready: list = []           # encoded events waiting to fill a batch (sender thread only)
        self._last_send = 0.0
        self._max = int(max_queue)
        self._queue_dropped = 0          # written by the producer thread only
        self._send_dropped = 0           # written by the sender thread only
        self._reported = 0
        self._sent = 0
        #: events the sender has taken from the queue (to send, or sent, or lost), changed under `_taking` with the
        #: queue's pops, so that close() counts every event of the run at one instant, without a counter in `_put`
        self._taken = 0
        self._taking = threading.Lock()
        self._failed_batches = 0
        self._last_error: str | None = None
        self._wake = threading.Event()
        self._closing = False
        self._backoff = 0.0
        self._retry_at = 0.0
        self._thread: threading.Thread | None = None
        self._open_step: int | None = None
        self.hook = EventHook(self._put, values_max_numel=values_max_numel)
        self.started = self.closed = False

    # -- the producer side (training thread) ------------------------------------------------------------------
    def _put(self, event: dict) -> None:
        """Encode `event` now and queue the bytes (the hook's sink).

        Encoding here, on the training thread, costs ~0.6 µs an event. Encoding on the sender thread instead
        measured several times that in training time: the two threads then trade the GIL dozens of times per
        batch, and each time the training thread comes back from numpy it waits for the sender's turn."""
        q = self._q
        if len(q) >= self._max:
            self._queue_dropped += 1
            return
        q.append(encode_event(event))
        if len(q) == self.batch_size:
            self._wake.set()

    def emit(self, kind: str, **fields: Any) -> None:
        """Send a custom event (any kind matching the schema's KIND_PATTERN) with JSON-safe fields."""
        self.hook.event(kind, **fields)

    def step(self, index: int) -> _Step:
        """Mark the start of training step `index` (ends the previous one); `with run.step(i):` also ends it.

        Steps whose index is not a multiple of `sample_every` are not recorded: the hook is detached for them,
        so the engine runs at full speed.
        """
        index = int(index)
        if self._open_step is not None:
            self._end_step(self._open_step)
        sampled = index % self.sample_every == 0
        self.hook.new_step(index)
        if sampled:
            self._attach()
        else:
            self._detach()
        self._open_step = index
        self._put({"v": 1, "kind": "step_begin", "t": time.time(), "step": index, "sampled": sampled})
        return _Step(self, index)

    def _end_step(self, index: int) -> None:
        if self._open_step != index:
            return
        self._open_step = None
        self._put({"v": 1, "kind": "step_end", "t": time.time(), "step": index})
        self.hook.new_step(None)
        if not self.closed:
            self._attach()  # between steps everything is recorded again

    @property
    def recording(self) -> bool:
        """Whether the hook is attached now (false inside an unsampled step)."""
        return self.hook in _hooks.ACTIVE

    # -- what records: the engine hook here; rtxviz.torch's run records a PyTorch model instead --------------
    def _attach(self) -> None:
        _hooks.add_hook(self.hook)

    def _detach(self) -> None:
        _hooks.remove_hook(self.hook)

    @property
    def dropped(self) -> int:
        return self._queue_dropped + self._send_dropped

    def stats(self) -> dict[str, Any]:
        """Counters: events sent (acknowledged by the server), dropped, queued; failed batches; last error."""
        return {"sent": self._sent, "dropped": self.dropped, "queue_dropped": self._queue_dropped,
                "send_dropped": self._send_dropped, "queued": len(self._q) + len(self._ready),
                "failed_batches": self._failed_batches, "last_error": self._last_error}

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> Run:
        if self.started:
            return self
        self.started = True
        from .._version import __version__

        self._put({"v": 1, "kind": "run_start", "t": time.time(), "step": None, "name": self.name,
                   "meta": jsonable(self.meta), "sample_every": self.sample_every, "version": __version__})
        self._thread = threading.Thread(target=self._sender, name=f"rtxviz-sender-{self.id}", daemon=True)
        self._thread.start()
        self._attach()
        _CURRENT.append(self)
        return self

    def close(self, error: BaseException | None = None) -> None:
        """Detach, send what is queued (within `close_timeout` seconds), stop the sender."""
        if self.closed or not self.started:
            return
        if self._open_step is not None:
            self._end_step(self._open_step)
        self.closed = True
        self._detach()
        if self in _CURRENT:
            _CURRENT.remove(self)
        dropped, sent = self._end_counts()
        end = {"v": 1, "kind": "run_end", "t": time.time(), "step": None, "status": "error" if error else "ok",
               "error": None if error is None else f"{type(error).__name__}: {error}"[:1000],
               "dropped": dropped, "sent": sent}
        self._q.append(encode_event(end))  # past the bound on purpose: the end of a run is worth one slot
        self._closing = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(self.close_timeout)
        if self.dropped:
            log.warning("rtxviz.watch: run %s dropped %d event(s) (%s)", self.id, self.dropped,
                        self._last_error or "queue full")

    def _end_counts(self) -> tuple[int, int]:
        """run_end's (dropped, sent): the events lost so far, and the run's own events delivered or still to be
        delivered by the final flush (acknowledged, in flight, or queued), run_end included, so that sent + dropped
        is every event the run made. The server then stores `sent` events besides the emitter's `dropped` notices,
        unless the final flush fails (what it loses cannot be reported). Read before the flush, not after it:
        acknowledged events alone (the old `sent`) left out everything the flush delivers."""
        with self._taking:
            made = self._taken + len(self._q)
        lost = self._send_dropped  # the sender's; a batch that fails from here on is lost after run_end was built
        return self._queue_dropped + lost, made - lost + 1

    def __enter__(self) -> Run:
        return self.start()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.close(exc)

    # -- the sender thread -----------------------------------------------------------------------------------
    def _sender(self) -> None:
        deadline: float | None = None
        while True:
            self._wake.wait(self._interval())
            self._wake.clear()
            if self._closing and deadline is None:
                deadline = time.monotonic() + self.close_timeout
            self._drain(deadline)
            if self._closing and (not self._q or (deadline is not None and time.monotonic() >= deadline)):
                break
        # whatever could not be sent in time is lost: count it
        self._send_dropped += len(self._q) + len(self._ready)
        self._q.clear()
        self._ready.clear()
        self.transport.close()

    def _drain(self, deadline: float | None) -> None:
        q, ready = self._q, self._ready
        while q or ready:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            if now < self._retry_at:
                if deadline is not None:  # closing, and no time left to retry: what is queued is lost
                    self._send_dropped += len(q) + len(ready)
                    q.clear()
                    ready.clear()
                return
            n = min(self.batch_size - len(ready), len(q))
            if n > 0:
                pop = q.popleft
                with self._taking:  # close() counts the queue and what was taken from it at one instant
                    taken = [pop() for _ in range(n)]
                    self._taken += n
                ready.extend(taken)
            if len(ready) < self.batch_size and not q and not self._closing \
                    and now - self._last_send < self._interval():
                return  # a small batch: wait for more, up to the interval after the last send
            batch = ready[:self.batch_size]
            del ready[:self.batch_size]
            dropped = self.dropped
            if dropped != self._reported:
                batch.append(encode_event({
                    "v": 1, "kind": "dropped", "t": time.time(), "step": None, "total": dropped,
                    "new": dropped - self._reported, "reason": "queue_full_or_send_failed"}))
            self._last_send = now
            try:
                viewers = self.transport.send(self, batch, dropped)
            except Exception as exc:  # anything: the training loop must never see it
                self._failed_batches += 1
                self._last_error = f"{type(exc).__name__}: {exc}"[:300]
                # what the server kept of the batch before failing is sent, not dropped (and not sent again); the
                # `dropped` event, last in the batch, was not among it: the next batch reports the count again
                stored = min(exc.stored, len(batch) - 1) if isinstance(exc, PartlyStored) else 0
                self._sent += stored
                self._send_dropped += len(batch) - stored - (dropped != self._reported)
                self._backoff = min(5.0, max(0.25, self._backoff * 2))
                self._retry_at = time.monotonic() + self._backoff
                return
            self._backoff = 0.0
            self._reported = dropped
            self._sent += len(batch)
            self._watched = viewers != 0  # None (not said): as if watched

    def _interval(self) -> float:
        """The wait between posts: flush_interval while a page may watch the run, else idle_flush_interval."""
        return self.flush_interval if self._watched else self.idle_flush_interval

def watch(url: str | None = None, run_name: str | None = None, sample_every: int = 1, max_queue: int = 100_000,
          values_max_numel: int = 16, token: str | None = None, meta: dict | None = None,
          transport: Transport | None = None, **options: Any) -> Run:
    """Stream this process's engine events to an rtxviz server (a context manager returning the Run).

    url: the server, e.g. ``http://127.0.0.1:8000``; default: the RTXVIZ_SERVER environment variable.
    token: sent as a bearer token; default: RTXVIZ_TOKEN. sample_every: record every k-th `step()`.
    max_queue: events held in memory at most (beyond that they are dropped and counted).
    values_max_numel: tensors with at most this many elements carry their values.
    timeout, answer_timeout: the HTTP transport's (`HttpTransport`: 2 s to connect and send, 30 s for an answer).
    Other options go to `Run` (batch_size, flush_interval, idle_flush_interval, close_timeout, run_id).

    >>> with watch("http://127.0.0.1:9", run_name="mlp", close_timeout=0.1) as run:
    ...     run.name
    'mlp'
    """
    if transport is None:
        url = url or os.environ.get("RTXVIZ_SERVER")
        if not url:
            raise ValueError("watch: no server URL; pass url='http://127.0.0.1:8000' or set RTXVIZ_SERVER "
                             "(start a server with `rtxviz serve`)")
        transport = HttpTransport(url, token or os.environ.get("RTXVIZ_TOKEN"),
                                  timeout=float(options.pop("timeout", 2.0)),
                                  answer_timeout=float(options.pop("answer_timeout", 30.0)))
    return Run(transport, run_name=run_name, sample_every=sample_every, max_queue=max_queue,
               values_max_numel=values_max_numel, meta=meta, **options)


def current_run() -> Run | None:
    """The innermost active `watch` run, or None."""
    return _CURRENT[-1] if _CURRENT else None


def step(index: int) -> _Step:
    """Mark step `index` on the current run (a no-op marker when nothing is watched).

    >>> with step(3):
    ...     pass
    """
    run = _CURRENT[-1] if _CURRENT else None
    if run is None:
        return _NULL_STEP
    return run.step(index)
