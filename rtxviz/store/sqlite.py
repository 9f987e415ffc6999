"""The SQLite store (the default): stdlib sqlite3, WAL, one writer connection, one reader. Implements `RunStore`.

Events are stored as the JSON text the server will send (with ``seq`` already in it), so streaming from the store
never re-encodes. `append` assigns each run's sequence numbers and commits before returning: whatever the ingest
endpoint acknowledged survives a restart. One process owns the sequence counters (they are kept in memory beside
the file), so one process writes a file at a time: a writer holds an advisory lock on ``<file>.lock`` (flock, so
the kernel releases it when the process dies, even by kill -9), and a second writer is refused at start with
`StoreLocked`, naming the holder. Readers (``read_only=True``: export, render) need no lock and may read while the
server writes (WAL).

Failures come out as the `StoreError`s of base.py, each naming the file and what to do: `StoreOpenError` at start
(unreadable, not SQLite, corrupt: the writer runs ``PRAGMA quick_check`` on opening), `StoreFull` for a full disk
(the batch is rolled back and the next one succeeds once there is room), `StoreUnavailable` for corruption found
while running (after which writes are refused too) or an I/O error.

>>> s = SQLiteStore(":memory:")
>>> s.append("r1", "demo", [("step_begin", 0, '{"v":1,"kind":"step_begin","t":0,"step":0}')], dropped=0)
(1, ['{"seq":1,"v":1,"kind":"step_begin","t":0,"step":0}'])
>>> [r["name"] for r in s.list_runs()]
['demo']
>>> s.events("r1", after=0), s.last_seq("r1")
([(1, '{"seq":1,"v":1,"kind":"step_begin","t":0,"step":0}')], 1)
>>> s.close()
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sqlite3
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import IO, Any

from .base import (
    RUN_FIELDS,
    EventRow,
    HistoryRow,
    RunRecord,
    StepRecord,
    StoredEvent,
    StoreError,
    StoreForbidden,
    StoreFull,
    StoreLocked,
    StoreOpenError,
    StoreUnavailable,
    UserExists,
    UserRecord,
    check_decoded,
)
from .history import HistoryTracker
from .migrations import LATEST, VERSION_TABLE, check_user_name, pending, statements, too_new
from .rows import batch_facts, forbidden, stored_texts, user_exists, user_row

try:  # POSIX; elsewhere a second writer is not detected (documented in docs/server.md)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

#: The per-step history's upsert (history.py; its tables are migrations.py's number 3). Plain SQL that ports
#: (PostgreSQL's, postgres.py, has GREATEST for SQLite's two-argument MAX).
#: (Written with `_insert_many`, many rows to a statement: `excluded` is each row's own values.)
_HISTORY_INSERT = "INSERT INTO history (name_id, step, grad_norm, update_ratio, nonfinite)"
_HISTORY_ON_CONFLICT = (
    " ON CONFLICT (name_id, step) DO UPDATE SET grad_norm = COALESCE(excluded.grad_norm, grad_norm), "
    "update_ratio = COALESCE(excluded.update_ratio, update_ratio), nonfinite = MAX(nonfinite, excluded.nonfinite)")

#: Rows go in `_ROWS_PER_INSERT` rows to a statement (``INSERT ... VALUES (...), (...), ...``), not one row to an
#: `executemany` step: per step, Python's sqlite3 resets the statement, releases and takes back the GIL and checks
#: its bindings, about 2.5 us a row; events cost ~6.5 us each to store that way (benchmarks/README.md, fifth
#: session). 100 rows measured best: longer statements cost more to bind than they save in steps.
_ROWS_PER_INSERT = 100

#: The page size of a database this store creates (bytes; see `SQLiteStore._open`).
PAGE_SIZE = 16384


def _insert_many(cur: sqlite3.Connection, head: str, columns: int, flat: list[Any], tail: str = "") -> None:
    """Run ``head VALUES (?, ...), ... tail`` over `flat` (`columns` bindings a row, row after row): full statements
    of `_ROWS_PER_INSERT` rows (the same text each time: sqlite3 keeps it prepared), the remainder in one more."""
    row = "(" + ", ".join("?" * columns) + ")"
    width = columns * _ROWS_PER_INSERT
    full = len(flat) - len(flat) % width
    if full:
        sql = f"{head} VALUES {', '.join([row] * _ROWS_PER_INSERT)}{tail}"
        for start in range(0, full, width):
            cur.execute(sql, flat[start:start + width])
    if full < len(flat):
        cur.execute(f"{head} VALUES {', '.join([row] * ((len(flat) - full) // columns))}{tail}", flat[full:])


#: The kinds whose consecutive events of one step share a row (`pack_rows`): a training step's bulk (an mlp_train
#: step sends 6 node, 6 grad and 6 leaf_grad events among 24), each run of them arriving together in one post.
PACKED_KINDS = frozenset(("node", "grad", "leaf_grad"))
#: The most events one row holds: a read from seq `after` on starts at most this many rows back.
PACK_MAX = 64
#: What separates the events of a packed row: the ASCII record separator, which JSON text never holds (a control
#: character is neither whitespace nor allowed unescaped in a string), so a lone event is a row without it.
PACK_SEP = "\x1e"
_KIND_STEP = itemgetter(0, 1)

log = logging.getLogger("rtxviz.store")


def pack_rows(run_id: str, first: int, events: Sequence[EventRow], texts: list[str]) -> list[Any]:
    """The bindings (run_id, seq, kind, step, body per row) of a batch stored from seq `first` on, each run of
    consecutive `PACKED_KINDS` events of one kind and step in one row of at most `PACK_MAX` events: the row's
    seq is its first event's, its body their texts joined by `PACK_SEP`.

    A row costs SQLite about the same whatever its size (a B-tree cell in the table and one in `events_kind`): one
    row for a run of events took the in-process ingest of an mlp_train stream from ~8-9 to ~6-7 us an event
    (benchmarks/README.md, fourteenth session). Every read unpacks (`unpack_rows`), so what a reader gets is
    the same event by event.

    >>> ev = [("step_begin", 0, "{}"), ("node", 0, "{}"), ("node", 0, "{}"), ("grad", 0, "{}")]
    >>> pack_rows("r", 5, ev, ["a", "b", "c", "d"])
    ['r', 5, 'step_begin', 0, 'a', 'r', 6, 'node', 0, 'b\\x1ec', 'r', 8, 'grad', 0, 'd']
    """
    if PACK_SEP in "".join(texts):  # one pass in C; the server's texts never hold it (its scan refuses them)
        i = next(i for i, t in enumerate(texts) if PACK_SEP in t)
        raise ValueError(f"append: event {i} of the batch ({events[i][0]}) holds the character U+001E, which JSON "
                         "text cannot hold (escape it as \\u001e inside a string)")
    flat: list[Any] = []
    seq = first
    for (kind, step), group in itertools.groupby(events, key=_KIND_STEP):
        n = sum(1 for _ in group)
        i = seq - first
        if n == 1 or kind not in PACKED_KINDS:
            for k in range(n):
                flat += (run_id, seq + k, kind, step, texts[i + k])
        else:
            for start in range(0, n, PACK_MAX):
                m = min(PACK_MAX, n - start)
                flat += (run_id, seq + start, kind, step,
                         texts[i + start] if m == 1 else PACK_SEP.join(texts[i + start:i + start + m]))
        seq += n
    return flat


def unpack_rows(rows: Sequence[tuple[int, str]], after: int = 0, upto: int | None = None,
                limit: int | None = None) -> list[StoredEvent]:
    """(seq, text) per event of `rows` (seq, body), in order, those with after < seq <= upto, at most `limit`.

    >>> unpack_rows([(5, "a"), (6, "b\\x1ec\\x1ed"), (9, "e")], after=6, limit=2)
    [(7, 'c'), (8, 'd')]
    """
    out: list[StoredEvent] = []
    high = sys.maxsize if upto is None else upto
    for seq, body in rows:
        # a row of one event takes no split and no generator: a third of this read's time went to them
        if PACK_SEP not in body:
            if after < seq <= high:
                out.append((seq, body))
        else:
            out += [event for event in enumerate(body.split(PACK_SEP), seq) if after < event[0] <= high]
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


def _unpacked_seqs(rows: Iterable[tuple[int, str, int | None, str]]) -> Iterator[tuple[int, str, int | None, str]]:
    """(seq, kind, step, text) per event of (seq, kind, step, body) rows."""
    for seq, kind, step, body in rows:
        if PACK_SEP not in body:
            yield seq, kind, step, body
        else:
            for at, text in enumerate(body.split(PACK_SEP), seq):
                yield at, kind, step, text


# the store imports the standard library only; the server hands in the compiled `schema.seq_pack` (use_seq_pack)
_seq_pack: Callable[..., tuple[list[str], list[Any]] | None] | None = None


def use_seq_pack(fn: Callable[..., tuple[list[str], list[Any]] | None]) -> None:
    """Make `packed_batch` with `fn` where it can (``schema.seq_pack``: the same lists in one compiled pass, about
    a quarter of the time of `stored_texts` and `pack_rows`; None from it for a batch it does not take)."""
    global _seq_pack
    _seq_pack = fn


def packed_batch(run_id: str, first: int, events: Sequence[EventRow]) -> tuple[list[str], list[Any]]:
    """(the stored texts, the row bindings) of a batch stored from seq `first` on: `stored_texts`, and `pack_rows`
    over them.

    >>> texts, rows = packed_batch("r", 3, [("node", 0, '{"a":1}'), ("node", 0, '{"b":"Σ"}')])
    >>> texts
    ['{"seq":3,"a":1}', '{"seq":4,"b":"\\\\u03a3"}']
    >>> rows
    ['r', 3, 'node', 0, '{"seq":3,"a":1}\\x1e{"seq":4,"b":"\\\\u03a3"}']
    """
    if _seq_pack is not None and type(events) is list and type(run_id) is str and 0 < first < 2**62:
        got = _seq_pack(events, first, run_id, PACKED_KINDS, PACK_MAX, PACK_SEP)
        if got is not None:
            return got
    texts = stored_texts(events, first)
    return texts, pack_rows(run_id, first, events, texts)


def _insert_events(cur: sqlite3.Connection, rows: list[Any]) -> None:
    """Insert a batch's row bindings (`packed_batch`)."""
    if rows:
        _insert_many(cur, "INSERT INTO events (run_id, seq, kind, step, body)", 5, rows)


