"""Every web test runs twice: on the SQLite store and on the PostgreSQL store (issue 20).

The tests make their apps with ``create_app(db=<a SQLite path or ":memory:">)``. Under the ``postgres`` parameter
the autouse `store_backend` fixture makes `create_app` open a PostgreSQL database instead: each SQLite path a
test names becomes a database of its own on the test server (tests/store/pgserver.py), the same database each
time the test names that path again (a restart), and each ``":memory:"`` a new, empty one, as in SQLite. A
``postgresql://`` URL passes through. So the tests are written once, against the API, and say nothing of stores.

The tests about SQLite itself (its files: a full disk, a damaged file) and those that start ``rtxviz serve
--db FILE`` in another process (which the substitution cannot reach) run on SQLite only: `SQLITE_ONLY` names
each with its reason. tests/web/test_workers.py runs served processes on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import rtxviz.web.app as app_module
from rtxviz.store import RunStore, is_postgres_url
from tests.store import pgserver

#: "file::test" (parameters left out) -> why it runs on SQLite only.
SQLITE_ONLY: dict[str, str] = {
    "test_server_faults.py::test_a_full_disk_is_507_with_the_reason_and_recovers":
        "fills a SQLite file to its page limit (SQLITE_FULL)",
    "test_server_faults.py::test_a_damaged_database_is_503_with_the_reason": "damages a SQLite file's pages",
    "test_ingest_chunks.py::test_a_full_disk_part_way_keeps_the_parts_stored_and_says_so":
        "fills a SQLite file to its page limit (SQLITE_FULL)",
    "test_ingest_chunks.py::test_the_emitter_counts_a_kept_part_as_sent_and_never_sends_it_again":
        "fills a SQLite file to its page limit (SQLITE_FULL)",
    "test_server_faults.py::test_a_viewer_that_goes_away_leaves_no_unretrieved_task_exception":
        "drives the hub over a SQLiteStore it makes itself",
    "test_live.py::test_server_killed_mid_run_the_loop_finishes_and_drops_are_counted":
        "starts `rtxviz serve --db FILE` in a subprocess (test_workers.py kills served workers on PostgreSQL)",
    "test_live.py::test_serve_lowers_its_own_priority": "starts `rtxviz serve --db FILE` in a subprocess",
    "test_live.py::test_serve_refuses_a_negative_nice": "a command-line check that opens no store",
    "test_accounts_load.py": "starts `rtxviz serve` processes on databases it makes itself (its PostgreSQL test "
                             "makes a PostgreSQL database of its own)",
}


def _key(item: pytest.Item) -> tuple[str, str]:
    file = item.path.name
    name = getattr(item, "originalname", item.name)
    return file, f"{file}::{name}"


def sqlite_only_reason(item: pytest.Item) -> str | None:
    file, test = _key(item)
    return SQLITE_ONLY.get(test) or SQLITE_ONLY.get(file)


class PostgresInstead:
    """`open_store` for `create_app`: SQLite paths become databases on the test server."""

    def __init__(self, server: pgserver.PgServer) -> None:
        self.server = server
        self.real = app_module.open_store
        self.databases: dict[str, str] = {}

    def __call__(self, db: str, **options: Any) -> RunStore:
        if is_postgres_url(db):
            url = db
        elif db == ":memory:":
            url = self.server.database()
        else:
            url = self.databases.get(db) or self.databases.setdefault(db, self.server.database())
        return self.real(url, **options)


@pytest.fixture(scope="module", params=["sqlite", "postgres"], autouse=True)
def store_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which store this module's tests run on now; under "postgres", `create_app` opens PostgreSQL."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    server = pgserver.server()
    if server is None:
        if pgserver.REQUIRED:
            pytest.fail(f"RTXVIZ_REQUIRE_POSTGRES=1 but {pgserver.why_not()}")
        pytest.skip(pgserver.why_not())
    with pytest.MonkeyPatch.context() as patch:
        instead = PostgresInstead(server)
        patch.setattr(app_module, "open_store", instead)
        _active.append(instead)
        try:
            yield "postgres"
        finally:
            _active.remove(instead)


_active: list[PostgresInstead] = []


@pytest.fixture
def db_url(store_backend: str) -> Callable[[str], str]:
    """What ``create_app(db=path)`` opens for `path` under the store of this run: the path itself on SQLite, its
    database's URL on PostgreSQL. For a test that reaches the same runs another way (the CLI's ``--db``, a
    second process, `rtxviz.store.open_store`)."""
    if store_backend != "postgres" or not _active:
        return lambda path: path
    instead = _active[-1]

    def url(path: str) -> str:
        if is_postgres_url(path):
            return path
        return instead.databases.get(path) or instead.databases.setdefault(path, instead.server.database())

    return url


@pytest.fixture(autouse=True)
def _sqlite_only(request: pytest.FixtureRequest, store_backend: str) -> None:
    if store_backend == "postgres":
        reason = sqlite_only_reason(request.node)
        if reason is not None:
            pytest.skip(f"SQLite only: {reason}")
