"""Where runs are kept: the `RunStore` interface and its SQLite implementation, below the server and the exports.

This package imports only the standard library (and may import `rtxviz.schema`); never the engine, the events,
render, export or web. `open_store` is the one place that turns a ``--db`` value into a store.

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
    EventRow,
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
from .sqlite import SQLiteStore

__all__ = ["RUN_FIELDS", "EventRow", "RunRecord", "RunStore", "SQLiteStore", "StepRecord", "StoreError",
           "StoreForbidden", "StoreFull", "StoreLocked", "StoreOpenError", "StoreUnavailable", "StoredEvent",
           "UserExists", "UserRecord", "default_db_path", "hash_token", "open_store"]


def default_db_path() -> str:
    """$RTXVIZ_DB, else ~/.rtxviz/runs.db."""
    return os.environ.get("RTXVIZ_DB") or str(Path.home() / ".rtxviz" / "runs.db")


def open_store(db: str, max_runs: int = 1000, max_events_per_run: int = 20_000_000,
               read_only: bool = False) -> RunStore:
    """The store behind a ``--db`` value: today always a SQLite file path (or ``":memory:"``).

    `max_runs` and `max_events_per_run` bound it (`StoreFull` past them). A writer (the server, ``rtxviz import
    --db``) holds the database for itself: a second one gets `StoreLocked`. `read_only` opens it to read beside
    a running server (export, render) and never writes it. `StoreOpenError` names the file and what to do when
    it cannot be opened.
    """
    return SQLiteStore(db, max_runs=max_runs, max_events_per_run=max_events_per_run, read_only=read_only)