_RUN_COLUMNS = ", ".join(RUN_FIELDS)
#: What a reader selects from a database of schema version 1 (no owners yet: it has not been upgraded by a writer)
_RUN_COLUMNS_V1 = _RUN_COLUMNS.replace("owner", "NULL AS owner")

# SQLite's primary result codes (the low byte of sqlite3.Error.sqlite_errorcode)
_READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 8, 10, 11, 13, 14, 26
_BUSY, _LOCKED = 5, 6


def _code(exc: sqlite3.Error) -> int:
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def _advice(path: str, exc: BaseException, reading: bool = False) -> str:
    """What to do about a database that cannot be opened, by what went wrong (and whether it was to read it)."""
    code = _code(exc) if isinstance(exc, sqlite3.Error) else 0
    text = str(exc)
    damaged = code in (_CORRUPT, _NOTADB) or "malformed" in text or "not a database" in text
    if damaged and reading:
        hint = ""
        if path.endswith((".jsonl", ".json", ".ndjson")):
            hint = (f" ({path} looks like a JSON-lines run: load it with `rtxviz import {path} --db runs.db`, then "
                    "read runs.db)")
        return (f"{path} is not a readable SQLite database ({text}); --db takes the server's runs database "
                f"(default ~/.rtxviz/runs.db){hint}")
    if damaged:
        return (f"{path} is not a readable SQLite database ({text}): it is damaged or another kind of file. Move "
                f"it aside (mv {path} {path}.damaged) to start with an empty one, or pass --db with another file")
    if code == _READONLY or "readonly" in text:
        return (f"cannot write the runs database {path} ({text}): the server writes it. Make it and its folder "
                f"writable (chmod u+w), or pass --db with another file")
    return (f"cannot open the runs database {path} ({text}). Check that the file and its folder exist and are "
            f"readable and writable by this user (ls -l {path}), or pass --db with another file")


