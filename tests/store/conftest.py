"""The store implementations the contract tests run against: SQLite, and PostgreSQL on the test server of
pgserver.py (a database of its own per test; skipped without PostgreSQL unless RTXVIZ_REQUIRE_POSTGRES=1)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rtxviz.store import RunStore, SQLiteStore

from . import pgserver

#: A store factory: the same storage each call (so a second call is a restart), with the given bounds.
Opener = Callable[..., RunStore]

STORES = ["sqlite", "postgres"]


def postgres_url() -> str:
    """A new database on the test server, or skip (fail when PostgreSQL is required)."""
    server = pgserver.server()
    if server is None:
        if pgserver.REQUIRED:
            pytest.fail(f"RTXVIZ_REQUIRE_POSTGRES=1 but {pgserver.why_not()}")
        pytest.skip(pgserver.why_not())
    return server.database()


@pytest.fixture(params=STORES)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[RunStore] = []
    url = postgres_url() if request.param == "postgres" else None

    def opener(**bounds: int) -> RunStore:
        store: RunStore
        if url is not None:
            from rtxviz.store.postgres import PostgresStore

            store = PostgresStore(url, **bounds)
        else:
            store = SQLiteStore(str(tmp_path / "runs.db"), **bounds)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()  # closing twice is harmless


@pytest.fixture
def store(open_store: Opener) -> RunStore:
    return open_store()
