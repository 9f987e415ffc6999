"""The store interface: what the server (`rtxviz.web`), the exports and the CLI may ask of wherever runs are kept.

`RunStore` is a `typing.Protocol`: an implementation needs no base class, only these methods (checked by
``isinstance(store, RunStore)`` for their presence, and by tests/store for their behaviour). Two implement it:
`rtxviz.store.sqlite.SQLiteStore` (the embedded default, one writer process) and the PostgreSQL store (a class
server: several worker processes write one database).

Accounts (a class server): a run has an ``owner``, the name of the user whose token posted it first (None for the
server's admin token, or no token). Users are kept with their token's hash only (`hash_token`), never the token.

Events travel as JSON text, never re-encoded: `append` takes ``(kind, step, text)`` rows and gives back the texts
it stored, each with ``"seq":N`` put first, and `events` returns ``(seq, text)`` pairs, so the server streams what
the emitter sent.

>>> from rtxviz.store import RunStore, SQLiteStore
>>> isinstance(SQLiteStore(":memory:"), RunStore)
True
>>> RUN_FIELDS[:3]
('id', 'name', 'created')
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

#: One event to append: ``(kind, step or None, the event's JSON object as text)``.
EventRow: TypeAlias = tuple[str, int | None, str]
#: One stored event as read back: ``(seq, JSON text with "seq" in it)``.
StoredEvent: TypeAlias = tuple[int, str]
#: A run as `list_runs` and `get_run` give it: a JSON-ready dict with the keys `RUN_FIELDS`.
RunRecord: TypeAlias = dict[str, Any]
#: A step as `steps` gives it: ``{"step": int, "seq": int, "sampled": bool}``.
StepRecord: TypeAlias = dict[str, Any]
#: One step of a value's history as `history` gives it: ``(step, grad_norm, update_ratio, nonfinite)``; the norms
#: are None where not sent (or not finite), nonfinite is 1 when the gradient held NaN/Inf (history.py).
HistoryRow: TypeAlias = tuple[int, float | None, float | None, int]
#: A user as `add_user`, `find_user` and `list_users` give it: ``{"name": str, "teacher": bool, "created": float}``.
UserRecord: TypeAlias = dict[str, Any]

#: The keys of a `RunRecord`, in order: ``id``; ``name`` (at most 256 characters); ``created`` and ``updated``
#: (Unix seconds); ``status`` ("running", "ok" or "error"); ``meta`` (a dict); ``n_events``; ``dropped`` (the
#: emitter's highest reported drop count); ``last_step`` (None until a stepped event arrives); ``owner`` (the
#: user who created the run, None for the admin token or a server without accounts).
RUN_FIELDS: tuple[str, ...] = ("id", "name", "created", "updated", "status", "meta", "n_events", "dropped",
                               "last_step", "owner")


def hash_token(token: str) -> str:
    """What the store keeps of a user's token: its SHA-256, hex. Tokens are 32 random bytes (`secrets`), so a
    fast hash is enough (no dictionary to guess from); comparing hashes needs no constant-time care.

    >>> hash_token("s3cret")[:15], len(hash_token("s3cret"))
    ('sha256:1ec1c26b', 71)
    """
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_decoded(events: Sequence[EventRow], decoded: Sequence[Any] | None) -> None:
    """Refuse `RunStore.append`'s `decoded` when it is not one decoded event per event of the batch.

    >>> check_decoded([("log", None, '{"kind":"log"}')], [{"kind": "log"}, {"kind": "log"}])
    Traceback (most recent call last):
    ...
    ValueError: append: decoded holds 2 events for a batch of 1 (one decoded event per event)
    """
    if decoded is not None and len(decoded) != len(events):
        raise ValueError(f"append: decoded holds {len(decoded)} events for a batch of {len(events)} "
                         "(one decoded event per event)")


class StoreError(Exception):
    """Something the store cannot do; the message names the database and what to do about it.

    A batch stored in parts (`AppendsInChunks.append_chunks`) that fails part-way raises with `stored` set to the
    number of its events committed before the failure (its first ones, seqs `first_seq`..`first_seq + stored - 1`):
    those are kept and shown; whoever sends the batch again sends only the rest (docs/server.md).
    """

    #: how many of the batch's events were committed before the failure (0: none, the batch is not stored)
    stored: int = 0
    #: the seq of the first of those (None when none was)
    first_seq: int | None = None


class StoreFull(StoreError):
    """A bound on stored runs or events would be exceeded, or the disk is full (nothing of the batch is stored;
    the same call succeeds once there is room). The server answers 507."""


class StoreUnavailable(StoreError):
    """The database cannot be used now: corrupt, an I/O error, made read-only, busy. The server answers 503."""


class StoreOpenError(StoreError):
    """The database cannot be opened: unreadable, not SQLite, corrupt, read-only. Raised at start."""


class StoreForbidden(StoreError):
    """The run belongs to another user (`append` with an `owner` other than the run's). The server answers 403."""


class UserExists(StoreError):
    """`add_user` with a name that is taken."""


class StoreLocked(StoreOpenError):
    """Another process writes this database (one writer at a time: sequence numbers are kept in memory)."""


@runtime_checkable
class RunStore(Protocol):
    """Runs and their events, kept so that whatever `append` acknowledged survives a restart.

    Every method is synchronous, may wait on I/O and is safe to call from several threads at once: the server
    calls every one of them from its worker threads (``run_in_threadpool``, ``asyncio.to_thread``), never on its
    event loop. That includes `has_run` and `last_seq`: the SQLite store answers them from memory (one process
    writes its file, so its counters are the truth), but a store that several processes write cannot (another
    worker may have appended a moment ago), so the PostgreSQL store asks the database, and the server hops to a
    thread for them like for any other call. A store that several processes write must give `append`'s sequence
    numbers from the database itself, so that they stay dense and ordered per run whoever writes.
    """

    #: Where the runs live, as messages name it (a file path, ``:memory:``; a URL without its password).
    path: str
    #: The fields of each kind that `append` reads from `decoded` (history.FIELDS for a store that makes the
    #: history as it stores; none for one that makes it when read): the server's scan decodes only these.
    history_fields: dict[str, tuple[str, ...]]

    # -- writing -----------------------------------------------------------------------------------------------
    def append(self, run_id: str, name: str | None, events: Sequence[EventRow], dropped: int | None = None,
               meta: dict[str, Any] | None = None, owner: str | None = None,
               decoded: Sequence[Any] | None = None, any_run: bool = False) -> tuple[int, list[str]]:
        """Append events to run `run_id`, creating the run on first use; return (first seq, the stored texts).

        All or nothing, committed before it returns. Sequence numbers are the run's next ones, from 1, dense.
        Each stored text is the event's JSON with ``"seq":N`` put first. A new run is named `name` (else its id)
        with `meta`; a ``run_start`` event sets the name and meta, ``run_end`` the status ("ok" or "error"), any
        event with a step the run's ``last_step``. `dropped` is the emitter's running total of dropped events
        (the run keeps the maximum). A new run is owned by `owner`; appending to an existing run with an `owner`
        other than the run's raises `StoreForbidden` (checked in the same transaction: two students racing for one
        run id cannot both own it); ``owner=None`` (the admin token) or ``any_run=True`` (a teacher, whose new runs are
        still `owner`'s) may append to any run. Raises `StoreFull`
        when a new run would exceed the store's bound on runs or the run its bound on events, or the disk is full
        (nothing is stored then); `StoreUnavailable` when the database cannot be written (corrupt, I/O error).
        `decoded`, when given, is each event's text already decoded (what the server decoded to validate it, one
        per event): a store that makes the history as it stores reads those instead of decoding the texts again
        (ValueError when its length is not the batch's; SQLite's makes the history when it is read).
        """
        ...

    def delete_run(self, run_id: str) -> bool:
        """Delete a run and its events; False when there was no such run."""
        ...

    # -- reading -----------------------------------------------------------------------------------------------
    def has_run(self, run_id: str) -> bool:
        """Whether run `run_id` exists (now: what any process committed)."""
        ...

    def last_seq(self, run_id: str) -> int:
        """The highest committed seq of a run (0 when it has none, or no such run), whoever committed it."""
        ...

    def list_runs(self, limit: int = 1000, owner: str | None = None) -> list[RunRecord]:
        """At most `limit` runs, newest (by ``created``) first; only `owner`'s runs when given."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run, or None."""
        ...

    def events(self, run_id: str, after: int = 0, limit: int = 1000, kinds: Sequence[str] | None = None,
               step: int | None = None, upto: int | None = None) -> list[StoredEvent]:
        """A page of a run's events: seq > `after` (and <= `upto`), only `kinds` when given (an empty sequence
        means all), only step `step` when given; in seq order, at most `limit`. Paging: pass the last seq
        returned as the next `after`. An unknown run has no events (an empty list)."""
        ...

    def steps(self, run_id: str, limit: int = 10_000) -> list[StepRecord]:
        """The run's ``step_begin`` events in seq order, at most `limit`: ``{"step", "seq" (where it began),
        "sampled" (True unless the event said otherwise)}``."""
        ...

    def history(self, run_id: str, name: str, limit: int = 100_000) -> list[HistoryRow]:
        """One value's per-step gradient summaries, in step order, at most `limit`: `name` is the page's key of
        the value (``module|op|k`` for an op, ``L:<name>`` for a named leaf). They are made from the stored
        events, as they are appended (PostgreSQL) or when the history is next read (SQLite);
        `rtxviz.store.history.HistoryTracker` says how they are named and what each number is. An unknown run or
        name has none (an empty list)."""
        ...

    # -- accounts ----------------------------------------------------------------------------------------------
    def add_user(self, name: str, token_hash: str, teacher: bool = False) -> UserRecord:
        """Add a user (1-64 characters of ``[A-Za-z0-9_.-]``) with the hash of their token (`hash_token`). Raises
        `UserExists` when the name is taken, ValueError for a bad name."""
        ...

    def find_user(self, token_hash: str) -> UserRecord | None:
        """The user whose token has this hash, or None. Called for every request of a server with accounts: a
        store may cache it (a user is never changed, only added)."""
        ...

    def list_users(self) -> list[UserRecord]:
        """Every user, in the order they were added."""
        ...

    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


@runtime_checkable
class AppendsInChunks(Protocol):
    """A store that can commit a large batch in parts, each part's events shown as soon as it is committed (the
    SQLite store; issue 15: the viewer's work on one part overlaps the server's on the next). The server uses it
    for batches over `Settings.ingest_chunk_events` when its store has it, else one `RunStore.append`."""

    def append_chunks(self, run_id: str, name: str | None, events: Sequence[EventRow], chunk: int,
                      committed: Callable[[int, list[str], int], None], dropped: int | None = None,
                      owner: str | None = None, decoded: Sequence[Any] | None = None,
                      any_run: bool = False) -> tuple[int, list[str]]:
        """`RunStore.append` in transactions of at most `chunk` events: the batch keeps consecutive seqs (no other
        append comes between its parts), and after each part's commit ``committed(first_seq, texts, last_seq)``
        is called (`last_seq`: the seq the whole batch ends at), in order, before the next part is written.
        The store's bounds are checked for the whole batch first (a batch over them stores nothing). A failure
        in part k keeps parts 1..k-1 and raises with `StoreError.stored` and `first_seq` saying what they hold.
        Returns what `append` would: (first seq, every stored text)."""
        ...


@runtime_checkable
class Notifying(Protocol):
    """A store that several server processes write announces what each commits, so that every process's
    viewers see every process's events (the PostgreSQL store: LISTEN/NOTIFY). The server starts `listen` when
    its store has it."""

    def listen(self, callback: Callable[[str, int, int, bool], None],
               reconnected: Callable[[], None] | None = None) -> Callable[[], None]:
        """Call ``callback(run_id, first_seq, last_seq, run_changed)`` from a thread of the store's for every
        range another process commits, in commit order (never for this store's own appends); ``run_changed``
        when the run's row changed as a run list shows it (created, started, ended, drops). After the store
        lost and regained its connection it calls ``reconnected()`` (what was committed meanwhile was not
        announced). Returns the function that stops listening."""
        ...
