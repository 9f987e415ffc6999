"""Shared dependencies: settings, store and hub from app.state, as typed `Depends` (`SettingsDep`, `StoreDep`,
`HubDep`); token and origin checks.

A route asks for what it uses by type (FastAPI's "bigger applications" style)::

    @router.get("/runs")
    async def list_runs(store: StoreDep) -> list[dict[str, Any]]:
        return await run_in_threadpool(store.list_runs, 1000)
"""

from __future__ import annotations

import hmac
import urllib.parse
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from starlette.requests import HTTPConnection

from ..store import RunStore
from .hub import Hub


@dataclass
class Settings:
    """Server options; every size and count is bounded.

    token: required on every /api request (``Authorization: Bearer T`` or ``?token=T``) when set.
    cors_origins: origins allowed to call the API from a browser page served elsewhere (default: none).
    allowed_hosts: Host headers accepted (None: any); `rtxviz serve` sets loopback names when it has no token,
    which keeps DNS-rebinding pages out.
    """

    token: str | None = None
    max_body_bytes: int = 16 * 1024 * 1024
    max_events_per_batch: int = 50_000
    max_event_bytes: int = 256 * 1024
    max_clients: int = 64
    client_queue_batches: int = 64
    max_page: int = 10_000
    cors_origins: list[str] = field(default_factory=list)
    allowed_hosts: list[str] | None = None


async def get_settings(conn: HTTPConnection) -> Settings:
    """The server's `Settings` (app.state.settings)."""
    settings: Settings = conn.app.state.settings
    return settings


async def get_store(conn: HTTPConnection) -> RunStore:
    """The server's store (app.state.store)."""
    store: RunStore = conn.app.state.store
    return store


async def get_hub(conn: HTTPConnection) -> Hub:
    """The server's hub (app.state.hub)."""
    hub: Hub = conn.app.state.hub
    return hub


# What a route declares to receive them (async dependencies: read on the event loop, no thread hop):
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[RunStore, Depends(get_store)]
HubDep = Annotated[Hub, Depends(get_hub)]


def token_ok(conn: HTTPConnection, settings: Settings) -> bool:
    """Whether the request carries the server's token (always true when the server has none).

    >>> from starlette.requests import Request
    >>> def req(query: bytes) -> Request:
    ...     return Request({"type": "http", "headers": [], "query_string": query})
    >>> token_ok(req(b"token=s3"), Settings(token="s3")), token_ok(req(b""), Settings(token="s3"))
    (True, False)
    >>> token_ok(req(b""), Settings())
    True
    """
    token = settings.token
    if not token:
        return True
    given = conn.query_params.get("token")
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def require_token(request: Request, settings: SettingsDep) -> None:
    """Dependency on every /api route: 401 without the right token."""
    if not token_ok(request, settings):
        raise HTTPException(401, "missing or wrong token: send 'Authorization: Bearer <token>' or ?token=<token>",
                            headers={"WWW-Authenticate": "Bearer"})


def origin_ok(conn: HTTPConnection, settings: Settings) -> bool:
    """Browsers send Origin on WebSocket handshakes and CORS does not apply to them: accept only pages from
    this server itself, the configured CORS origins, or non-browser clients (no Origin)."""
    origin = conn.headers.get("origin")
    if not origin:
        return True
    if origin in settings.cors_origins:
        return True
    return urllib.parse.urlsplit(origin).netloc == conn.headers.get("host", "")
