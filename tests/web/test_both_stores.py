"""The web tests' two stores are real (tests/web/conftest.py): under each parameter the app holds that store, and
what it stores is in that database for anyone who opens it another way (`db_url`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from rtxviz.store import open_store
from rtxviz.web import create_app


def test_the_app_holds_the_store_of_the_run_and_db_url_reaches_its_runs(
        store_backend: str, db_url: Callable[[str], str], tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with TestClient(create_app(db=path)) as client:
        store = client.app.state.store  # type: ignore[attr-defined]
        kind = type(store).__name__
        assert kind == {"sqlite": "SQLiteStore", "postgres": "PostgresStore"}[store_backend]
        assert store.path == db_url(path) and (store_backend == "sqlite") == (db_url(path) == path)
        r = client.post("/api/runs/r/events", content='{"v":1,"kind":"log","t":0,"step":null}',
                        headers={"Content-Type": "application/x-ndjson"})
        assert r.status_code == 200
    with TestClient(create_app(db=path)) as client:  # the same path again: the same database (a restart)
        assert client.get("/api/runs/r").json()["n_events"] == 1
    other = open_store(db_url(path), read_only=True)
    assert [run["id"] for run in other.list_runs()] == ["r"]
    other.close()
    with TestClient(create_app(db=":memory:")) as client:  # ":memory:" is a new, empty store each time
        assert client.get("/api/runs").json() == []
