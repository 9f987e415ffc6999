"""The schema's history: one list of numbered migrations that both stores (SQLite, PostgreSQL) apply in order.

A database records the number of the last migration it has in a one-row table ``schema_version``. A writer that
opens it applies the ones it lacks, all in one transaction (SQLite and PostgreSQL both roll back DDL), so a
database made by older code upgrades in place; a database whose number is higher than `LATEST` was made by newer
code, and is refused (`too_new`) rather than written with a schema this code does not know.

A database made before versioning (the SQLite schema of migration 1, no ``schema_version`` table) counts as
version 0: migration 1 creates its tables only where missing, so it is a no-op there and migration 2 follows.

Each migration holds per-dialect statements where the dialects differ (types: SQLite's INTEGER and REAL against
PostgreSQL's BIGINT and DOUBLE PRECISION; SQLite's rowid against a BIGSERIAL for the order users were added).

>>> [m.version for m in MIGRATIONS], LATEST
([1, 2, 3, 4], 4)
>>> [m.version for m in pending(1)]
[2, 3, 4]
>>> statements(MIGRATIONS[1], "sqlite")[0]
'ALTER TABLE runs ADD COLUMN owner TEXT'
>>> str(too_new(5, "runs.db")).split(":")[0]
'runs.db has schema version 5, newer than this rtxviz knows (4)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .base import StoreOpenError

Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its number, what it does, and its statements in each dialect."""

    version: int
    description: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1, "runs and their events (the schema before versioning)",
        sqlite=(
            "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, name TEXT NOT NULL, created REAL NOT NULL, "
            "updated REAL NOT NULL, status TEXT NOT NULL DEFAULT 'running', meta TEXT NOT NULL DEFAULT '{}', "
            "n_events INTEGER NOT NULL DEFAULT 0, dropped INTEGER NOT NULL DEFAULT 0, last_step INTEGER)",
            "CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, "
            "step INTEGER, body TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS events_kind ON events (run_id, kind, seq)",
        ),
        postgres=(
            "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
            "created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL, "
            "status TEXT NOT NULL DEFAULT 'running', meta TEXT NOT NULL DEFAULT '{}', "
            "n_events BIGINT NOT NULL DEFAULT 0, dropped BIGINT NOT NULL DEFAULT 0, last_step BIGINT)",
            "CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, "
            "step BIGINT, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))",
            "CREATE INDEX IF NOT EXISTS events_kind ON events (run_id, kind, seq)",
        ),
    ),
    Migration(
        2, "accounts: a run's owner, and the users (by their token's hash)",
        sqlite=(
            "ALTER TABLE runs ADD COLUMN owner TEXT",
            "CREATE INDEX runs_owner ON runs (owner, created)",
            # id INTEGER PRIMARY KEY is the rowid: the order users were added
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
            "token_hash TEXT NOT NULL UNIQUE, teacher INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL)",
        ),
        postgres=(
            "ALTER TABLE runs ADD COLUMN owner TEXT",
            "CREATE INDEX runs_owner ON runs (owner, created)",
            "CREATE TABLE users (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
            "token_hash TEXT NOT NULL UNIQUE, teacher BOOLEAN NOT NULL DEFAULT FALSE, "
            "created DOUBLE PRECISION NOT NULL)",
        ),
    ),
    Migration(
        3, "the per-step history: a value's name once per run, one row per value and step (history.py)",
        sqlite=(
            # IF NOT EXISTS: a file from the debug-history branch before migrations has them already
            "CREATE TABLE IF NOT EXISTS history_names (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, "
            "name TEXT NOT NULL, UNIQUE (run_id, name))",
            "CREATE TABLE IF NOT EXISTS history (name_id INTEGER NOT NULL, step INTEGER NOT NULL, grad_norm REAL, "
            "update_ratio REAL, nonfinite INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (name_id, step)) WITHOUT ROWID",
        ),
        postgres=(
            "CREATE TABLE IF NOT EXISTS history_names (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, "
            "name TEXT NOT NULL, UNIQUE (run_id, name))",
            "CREATE TABLE IF NOT EXISTS history (name_id BIGINT NOT NULL, step BIGINT NOT NULL, "
            "grad_norm DOUBLE PRECISION, update_ratio DOUBLE PRECISION, nonfinite SMALLINT NOT NULL DEFAULT 0, "
            "PRIMARY KEY (name_id, step))",
        ),
    ),
    Migration(
        4, "SQLite: a row of `events` may hold a run of events of one kind and step (sqlite.py, `pack_rows`); "
        "the history is made when it is read, up to ``runs.history_seq``",
        # a version-3 file reads the same (a row of one event is a run of one), but rtxviz before version 4 would
        # read a packed row as one malformed event: the number tells it to refuse the file. A run with history
        # rows had them made as its events were stored (version 3): all its events are taken in already. One
        # without (stored before version 3, or with no value to name) is read from its first event when its
        # history is first asked for
        sqlite=(
            "ALTER TABLE runs ADD COLUMN history_seq INTEGER NOT NULL DEFAULT 0",
            "UPDATE runs SET history_seq = (SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = runs.id) "
            "WHERE EXISTS (SELECT 1 FROM history_names WHERE history_names.run_id = runs.id)",
        ),
        # PostgreSQL's store makes the history as it stores the events (several processes write a run): nothing
        # changes there, but the number is shared, so an rtxviz before version 4 refuses such a database too
        postgres=(),
    ),
)

#: The schema version this code writes and reads.
LATEST = MIGRATIONS[-1].version

#: Creates the table that records the version (both dialects).
VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"


def pending(current: int) -> list[Migration]:
    """The migrations a database at version `current` lacks, in order."""
    return [m for m in MIGRATIONS if m.version > current]


def statements(migration: Migration, dialect: Dialect) -> tuple[str, ...]:
    """The migration's statements in `dialect`."""
    return migration.sqlite if dialect == "sqlite" else migration.postgres


def too_new(version: int, where: str) -> StoreOpenError:
    """The error for a database at a version this code does not know."""
    return StoreOpenError(f"{where} has schema version {version}, newer than this rtxviz knows ({LATEST}): it was "
                          "written by a newer rtxviz. Upgrade rtxviz (pip install -U rtxviz), or pass --db with "
                          "another database")


def check_user_name(name: object) -> str:
    """A user name as `add_user` takes it: 1-64 characters of ``[A-Za-z0-9_.-]``; ValueError otherwise.

    >>> check_user_name("ada.l-1")
    'ada.l-1'
    >>> check_user_name("a b")
    Traceback (most recent call last):
    ...
    ValueError: user name must be 1-64 characters of A-Z a-z 0-9 _ . -, got 'a b'
    """
    if not isinstance(name, str) or re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name) is None:
        raise ValueError(f"user name must be 1-64 characters of A-Z a-z 0-9 _ . -, got {name!r:.80}")
    return name
