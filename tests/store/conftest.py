"""The store implementations the contract tests run against: SQLite today (a PostgreSQL store joins `STORES`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rtxviz.store import RunStore, SQLiteStore

#: A store factory: the same storage each call (so a second call is a restart), with the given bounds.
Opener = Callable[..., RunStore]

STORES = ["sqlite"]


@pytest.fixture(params=STORES)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[RunStore] = []

    def opener(**bounds: int) -> RunStore:
        store = SQLiteStore(str(tmp_path / "runs.db"), **bounds)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()  # closing twice is harmless


@pytest.fixture
def store(open_store: Opener) -> RunStore:
    return open_store()
