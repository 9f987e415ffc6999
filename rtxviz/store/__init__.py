"""Where runs are kept: the `RunStore` interface and its SQLite and PostgreSQL implementations, below the server and
the exports.

This package imports only the standard library (and may import `rtxviz.schema`), and psycopg in postgres.py
(imported when a ``postgresql://`` URL is opened); never the engine, the events, render, export or web.
`open_store` is the one place that turns a ``--db`` value into a store.

>>> store = open_store(":memory:")
>>> store.append("r1", None, [("run_start", None, '{"v":1,"kind":"run_start","t":0,"name":"demo"}')])
(1, ['{"seq":1,"v":1,"kind":"run_start","t":0,"name":"demo"}'])
>>> store.get_run("r1")["name"], store.has_run("r1"), store.last_seq("r1")
('demo', True, 1)
>>> store.close()
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import (
    RUN_FIELDS,
    AppendsInChunks,
    EventRow,
    Notifying,
    RunRecord,
    RunStore,
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
    hash_token,
)
from .pgurl import redact
from .sqlite import SQLiteStore

__all__ = ["RUN_FIELDS", "AppendsInChunks", "EventRow", "Notifying", "RunRecord", "RunStore", "SQLiteStore",
           "StepRecord", "StoreError", "StoreForbidden", "StoreFull", "StoreLocked", "StoreOpenError",
           "StoreUnavailable", "StoredEvent", "UserExists", "UserRecord", "default_db_path", "hash_token",
           "is_postgres_url", "open_store"]


def default_db_path() -> str:
    """$RTXVIZ_DB, else ~/.rtxviz/runs.db."""
    return os.environ.get("RTXVIZ_DB") or str(Path.home() / ".rtxviz" / "runs.db")


def is_postgres_url(db: str) -> bool:
    """Whether a ``--db`` value names a PostgreSQL database rather than a SQLite file.

    >>> is_postgres_url("postgresql://ada@db/class"), is_postgres_url("postgres://db/x")
    (True, True)
    >>> is_postgres_url("runs.db"), is_postgres_url(":memory:")
    (False, False)
    """
    return db.startswith(("postgresql://", "postgres://"))


def open_store(db: str, max_runs: int = 1000, max_events_per_run: int = 20_000_000,
               read_only: bool = False) -> RunStore:
    """The store behind a ``--db`` value: a ``postgresql://`` URL (`PostgresStore`, a class server's database,
    which several processes write), else a SQLite file path (or ``":memory:"``).

    `max_runs` and `max_events_per_run` bound it (`StoreFull` past them). A SQLite writer (the server, ``rtxviz
    import --db``) holds the file for itself: a second one gets `StoreLocked`. `read_only` opens it to read beside
    a running server (export, render) and never writes it. `StoreOpenError` names the file (or the host and
    database) and what to do when it cannot be opened.
    """
    if is_postgres_url(db):
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            raise StoreOpenError(f"--db {redact(db)} is a PostgreSQL database, which needs psycopg "
                                 f"({exc}): pip install 'rtxviz[postgres]'") from None
        return PostgresStore(db, max_runs=max_runs, max_events_per_run=max_events_per_run, read_only=read_only)
    return SQLiteStore(db, max_runs=max_runs, max_events_per_run=max_events_per_run, read_only=read_only)
