"""Routers receive settings, store and hub through typed `Depends`, so a test (or another store) can stand in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

import rtxviz.web.routers as routers
from rtxviz.store import RunStore, SQLiteStore
from rtxviz.web import create_app
from rtxviz.web.deps import get_store


def test_a_dependency_override_replaces_the_store_in_every_route() -> None:
    other = SQLiteStore(":memory:")
    other.append("elsewhere", "from the override", [])
    app = create_app(db=":memory:")

    def override() -> RunStore:
        return other

    app.dependency_overrides[get_store] = override
    with TestClient(app) as client:
        runs: list[dict[str, Any]] = client.get("/api/runs").json()
        assert [r["name"] for r in runs] == ["from the override"]
        assert client.get("/api/runs/elsewhere").json()["id"] == "elsewhere"
        with client.websocket_connect("/api/ws") as ws:
            assert "elsewhere" in ws.receive_text()
    other.close()


def test_no_router_reads_app_state_by_hand() -> None:
    folder = Path(routers.__file__).parent
    for path in sorted(folder.glob("*.py")):
        assert "app.state" not in path.read_text(), f"{path.name}: declare a dependency from web/deps.py instead"