def _runtime_error(path: str, exc: sqlite3.Error) -> StoreError | None:
    """The StoreError for a failure while running, or None for a programming error (left to surface as it is)."""
    code = _code(exc)
    if code == _FULL:
        return StoreFull(f"the disk holding {path} is full ({exc}); nothing of this batch was stored. Free some "
                         "space (or delete runs) and send again: the server goes on by itself once there is room")
    if code in (_CORRUPT, _NOTADB):
        return StoreUnavailable(f"the runs database {path} is damaged ({exc}); stop the server, move the file "
                                "aside and start again (or pass --db with another file)")
    if code in (_IOERR, _READONLY, _CANTOPEN):
        return StoreUnavailable(f"cannot write the runs database {path} ({exc}); check the disk and the file's "
                                "permissions")
    if code in (_BUSY, _LOCKED):
        return StoreUnavailable(f"the runs database {path} is busy ({exc}); send again")
    return None


class SQLiteStore:
    """Runs and events in one SQLite file (or ``:memory:``). Thread-safe; writes are serialised.

    `max_runs` and `max_events_per_run` bound the store (`StoreFull` past them). The file's folder is created.
    """

    def __init__(self, path: str, max_runs: int = 1000, max_events_per_run: int = 20_000_000,
                 read_only: bool = False) -> None:
        self.path = path
        self.max_runs, self.max_events_per_run = max_runs, max_events_per_run
        self.read_only = read_only
        self._broken: str | None = None  # set when corruption is found while running: writes are refused then
        self._lock_file: IO[str] | None = None
        memory = path == ":memory:"
        if not memory and not read_only:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            except OSError as exc:
                raise StoreOpenError(_advice(path, exc)) from None
            self._lock_file = _hold_writer_lock(path)
        try:
            self._open(path, memory, read_only)
        except sqlite3.Error as exc:
            self._release_lock()
            raise StoreOpenError(_advice(path, exc, reading=read_only)) from None
        except StoreOpenError:
            self._release_lock()
            raise
        self._users: dict[str, UserRecord] = {}  # token hash -> user, hits only (users are added, never changed)
        # re-entrant: append_chunks holds it across its parts, each an `append` (nothing else writes between them)
        self._wlock = threading.RLock()
        self._rlock = self._wlock if self._r is self._w else threading.Lock()
        self._closed = False

    def _open(self, path: str, memory: bool, read_only: bool) -> None:
        if read_only:
            uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
            self._w = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            self._r = self._w
            self._version = self._read_version()
        else:
            self._w = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            # a new file gets 16 KiB pages (SQLite's default is 4 KiB): a B-tree page holds ~60 events instead of
            # ~15, so appends split and log fewer pages (the ingest path's CPU ~7% less); on a file that exists
            # already the pragma changes nothing (only VACUUM would), and both sizes read and write alike
            self._w.execute(f"PRAGMA page_size={PAGE_SIZE}")
            self._w.execute("PRAGMA journal_mode=WAL")
            self._w.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            if not memory:
                # a file damaged in the middle opens fine and fails later, page by page: find out now (this reads
                # the whole file once)
                problems = [row[0] for row in self._w.execute("PRAGMA quick_check(5)")]
                if problems != ["ok"]:
                    raise sqlite3.DatabaseError(f"database disk image is malformed: {'; '.join(problems)}")
            self._version = self._migrate()
            # one reader connection beside the writer (WAL lets it read while the writer commits); an in-memory
            # database exists only on its own connection, so there the writer reads too
            self._r = self._w if memory else sqlite3.connect(path, check_same_thread=False)
        self._run_columns = _RUN_COLUMNS if self._version >= 2 else _RUN_COLUMNS_V1
        self._next: dict[str, int] = {}
        self._runs: set[str] = set()
        self._history = HistoryTracker()
        self._name_ids: dict[str, dict[str, int]] = {}  # run -> history name -> id (loaded on a run's first use)
        self._next_name_id = 1 + (self._w.execute("SELECT COALESCE(MAX(id), 0) FROM history_names").fetchone()[0]
                                  if not read_only else 0)
        # a run's last seq is its last row's seq, plus the events packed in it after the first
        for run_id, seq, body in self._w.execute(
                "SELECT r.id, e.seq, e.body FROM runs r LEFT JOIN events e ON e.run_id = r.id AND e.seq = "
                "(SELECT MAX(seq) FROM events WHERE run_id = r.id)"):
            self._next[run_id] = 1 if seq is None else seq + body.count(PACK_SEP) + 1
            self._runs.add(run_id)

    def _read_version(self) -> int:
        """The database's schema version (0: made before versioning); refuses one newer than this code."""
        try:
            row = self._w.execute("SELECT version FROM schema_version").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            row = None
        version = int(row[0]) if row else 0
        if version > LATEST:
            raise too_new(version, self.path)
        return version

    def _migrate(self) -> int:
        """Bring the database to `LATEST` in one transaction (see migrations.py); return the version."""
        w = self._w
        w.execute("BEGIN IMMEDIATE")
        try:
            w.execute(VERSION_TABLE)
            current = self._read_version()
            todo = pending(current)
            for migration in todo:
                for sql in statements(migration, "sqlite"):
                    w.execute(sql)
            if todo:
                w.execute("DELETE FROM schema_version")
                w.execute("INSERT INTO schema_version (version) VALUES (?)", (LATEST,))
            w.execute("COMMIT")
        except BaseException:
            if w.in_transaction:
                w.execute("ROLLBACK")
            raise
        return LATEST

    def _release_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing the descriptor releases the flock
            self._lock_file = None

    def _failed(self, exc: sqlite3.Error) -> BaseException:
        """The StoreError to raise for `exc` (remembering corruption), or `exc` itself."""
        err = _runtime_error(self.path, exc)
        if err is None:
            return exc
        if _code(exc) in (_CORRUPT, _NOTADB):
            self._broken = str(err)
        return err

    def _closed_error(self) -> StoreUnavailable:
        return StoreUnavailable(f"{self.path} is closed (the server is stopping)")

    def _check_writable(self) -> None:
        if self._closed:
            raise self._closed_error()
        if self.read_only:
            raise StoreUnavailable(f"{self.path} was opened read-only")
        if self._broken is not None:
            raise StoreUnavailable(self._broken)

    # -- writing ---------------------------------------------------------------------------------------------
    def append(self, run_id: str, name: str | None, events: Sequence[EventRow],
               dropped: int | None = None, meta: dict[str, Any] | None = None,
               owner: str | None = None, decoded: Sequence[Any] | None = None,
               any_run: bool = False) -> tuple[int, list[str]]:
        """Append `(kind, step, json_text)` events to a run (created if new); returns (first seq, stored texts).

        The stored text is the event's JSON with ``"seq":N`` put first and every character past ASCII escaped
        (`rows.ascii_json`: the same JSON). A text holding U+001E (`pack_rows`) or a lone surrogate raises
        ValueError before the transaction begins, and nothing is stored. `dropped` is the emitter's running total
        of dropped events (kept as the run's maximum). A new run is `owner`'s; another user's run raises
        `StoreForbidden` unless `any_run` (see `RunStore.append`).
        """
        check_decoded(events, decoded)
        now = time.time()
        with self._wlock:
            self._check_writable()
            first = self._next.get(run_id)
            if first is None:
                if len(self._runs) >= self.max_runs:
                    raise StoreFull(f"the store holds {len(self._runs)} runs (max_runs={self.max_runs}); "
                                    "delete some with DELETE /api/runs/{id}")
                first = 1
            if first - 1 + len(events) > self.max_events_per_run:
                raise StoreFull(f"run {run_id} would exceed max_events_per_run={self.max_events_per_run}")
            # column by column, in comprehensions and C-level scans: this runs for every event the server takes
            texts, rows = packed_batch(run_id, first, events)
            facts = batch_facts(events, name, meta)
            run_name, run_meta = facts.name, facts.meta
            cur = self._w
            cur.execute("BEGIN")
            try:
                if run_id not in self._runs:
                    cur.execute("INSERT INTO runs (id, name, created, updated, meta, owner) VALUES (?, ?, ?, ?, ?, ?)",
                                (run_id, (run_name or run_id)[:256], now, now, json.dumps(run_meta or {}), owner))
                elif owner is not None and not any_run:  # only a student's append pays for the check
                    held = cur.execute("SELECT owner FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
                    if held != owner:
                        raise StoreForbidden(forbidden(run_id, owner))
                _insert_events(cur, rows)
                cur.execute(
                    "UPDATE runs SET updated = ?, n_events = n_events + ?, dropped = MAX(dropped, ?), "
                    "last_step = COALESCE(?, last_step), status = COALESCE(?, status), "
                    "name = COALESCE(?, name), meta = COALESCE(?, meta) WHERE id = ?",
                    (now, len(events), dropped or 0, facts.last_step, facts.status,
                     None if run_name is None else run_name[:256],
                     None if run_meta is None else json.dumps(run_meta), run_id))
                cur.execute("COMMIT")
            except BaseException as exc:
                # SQLite may have rolled back itself (a full disk does): a second ROLLBACK would hide the cause
                if cur.in_transaction:
                    cur.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(exc) from exc
                raise
            self._runs.add(run_id)
            self._next[run_id] = first + len(events)
            return first, texts

    def append_chunks(self, run_id: str, name: str | None, events: Sequence[EventRow], chunk: int,
                      committed: Callable[[int, list[str], int], None], dropped: int | None = None,
                      owner: str | None = None, decoded: Sequence[Any] | None = None,
                      any_run: bool = False) -> tuple[int, list[str]]:
        """`append` a part of at most `chunk` events at a time, calling `committed` after each commit (see
        `AppendsInChunks`); the write lock is held throughout, so the batch's seqs stay consecutive."""
        check_decoded(events, decoded)
        with self._wlock:
            self._check_writable()
            first = self._next.get(run_id, 1)
            # the bounds for the whole batch before any part: a batch the store cannot take stores nothing
            if run_id not in self._runs and len(self._runs) >= self.max_runs:
                raise StoreFull(f"the store holds {len(self._runs)} runs (max_runs={self.max_runs}); "
                                "delete some with DELETE /api/runs/{id}")
            if first - 1 + len(events) > self.max_events_per_run:
                raise StoreFull(f"run {run_id} would exceed max_events_per_run={self.max_events_per_run}")
            last = first + len(events) - 1
            texts: list[str] = []
            for start in range(0, max(len(events), 1), chunk):
                part = events[start:start + chunk]
                try:
                    # the name once (a later part's own run_start still renames the run, as in one append)
                    at, part_texts = self.append(run_id, name if start == 0 else None, part, dropped=dropped,
                                                 owner=owner, any_run=any_run,
                                                 decoded=None if decoded is None else decoded[start:start + chunk])
                except StoreError as exc:
                    if not start:
                        raise
                    raise _partly_stored(exc, start, first) from exc
                texts += part_texts
                committed(at, part_texts, last)
            return first, texts

    def delete_run(self, run_id: str) -> bool:
        """Delete a run and its events; False when there was no such run."""
        with self._wlock:
            if run_id not in self._runs:
                return False
            self._check_writable()
            try:
                self._w.execute("BEGIN")
                self._w.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
                self._w.execute("DELETE FROM history WHERE name_id IN (SELECT id FROM history_names "
                                "WHERE run_id = ?)", (run_id,))
                self._w.execute("DELETE FROM history_names WHERE run_id = ?", (run_id,))
                self._w.execute("DELETE FROM runs WHERE id = ?", (run_id,))
                self._w.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._w.in_transaction:
                    self._w.execute("ROLLBACK")
                raise self._failed(exc) from exc
            self._runs.discard(run_id)
            self._next.pop(run_id, None)
            self._forget_history(run_id)
            return True

    # -- the per-step history (history.py) -------------------------------------------------------------------
    #: The rows one catch-up transaction reads (up to PACK_MAX events each; an mlp_train step's 24 events are 7
    #: rows): the write lock is taken for one such transaction at a time, so an append waits at most that long.
    HISTORY_CHUNK_ROWS = 1000
    #: What the server's scan decodes for `append` (ingest.py): nothing, the history is made from the stored
    #: texts when it is read (`history`).
    history_fields: dict[str, tuple[str, ...]] = {}

    def _catch_up_history(self, run_id: str) -> None:
        """Take the run's events stored since the history last read them into its rows (`HistoryTracker`),
        `HISTORY_CHUNK_ROWS` rows a transaction, each noting how far it got in ``runs.history_seq``.

        The rows are made when the history is read, not as events are stored: on a machine that trains, the
        server's CPU is taken from the training (issue 21), and the history was about a quarter of what each
        event cost it, for numbers only a page that opens a value's history shows. A page that follows a run
        asks at each step it shows, so each read takes in a step or so; the first read of a long run that nobody
        watched takes in all of it (about 5 us an event: a 1,500-step mlp_train run, 34,509 events, ~0.2 s).
        The write lock is released between transactions, so appends (to this run or any other) go on meanwhile."""
        while self._catch_up_chunk(run_id):
            pass

    def _catch_up_chunk(self, run_id: str) -> bool:
        """One transaction of `_catch_up_history`; False once the history has taken in every stored event."""
        with self._wlock:
            self._check_writable()
            row = self._w.execute("SELECT history_seq FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:  # deleted meanwhile
                return False
            start, last = row[0] + 1, self.last_seq(run_id)
            if start > last:
                return False
            # from the row holding seq `start` (a packed row may begin before it)
            rows = self._w.execute(
                "SELECT seq, kind, step, body FROM events WHERE run_id = ? AND seq >= (SELECT MAX(seq) FROM events "
                "WHERE run_id = ? AND seq <= ?) AND seq <= ? ORDER BY seq LIMIT ?",
                (run_id, run_id, start, last, self.HISTORY_CHUNK_ROWS)).fetchall()
            events = [(kind, step, text) for seq, kind, step, text in _unpacked_seqs(rows) if seq >= start]
            if not events:
                raise StoreUnavailable(f"{self.path}: run {run_id} has no stored event at seq {start} although its "
                                       f"last seq is {last}; its history cannot be made past it")
            cur = self._w
            cur.execute("BEGIN")
            try:
                self._append_history(run_id, events, start)
                cur.execute("UPDATE runs SET history_seq = ? WHERE id = ?", (start + len(events) - 1, run_id))
                cur.execute("COMMIT")
            except BaseException as exc:
                if cur.in_transaction:
                    cur.execute("ROLLBACK")
                self._forget_history(run_id)  # its naming state took in these events: rebuilt from the store
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(exc) from exc
                raise
            return True

    def _append_history(self, run_id: str, events: Sequence[EventRow], first: int) -> None:
        """Write the history rows of the run's events from seq `first` on (inside the caller's transaction)."""
        if first == 1:
            self._forget_history(run_id)  # a new run: nothing of a deleted one of that id may name its values
        elif not self._history.current(run_id, first):
            # a run whose history this process has not followed (a restart, a failed catch-up): rebuild how its
            # values are named from the events before `first`: its leaves, and the last step's nodes
            prev = self._w.execute("SELECT step FROM events WHERE run_id = ? AND seq < ? AND step IS NOT NULL "
                                   "ORDER BY seq DESC LIMIT 1", (run_id, first)).fetchone()
            stored = self._w.execute(
                "SELECT seq, kind, step, body FROM events WHERE run_id = ? AND seq < ? AND (kind = 'leaf' OR "
                "(step = ? AND kind IN ('step_begin', 'node', 'checkpoint'))) ORDER BY seq",
                (run_id, first, prev[0] if prev else None))
            self._history.restore(run_id, ((kind, step, text) for seq, kind, step, text in _unpacked_seqs(stored)
                                           if seq < first), first)
        rows = self._history.rows(run_id, events, first)
        if not rows:
            return
        ids = self._name_ids.get(run_id)
        if ids is None:
            ids = self._name_ids[run_id] = dict(self._w.execute(
                "SELECT name, id FROM history_names WHERE run_id = ?", (run_id,)).fetchall())
        new: list[Any] = []  # id, run_id, name of each name this batch brings
        for name, _ in rows:
            if name not in ids:
                ids[name] = self._next_name_id
                new += (self._next_name_id, run_id, name)
                self._next_name_id += 1
        if new:
            _insert_many(self._w, "INSERT INTO history_names (id, run_id, name)", 3, new)
        # a batch's rows are distinct (name, step) keys (a dict's): no two rows of one statement meet in the upsert
        flat: list[Any] = []
        for (name, step), r in rows.items():
            flat += (ids[name], step, r[0], r[1], r[2])
        _insert_many(self._w, _HISTORY_INSERT, 5, flat, _HISTORY_ON_CONFLICT)

    def _forget_history(self, run_id: str) -> None:
        self._history.forget(run_id)
        self._name_ids.pop(run_id, None)
        # ids handed out to a batch that was rolled back are not reused (the counter only grows): harmless gaps

    # -- reading ---------------------------------------------------------------------------------------------
    def has_run(self, run_id: str) -> bool:
        """Whether run `run_id` exists (from memory: never blocks)."""
        return run_id in self._runs

    def last_seq(self, run_id: str) -> int:
        """The highest committed seq of a run (0 when it has none)."""
        return self._next.get(run_id, 1) - 1

    def _query(self, sql: str, args: Sequence[Any]) -> list[Any]:
        with self._rlock:
            if self._closed:  # sqlite3 crashes on a connection closed under a query: `close` waits for this lock
                raise self._closed_error()
            try:
                return self._r.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc

    @staticmethod
    def _run_row(row: tuple[Any, ...]) -> RunRecord:
        d = dict(zip(_RUN_COLUMNS.split(", "), row, strict=True))
        d["meta"] = json.loads(d["meta"])
        return d

    def list_runs(self, limit: int = 1000, owner: str | None = None) -> list[RunRecord]:
        """At most `limit` runs, newest first; only `owner`'s when given."""
        if owner is None:
            rows = self._query(f"SELECT {self._run_columns} FROM runs ORDER BY created DESC LIMIT ?", (limit,))
        elif self._version < 2:  # a reader of a database from before accounts: nobody owns anything
            rows = []
        else:
            rows = self._query(f"SELECT {self._run_columns} FROM runs WHERE owner = ? ORDER BY created DESC "
                               "LIMIT ?", (owner, limit))
        return [self._run_row(r) for r in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run, or None."""
        rows = self._query(f"SELECT {self._run_columns} FROM runs WHERE id = ?", (run_id,))
        return self._run_row(rows[0]) if rows else None

    def events(self, run_id: str, after: int = 0, limit: int = 1000, kinds: Sequence[str] | None = None,
               step: int | None = None, upto: int | None = None) -> list[StoredEvent]:
        """(seq, json text) of a run's events with seq > after (and <= upto), in order, at most `limit`."""
        # a row holds up to PACK_MAX events from its seq on: the one holding seq after + 1 starts up to that far back
        sql = "SELECT seq, body FROM events WHERE run_id = ? AND seq > ?"
        args: list[Any] = [run_id, after - PACK_MAX + 1]
        if upto is not None:
            sql += " AND seq <= ?"
            args.append(upto)
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args.extend(kinds)
        if step is not None:
            sql += " AND step = ?"
            args.append(step)
        sql += " ORDER BY seq LIMIT ?"
        args.append(limit + PACK_MAX - 1)  # every row but those before `after + 1` brings an event at least
        return unpack_rows(self._query(sql, args), after, upto, limit)

    def steps(self, run_id: str, limit: int = 10_000) -> list[StepRecord]:
        """Each recorded step: its index, whether it was sampled, and the seq where it began."""
        rows = self._query("SELECT seq, step, body FROM events WHERE run_id = ? AND kind = 'step_begin' "
                           "ORDER BY seq LIMIT ?", (run_id, limit))
        return [{"step": s, "seq": seq, "sampled": json.loads(b).get("sampled", True)} for seq, s, b in rows]

    def history(self, run_id: str, name: str, limit: int = 100_000) -> list[HistoryRow]:
        """The per-step summaries of one value (`name` as the page keys it), in step order, at most `limit`
        (the events stored since the last read are taken in first: `_catch_up_history`)."""
        if not self.read_only and self._broken is None and run_id in self._runs:
            try:
                self._catch_up_history(run_id)
            except StoreError as exc:  # a full disk, say: the rows made so far are still worth showing
                log.warning("rtxviz store: the history of run %s is not up to date: %s", run_id, exc)
        try:
            rows = self._query(
                "SELECT h.step, h.grad_norm, h.update_ratio, h.nonfinite FROM history_names n JOIN history h "
                "ON h.name_id = n.id WHERE n.run_id = ? AND n.name = ? ORDER BY h.step LIMIT ?",
                (run_id, name, limit))
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []  # a database written before the history existed, opened read-only
            raise
        return [tuple(r) for r in rows]

    # -- accounts --------------------------------------------------------------------------------------------
    def add_user(self, name: str, token_hash: str, teacher: bool = False) -> UserRecord:
        """Add a user with their token's hash; `UserExists` when the name (or the token) is taken."""
        check_user_name(name)
        user: UserRecord = {"name": name, "teacher": bool(teacher), "created": time.time()}
        with self._wlock:
            self._check_writable()
            try:  # one statement: autocommit makes it its own transaction
                self._w.execute("INSERT INTO users (name, token_hash, teacher, created) VALUES (?, ?, ?, ?)",
                                (name, token_hash, int(bool(teacher)), user["created"]))
            except sqlite3.IntegrityError as exc:
                raise UserExists(user_exists(name, self.path, str(exc))) from None
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc
        return user

    def find_user(self, token_hash: str) -> UserRecord | None:
        """The user with this token hash, or None (hits are cached: users are never changed)."""
        user = self._users.get(token_hash)
        if user is None and self._version >= 2:
            rows = self._query("SELECT name, teacher, created FROM users WHERE token_hash = ?", (token_hash,))
            if rows:
                user = self._users[token_hash] = user_row(rows[0])
        return user

    def list_users(self) -> list[UserRecord]:
        """Every user, in the order they were added."""
        if self._version < 2:
            return []
        return [user_row(r) for r in self._query("SELECT name, teacher, created FROM users ORDER BY id", ())]

    def close(self) -> None:
        """Close both connections and let another writer have the file; a query or a write in flight (a viewer's
        replay in a worker thread while the server stops) finishes first, and any after is refused
        (StoreUnavailable). Closing twice is harmless."""
        with self._wlock, self._rlock:  # writer first: no path takes the two the other way round
            if self._closed:
                return
            self._closed = True
            if self._r is not self._w:
                self._r.close()
            self._w.close()
            self._release_lock()


def _partly_stored(exc: StoreError, stored: int, first: int) -> StoreError:
    """`exc` again, saying that the batch's first `stored` events (from seq `first`) were committed before it."""
    kept = f"the batch's first {stored} events were stored (seq {first}..{first + stored - 1}), the rest not"
    text = str(exc)
    told = text.replace("nothing of this batch was stored", kept) if "nothing of this batch" in text \
        else f"{text} ({kept})"
    err = type(exc)(told.replace("and send again", "and send the rest again"))
    err.stored, err.first_seq = stored, first
    return err


def _hold_writer_lock(path: str) -> IO[str] | None:
    """Take the writer's lock on ``<path>.lock`` (kept open while the store is), or raise StoreLocked naming the
    process that holds it."""
    if fcntl is None:  # pragma: no cover
        return None
    lock_path = path + ".lock"
    try:
        f = open(lock_path, "a+", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise StoreOpenError(_advice(path, exc)) from None
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise StoreLocked(
            f"{path} is being written by {holder}; one process writes a runs database at a time. Use that "
            f"server (its --url: rtxviz import/export --url http://127.0.0.1:PORT), stop it first, or pass --db "
            f"with another file (reading it with rtxviz export/render --db is fine meanwhile)") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:200] or 'python'})\n")
    f.flush()
    return f
