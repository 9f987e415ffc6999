"""create_app: the FastAPI application (FastAPI's "bigger applications" layout: routers under routers/).

/api/...        ingest, runs, WebSockets (token-checked when a token is set)
/docs           the API reference
/               the viewer: static files from rtxviz/web/static/ (when that folder exists)

>>> from fastapi.testclient import TestClient
>>> with TestClient(create_app(db=":memory:")) as client:
...     client.get("/api/runs").json()
[]
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from .. import __version__
from .deps import Settings, require_token
from .hub import Hub
from .routers import ingest, runs, ws
from .store import Store

STATIC_DIR = Path(__file__).parent / "static"


def default_db_path() -> str:
    """$RTXVIZ_DB, else ~/.rtxviz/runs.db."""
    return os.environ.get("RTXVIZ_DB") or str(Path.home() / ".rtxviz" / "runs.db")


def create_app(db: str | None = None, settings: Settings | None = None, static_dir: str | Path | None = None,
               **options: Any) -> FastAPI:
    """Build the server app. `db`: SQLite path (``":memory:"`` for a throwaway store); `settings` or keyword
    options (token=..., max_body_bytes=..., see `Settings`)."""
    s = settings or Settings(**options)
    store = Store(db or default_db_path())

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        yield
        store.close()

    app = FastAPI(title="rtxviz", version=__version__, lifespan=lifespan)
    app.state.settings = s
    app.state.store = store
    app.state.hub = Hub(store, max_clients=s.max_clients, queue_batches=s.client_queue_batches)

    auth = [Depends(require_token)]
    app.include_router(ingest.router, prefix="/api", dependencies=auth)
    app.include_router(runs.router, prefix="/api", dependencies=auth)
    app.include_router(ws.router, prefix="/api")  # WebSockets check the token themselves (no headers in browsers)

    if s.cors_origins:  # closed unless origins are named
        app.add_middleware(CORSMiddleware, allow_origins=list(s.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    if s.allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(s.allowed_hosts))

    folder = Path(static_dir) if static_dir is not None else STATIC_DIR
    if folder.is_dir():
        app.mount("/", StaticFiles(directory=folder, html=True), name="static")
    return app
