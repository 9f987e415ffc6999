"""The PostgreSQL store (a class server): psycopg 3 with a psycopg_pool connection pool. Implements `RunStore`.

Several processes (``rtxviz serve --workers N``, or servers on several machines) write one database, so nothing
that decides a sequence number lives in memory: `append` locks the run's row (``UPDATE runs SET n_events =
n_events + k ... RETURNING``), takes the batch's numbers from it, inserts the events (COPY) and commits, all in one
transaction; a second writer of the same run waits on the row lock until the first commits, so each run's
numbers are dense from 1 and committed in order whoever writes. A run's last seq is its ``n_events``.

Fan-out: the same transaction sends ``NOTIFY rtxviz_events`` with ``origin run_id first last lifecycle``;
PostgreSQL delivers notifications at commit, in commit order, and only then. `listen` runs a thread with a
connection of its own that LISTENs and hands every other process's range to a callback (the server's hub).

`has_run` and `last_seq` ask the database (one indexed read): with several writers a memory copy would not be
the truth. They may therefore wait on the network; the server calls them off its event loop (see base.py).

Failures come out as the `StoreError`s of base.py: `StoreOpenError` at start (server unreachable, no such
database, login refused, a schema newer than the code), naming host, port and database and what to do;
`StoreUnavailable` (503) when the connection is lost while serving (the pool opens a new one for the next
request); `StoreFull` (507) for a bound, or PostgreSQL's disk-full error.

The schema is migrations.py's, applied by the first writer that opens the database (under an advisory lock, so
workers starting together migrate once).

>>> PostgresStore.__name__
'PostgresStore'
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from .base import (
    RUN_FIELDS,
    EventRow,
    HistoryRow,
    RunRecord,
    StepRecord,
    StoredEvent,
    StoreForbidden,
    StoreFull,
    StoreOpenError,
    StoreUnavailable,
    UserExists,
    UserRecord,
    check_decoded,
)
from .history import FIELDS as HISTORY_FIELDS
from .history import HistoryTracker
from .migrations import LATEST, VERSION_TABLE, check_user_name, pending, statements, too_new
from .pgurl import redact
from .pgurl import where as _where
from .rows import batch_facts, forbidden, stored_texts, user_exists, user_row

log = logging.getLogger("rtxviz.store")

#: The LISTEN/NOTIFY channel of committed ranges. A notification's payload: ``origin run_id first last flag``,
#: space-separated (run ids have no spaces), flag 1 when the run's row changed in a way a run list shows.
CHANNEL = "rtxviz_events"
#: The per-step history's upsert (history.py; the tables are migration 3's).
_HISTORY_UPSERT = (
    "INSERT INTO history (name_id, step, grad_norm, update_ratio, nonfinite) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (name_id, step) DO UPDATE SET grad_norm = COALESCE(EXCLUDED.grad_norm, history.grad_norm), "
    "update_ratio = COALESCE(EXCLUDED.update_ratio, history.update_ratio), "
    "nonfinite = GREATEST(history.nonfinite, EXCLUDED.nonfinite)")
#: The advisory lock key under which writers migrate the schema and create runs (so max_runs holds).
_LOCK_MIGRATE, _LOCK_CREATE = 0x72747876, 0x72747877

_RUN_COLUMNS = ", ".join(RUN_FIELDS)

#: A callback for `listen`: (run_id, first seq, last seq, whether the run's row changed).
Notified = Callable[[str, int, int, bool], None]


def _text(value: str) -> str:
    """PostgreSQL's text cannot hold NUL; SQLite's can. A name with one keeps a visible stand-in instead."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


