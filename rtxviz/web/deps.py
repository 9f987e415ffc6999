"""Shared dependencies: settings, store and hub from app.state; token and origin checks."""

from __future__ import annotations

import hmac
import urllib.parse
from dataclasses import dataclass, field

from fastapi import HTTPException, Request
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


def settings_of(conn: HTTPConnection) -> Settings:
    return conn.app.state.settings


def store_of(conn: HTTPConnection) -> RunStore:
    return conn.app.state.store


def hub_of(conn: HTTPConnection) -> Hub:
    return conn.app.state.hub


def token_ok(conn: HTTPConnection) -> bool:
    """Whether the request carries the server's token (always true when the server has none)."""
    token = settings_of(conn).token
    if not token:
        return True
    given = conn.query_params.get("token")
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def require_token(request: Request) -> None:
    """Dependency on every /api route: 401 without the right token."""
    if not token_ok(request):
        raise HTTPException(401, "missing or wrong token: send 'Authorization: Bearer <token>' or ?token=<token>",
                            headers={"WWW-Authenticate": "Bearer"})


def origin_ok(conn: HTTPConnection) -> bool:
    """Browsers send Origin on WebSocket handshakes and CORS does not apply to them: accept only pages from
    this server itself, the configured CORS origins, or non-browser clients (no Origin)."""
    origin = conn.headers.get("origin")
    if not origin:
        return True
    if origin in settings_of(conn).cors_origins:
        return True
    return urllib.parse.urlsplit(origin).netloc == conn.headers.get("host", "")
