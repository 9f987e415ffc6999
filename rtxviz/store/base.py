"""The store interface: what the server (`rtxviz.web`), the exports and the CLI may ask of wherever runs are kept.

`RunStore` is a `typing.Protocol`: an implementation needs no base class, only these methods (checked by
``isinstance(store, RunStore)`` for their presence, and by tests/store for their behaviour). Today there is one,
`rtxviz.store.sqlite.SQLiteStore`; a server database (PostgreSQL, issue 20) is to be a second behind the same
methods.

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

from collections.abc import Sequence
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

#: The keys of a `RunRecord`, in order: ``id``; ``name`` (at most 256 characters); ``created`` and ``updated``
#: (Unix seconds); ``status`` ("running", "ok" or "error"); ``meta`` (a dict); ``n_events``; ``dropped`` (the
#: emitter's highest reported drop count); ``last_step`` (None until a stepped event arrives).
RUN_FIELDS: tuple[str, ...] = ("id", "name", "created", "updated", "status", "meta", "n_events", "dropped",
                               "last_step")


class StoreError(Exception):
    """Something the store cannot do; the message names the database and what to do about it."""


class StoreFull(StoreError):
    """A bound on stored runs or events would be exceeded, or the disk is full (nothing of the batch is stored;
    the same call succeeds once there is room). The server answers 507."""


class StoreUnavailable(StoreError):
    """The database cannot be used now: corrupt, an I/O error, made read-only, busy. The server answers 503."""


class StoreOpenError(StoreError):
    """The database cannot be opened: unreadable, not SQLite, corrupt, read-only. Raised at start."""


class StoreLocked(StoreOpenError):
    """Another process writes this database (one writer at a time: sequence numbers are kept in memory)."""


@runtime_checkable
class RunStore(Protocol):
    """Runs and their events, kept so that whatever `append` acknowledged survives a restart.

    Every method is synchronous and safe to call from several threads at once: the server calls them from its
    worker threads (``run_in_threadpool``, ``asyncio.to_thread``), except `has_run` and `last_seq`, which it calls
    on its event loop, so those two must answer without waiting on I/O (the SQLite store answers from memory).
    A store that several processes write must give `append`'s sequence numbers from the database itself, so that
    they stay dense and ordered per run whoever writes.
    """

    #: Where the runs live, as messages name it (a file path, ``:memory:``; a URL without its password).
    path: str

    # -- writing -----------------------------------------------------------------------------------------------
    def append(self, run_id: str, name: str | None, events: Sequence[EventRow], dropped: int | None = None,
               meta: dict[str, Any] | None = None) -> tuple[int, list[str]]:
        """Append events to run `run_id`, creating the run on first use; return (first seq, the stored texts).

        All or nothing, committed before it returns. Sequence numbers are the run's next ones, from 1, dense.
        Each stored text is the event's JSON with ``"seq":N`` put first. A new run is named `name` (else its id)
        with `meta`; a ``run_start`` event sets the name and meta, ``run_end`` the status ("ok" or "error"), any
        event with a step the run's ``last_step``. `dropped` is the emitter's running total of dropped events
        (the run keeps the maximum). Raises `StoreFull` when a new run would exceed the store's bound on runs or
        the run its bound on events, or the disk is full (nothing is stored then); `StoreUnavailable` when the
        database cannot be written (corrupt, I/O error).
        """
        ...

    def delete_run(self, run_id: str) -> bool:
        """Delete a run and its events; False when there was no such run."""
        ...

    # -- reading -----------------------------------------------------------------------------------------------
    def has_run(self, run_id: str) -> bool:
        """Whether run `run_id` exists. Called on the event loop: must not block."""
        ...

    def last_seq(self, run_id: str) -> int:
        """The highest committed seq of a run (0 when it has none, or no such run). Must not block."""
        ...

    def list_runs(self, limit: int = 1000) -> list[RunRecord]:
        """At most `limit` runs, newest (by ``created``) first."""
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
        the value (``module|op|k`` for an op, ``L:<name>`` for a named leaf). `append` keeps them from the events
        it stores (`rtxviz.store.history.HistoryTracker` says how they are named and what each number is); an
        unknown run or name has none (an empty list)."""
        ...

    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...