class PostgresStore:
    """Runs and events in one PostgreSQL database, shared by any number of server processes. Thread-safe.

    `url` is a libpq URL (``postgresql://user:password@host:port/db?sslmode=...``); `path` is it without its
    password. `pool_size` bounds this process's connections (plus one for `listen`). `max_runs` and
    `max_events_per_run` bound the store as in SQLite. `read_only` never writes (export, render): the schema must
    be the latest then (a writer upgrades it).
    """

    #: It makes the history as it stores each batch, from the fields the server's scan decodes (ingest.py).
    history_fields = HISTORY_FIELDS

    def __init__(self, url: str, max_runs: int = 1000, max_events_per_run: int = 20_000_000,
                 read_only: bool = False, pool_size: int = 8, connect_timeout: float = 10.0) -> None:
        self.url, self.path = url, redact(url)
        self.max_runs, self.max_events_per_run = max_runs, max_events_per_run
        self.read_only = read_only
        self.origin = secrets.token_hex(6)  # tells this process's notifications from the others'
        self._connect_timeout = connect_timeout
        self._users: dict[str, UserRecord] = {}
        # the per-step history's naming state (history.py) and each run's name ids, this process's; checked
        # against the database before each batch (another process may have stored the run's previous one)
        self._history = HistoryTracker()
        self._name_ids: dict[str, dict[str, int]] = {}
        self._hlock = threading.Lock()
        self._listeners: list[_Listener] = []
        try:  # one connection first, for its error: a pool only says it timed out
            with psycopg.connect(url, connect_timeout=max(1, int(connect_timeout)), autocommit=True) as con:
                if read_only:
                    self._check_version(con)
                else:
                    self._migrate(con)
        except psycopg.Error as exc:
            raise StoreOpenError(self._cannot_open(exc)) from None
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, timeout=30.0, open=False,
                                    kwargs={"autocommit": True}, name="rtxviz")
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreOpenError(self._cannot_open(exc)) from None

    def _cannot_open(self, exc: BaseException) -> str:
        reason = str(exc).strip().replace("\n", " ")
        return (f"cannot use {_where(self.url)} ({reason}). Check that the server runs (pg_isready -h HOST -p "
                "PORT), that the database exists (createdb NAME) and that this user may log in to it "
                f"(psql '{self.path}'), or pass --db with another database")

    # -- schema ----------------------------------------------------------------------------------------------
    def _version(self, con: psycopg.Connection) -> int:
        exists = con.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
        row = con.execute("SELECT version FROM schema_version").fetchone() if exists and exists[0] else None
        version = int(row[0]) if row else 0
        if version > LATEST:
            raise too_new(version, self.path)
        return version

    def _check_version(self, con: psycopg.Connection) -> None:
        version = self._version(con)
        if version < LATEST:
            raise StoreOpenError(f"{self.path} has schema version {version}, older than this rtxviz's ({LATEST}); "
                                 "start the server on it once (rtxviz serve --db URL), which upgrades it")

    def _migrate(self, con: psycopg.Connection) -> None:
        """Bring the database to `LATEST` in one transaction, one process at a time (an advisory lock)."""
        with con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATE,))
            con.execute(VERSION_TABLE)
            current = self._version(con)
            todo = pending(current)
            for migration in todo:
                for sql in statements(migration, "postgres"):
                    con.execute(sql)
            if todo:
                con.execute("DELETE FROM schema_version")
                con.execute("INSERT INTO schema_version (version) VALUES (%s)", (LATEST,))

    # -- connections -----------------------------------------------------------------------------------------
    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        """A pooled connection; a lost connection or an exhausted pool is `StoreUnavailable`, a full disk
        `StoreFull`."""
        try:
            with self._pool.connection() as con:
                yield con
        except psycopg.errors.DiskFull as exc:
            raise StoreFull(f"the disk of {_where(self.url)} is full ({exc}); nothing of this batch was stored. "
                            "Free some space (or delete runs) and send again") from exc
        except PoolTimeout as exc:
            raise StoreUnavailable(f"no connection to {_where(self.url)} came free in time ({exc}); the server "
                                   "is overloaded or the database unreachable: send again") from exc
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"lost the connection to {_where(self.url)} ({str(exc).strip()}); check that "
                                   "the database server runs, then send again") from exc

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreUnavailable(f"{self.path} was opened read-only")

    # -- writing ---------------------------------------------------------------------------------------------
    def append(self, run_id: str, name: str | None, events: Sequence[EventRow], dropped: int | None = None,
               meta: dict[str, Any] | None = None, owner: str | None = None,
               decoded: Sequence[Any] | None = None, any_run: bool = False) -> tuple[int, list[str]]:
        """Append events to a run (created if new) in one transaction; see `RunStore.append`."""
        check_decoded(events, decoded)
        self._check_writable()
        now = time.time()
        k = len(events)
        facts = batch_facts(events, name, meta)
        run_name, run_meta, status, last_step, changed = facts
        name_arg = None if run_name is None else _text(run_name[:256])
        meta_arg = None if run_meta is None else json.dumps(run_meta)
        update = ("UPDATE runs SET updated = %s, n_events = n_events + %s, dropped = GREATEST(dropped, %s), "
                  "last_step = COALESCE(%s, last_step), status = COALESCE(%s, status), name = COALESCE(%s, name), "
                  "meta = COALESCE(%s, meta) WHERE id = %s RETURNING n_events, owner")
        update_args = (now, k, dropped or 0, last_step, status, name_arg, meta_arg, run_id)
        with self._conn() as con, con.transaction():
            row = con.execute(update, update_args).fetchone()  # locks the run's row until commit
            if row is None:
                # a new run: one creator at a time, so that max_runs holds and a racing creator finds the row
                con.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_CREATE,))
                row = con.execute(update, update_args).fetchone()
            if row is None:
                count = con.execute("SELECT count(*) FROM runs").fetchone()
                if count is not None and count[0] >= self.max_runs:
                    raise StoreFull(f"the store holds {count[0]} runs (max_runs={self.max_runs}); delete some "
                                    "with DELETE /api/runs/{id}")
                if k > self.max_events_per_run:
                    raise StoreFull(f"run {run_id} would exceed max_events_per_run={self.max_events_per_run}")
                con.execute("INSERT INTO runs (id, name, created, updated, status, meta, n_events, dropped, "
                            "last_step, owner) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                            (run_id, _text((run_name or run_id)[:256]), now, now, status or "running",
                             meta_arg or "{}", k, dropped or 0, last_step, owner))
                first, changed = 1, True
            else:
                total, held = row
                if owner is not None and not any_run and held != owner:
                    raise StoreForbidden(forbidden(run_id, owner))
                if total > self.max_events_per_run:
                    raise StoreFull(f"run {run_id} would exceed max_events_per_run={self.max_events_per_run}")
                first = total - k + 1
            texts = stored_texts(events, first)
            if events:
                with con.cursor() as cur, cur.copy("COPY events (run_id, seq, kind, step, body) FROM STDIN") as copy:
                    for i, (kind, step, _) in enumerate(events):
                        copy.write_row((run_id, first + i, kind, step, texts[i]))
            # a batch refused after this leaves the naming state ahead of the database: the batch sent again
            # starts at the same seq, which `current` then refuses, so the state is rebuilt
            self._append_history(con, run_id, events, first, decoded)
            if events or changed:  # delivered at commit, in commit order
                con.execute("SELECT pg_notify(%s, %s)",
                            (CHANNEL, f"{self.origin} {run_id} {first} {first + k - 1} {int(changed)}"))
        return first, texts

    def delete_run(self, run_id: str) -> bool:
        """Delete a run and its events; False when there was no such run."""
        self._check_writable()
        self._forget_history(run_id)
        with self._conn() as con, con.transaction():
            con.execute("DELETE FROM events WHERE run_id = %s", (run_id,))
            con.execute("DELETE FROM history WHERE name_id IN (SELECT id FROM history_names WHERE run_id = %s)",
                        (run_id,))
            con.execute("DELETE FROM history_names WHERE run_id = %s", (run_id,))
            return con.execute("DELETE FROM runs WHERE id = %s RETURNING id", (run_id,)).fetchone() is not None

    # -- the per-step history (history.py) -------------------------------------------------------------------
    def _append_history(self, con: psycopg.Connection, run_id: str, events: Sequence[EventRow], first: int,
                        decoded: Sequence[Any] | None = None) -> None:
        """Write the history rows of a batch stored from seq `first` on, in append's transaction (which holds the
        run's row lock, so no other process writes this run meanwhile)."""
        with self._hlock:  # the naming state is this process's; threads appending to other runs share the dict
            if first == 1:
                self._history.forget(run_id)
                self._name_ids.pop(run_id, None)
            elif not self._history.current(run_id, first):
                # a restart, a refused batch, or the run's previous batch stored by another process: rebuild the
                # naming from what is stored before this batch (and re-read the run's name ids)
                self._name_ids.pop(run_id, None)
                prev = con.execute("SELECT step FROM events WHERE run_id = %s AND seq < %s AND step IS NOT NULL "
                                   "ORDER BY seq DESC LIMIT 1", (run_id, first)).fetchone()
                self._history.restore(run_id, con.execute(
                    "SELECT kind, step, body FROM events WHERE run_id = %s AND seq < %s AND (kind = 'leaf' OR "
                    "(step = %s AND kind IN ('step_begin', 'node', 'checkpoint'))) ORDER BY seq",
                    (run_id, first, prev[0] if prev else None)).fetchall(), first)
            rows = self._history.rows(run_id, events, first, decoded)
            if not rows:
                return
            ids = self._name_ids.setdefault(run_id, {})
            new = sorted({_text(name) for name, _ in rows} - ids.keys())
            if new:
                with con.cursor() as cur:
                    cur.executemany("INSERT INTO history_names (run_id, name) VALUES (%s, %s) "
                                    "ON CONFLICT (run_id, name) DO NOTHING", [(run_id, n) for n in new])
                for name, nid in con.execute("SELECT name, id FROM history_names WHERE run_id = %s AND "
                                             "name = ANY(%s)", (run_id, new)).fetchall():
                    ids[name] = int(nid)
            with con.cursor() as cur:
                cur.executemany(_HISTORY_UPSERT, [(ids[_text(name)], step, r[0], r[1], r[2])
                                                  for (name, step), r in rows.items()])

    def _forget_history(self, run_id: str) -> None:
        with self._hlock:
            self._history.forget(run_id)
            self._name_ids.pop(run_id, None)

    def history(self, run_id: str, name: str, limit: int = 100_000) -> list[HistoryRow]:
        """The per-step summaries of one value (`name` as the page keys it), in step order, at most `limit`."""
        rows = self._query(
            "SELECT h.step, h.grad_norm, h.update_ratio, h.nonfinite FROM history_names n JOIN history h "
            "ON h.name_id = n.id WHERE n.run_id = %s AND n.name = %s ORDER BY h.step LIMIT %s",
            (run_id, _text(name), limit))
        return [(int(s), g, u, int(f)) for s, g, u, f in rows]

    # -- reading ---------------------------------------------------------------------------------------------
    def _query(self, sql: str, args: Sequence[Any]) -> list[Any]:
        with self._conn() as con:
            return con.execute(sql, args).fetchall()

    def has_run(self, run_id: str) -> bool:
        """Whether the run exists (asks the database: call it off the event loop)."""
        return bool(self._query("SELECT 1 FROM runs WHERE id = %s", (run_id,)))

    def last_seq(self, run_id: str) -> int:
        """The highest committed seq of the run, 0 for none (asks the database: call it off the event loop)."""
        rows = self._query("SELECT n_events FROM runs WHERE id = %s", (run_id,))
        return int(rows[0][0]) if rows else 0

    @staticmethod
    def _run_row(row: tuple[Any, ...]) -> RunRecord:
        d = dict(zip(RUN_FIELDS, row, strict=True))
        d["meta"] = json.loads(d["meta"])
        return d

    def list_runs(self, limit: int = 1000, owner: str | None = None) -> list[RunRecord]:
        """At most `limit` runs, newest first; only `owner`'s when given."""
        if owner is None:
            rows = self._query(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created DESC LIMIT %s", (limit,))
        else:
            rows = self._query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE owner = %s ORDER BY created DESC "
                               "LIMIT %s", (owner, limit))
        return [self._run_row(r) for r in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run, or None."""
        rows = self._query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = %s", (run_id,))
        return self._run_row(rows[0]) if rows else None

    def events(self, run_id: str, after: int = 0, limit: int = 1000, kinds: Sequence[str] | None = None,
               step: int | None = None, upto: int | None = None) -> list[StoredEvent]:
        """(seq, json text) of a run's events with seq > after (and <= upto), in order, at most `limit`."""
        sql = "SELECT seq, body FROM events WHERE run_id = %s AND seq > %s"
        args: list[Any] = [run_id, after]
        if upto is not None:
            sql += " AND seq <= %s"
            args.append(upto)
        if kinds:
            sql += " AND kind = ANY(%s)"
            args.append(list(kinds))
        if step is not None:
            sql += " AND step = %s"
            args.append(step)
        sql += " ORDER BY seq LIMIT %s"
        args.append(limit)
        return [(int(seq), body) for seq, body in self._query(sql, args)]

    def steps(self, run_id: str, limit: int = 10_000) -> list[StepRecord]:
        """Each recorded step: its index, whether it was sampled, and the seq where it began."""
        rows = self._query("SELECT seq, step, body FROM events WHERE run_id = %s AND kind = 'step_begin' "
                           "ORDER BY seq LIMIT %s", (run_id, limit))
        return [{"step": s, "seq": seq, "sampled": json.loads(b).get("sampled", True)} for seq, s, b in rows]

    # -- accounts --------------------------------------------------------------------------------------------
    def add_user(self, name: str, token_hash: str, teacher: bool = False) -> UserRecord:
        """Add a user with their token's hash; `UserExists` when the name (or the token) is taken."""
        check_user_name(name)
        self._check_writable()
        user: UserRecord = {"name": name, "teacher": bool(teacher), "created": time.time()}
        try:
            with self._conn() as con:
                con.execute("INSERT INTO users (name, token_hash, teacher, created) VALUES (%s, %s, %s, %s)",
                            (name, token_hash, bool(teacher), user["created"]))
        except psycopg.errors.UniqueViolation as exc:
            raise UserExists(user_exists(name, self.path, str(exc.diag.constraint_name or exc))) from None
        return user

    def find_user(self, token_hash: str) -> UserRecord | None:
        """The user with this token hash, or None (hits are cached: users are never changed)."""
        user = self._users.get(token_hash)
        if user is None:
            rows = self._query("SELECT name, teacher, created FROM users WHERE token_hash = %s", (token_hash,))
            if rows:
                user = self._users[token_hash] = user_row(rows[0])
        return user

    def list_users(self) -> list[UserRecord]:
        """Every user, in the order they were added."""
        return [user_row(r) for r in self._query("SELECT name, teacher, created FROM users ORDER BY id", ())]

    # -- fan-out ---------------------------------------------------------------------------------------------
    def listen(self, callback: Notified, reconnected: Callable[[], None] | None = None) -> Callable[[], None]:
        """Call `callback(run_id, first, last, changed)` from a thread of its own for every range another
        process commits (this store's own appends are left out: its caller has them already). Returns the
        function that stops it. After a lost connection it reconnects, then calls `reconnected()`: ranges
        committed while it was away were not announced, so the caller reads what it lacks from the store."""
        listener = _Listener(self.url, self.origin, callback, reconnected, wake=self._wake)
        self._listeners.append(listener)
        listener.start()
        return listener.stop

    def _wake(self, channel: str) -> None:
        """Wake a listener waiting on `channel` (so that stopping takes a round trip, not its poll interval)."""
        try:
            with self._conn() as con:
                con.execute("SELECT pg_notify(%s, '')", (channel,))
        except Exception:  # the database is gone: the listener stops at its next poll anyway
            pass

    def close(self) -> None:
        """Stop the listeners and close the pool."""
        for listener in self._listeners:
            listener.stop()
        self._listeners.clear()
        self._pool.close()


class _Listener:
    """A thread that LISTENs on its own connection and hands other processes' ranges to a callback."""

    def __init__(self, url: str, origin: str, callback: Notified, reconnected: Callable[[], None] | None = None,
                 wake: Callable[[str], None] | None = None) -> None:
        self.url, self.origin, self.callback, self.reconnected = url, origin, callback, reconnected
        self._wake = wake
        self._wake_channel = f"rtxviz_stop_{secrets.token_hex(6)}"  # this listener's alone
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rtxviz-listen", daemon=True)

    def start(self, timeout: float = 10.0) -> None:
        """Start, and return once LISTEN is in place (so nothing committed afterwards is missed)."""
        self._thread.start()
        self._ready.wait(timeout)

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            if self._wake is not None:
                self._wake(self._wake_channel)
            self._thread.join(5)

    def _run(self) -> None:
        delay = 0.1
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as con:
                    con.execute(f"LISTEN {CHANNEL}")
                    con.execute(f"LISTEN {self._wake_channel}")
                    if self._ready.is_set() and self.reconnected is not None:
                        self._call(self.reconnected)
                    self._ready.set()
                    delay = 0.1
                    while not self._stop.is_set():
                        for note in con.notifies(timeout=0.5):
                            if note.channel == self._wake_channel:
                                break
                            self._deliver(note.payload)
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                log.warning("rtxviz store: the LISTEN connection failed (%s); reconnecting in %.1f s", exc, delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)

    def _deliver(self, payload: str) -> None:
        parts = payload.split(" ")
        if len(parts) != 5 or parts[0] == self.origin:
            return
        self._call(lambda: self.callback(parts[1], int(parts[2]), int(parts[3]), parts[4] == "1"))

    @staticmethod
    def _call(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # a failing callback must not end the listening
            log.exception("rtxviz store: a notification's callback failed")
