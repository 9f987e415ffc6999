"""Shared dependencies: settings, store and hub from app.state, as typed `Depends` (`SettingsDep`, `StoreDep`,
`HubDep`); who asks (`PrincipalDep`: the admin, a teacher or a student) and origin checks.

A route asks for what it uses by type (FastAPI's "bigger applications" style)::

    @router.get("/runs")
    async def list_runs(store: StoreDep) -> list[dict[str, Any]]:
        return await run_in_threadpool(store.list_runs, 1000)
"""

from __future__ import annotations

import asyncio
import hmac
import urllib.parse
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from ..store import RunStore, hash_token
from .hub import Hub


@dataclass
class Settings:
    """Server options; every size and count is bounded.

    token: the admin's (the teacher's) token, required on every /api request (``Authorization: Bearer T`` or
    ``?token=T``) when set; users added with ``rtxviz users add`` bring their own tokens (`Accounts`).
    cors_origins: origins allowed to call the API from a browser page served elsewhere (default: none).
    allowed_hosts: Host headers accepted (None: any); `rtxviz serve` sets loopback names when it has no token,
    which keeps DNS-rebinding pages out.
    """

    token: str | None = None
    max_body_bytes: int = 16 * 1024 * 1024
    max_events_per_batch: int = 50_000
    max_event_bytes: int = 256 * 1024
    #: a batch over this many events is stored and shown in parts of this size (issue 15; the emitter's batches
    #: are at most 2,000 events, so only larger posts, an import or a burst, are split)
    ingest_chunk_events: int = 2000
    #: at most this many posts are parsed and stored at once; the others wait their turn, first come first served.
    #: Every post beyond two only adds threads trading the GIL (the store takes one batch at a time anyway):
    #: 4 producers unbounded against 2 slots, 6 rounds alternating, 133k -> 143k events/s, p99 116 -> 109 ms,
    #: server CPU 7.2 -> 6.4 us/event (benchmarks/README.md, ninth session)
    ingest_concurrency: int = 2
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


async def get_ingest_slots(conn: HTTPConnection) -> asyncio.Semaphore:
    """The posts allowed to parse and store at once (app.state.ingest_slots: `Settings.ingest_concurrency`)."""
    slots: asyncio.Semaphore = conn.app.state.ingest_slots
    return slots


# What a route declares to receive them (async dependencies: read on the event loop, no thread hop):
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[RunStore, Depends(get_store)]
HubDep = Annotated[Hub, Depends(get_hub)]
IngestSlotsDep = Annotated[asyncio.Semaphore, Depends(get_ingest_slots)]


@dataclass(frozen=True)
class Principal:
    """Who a request is: the server's admin (its ``--token``, or anyone on a server without accounts), a teacher
    (a user added with ``--teacher``) or a student. `name` is None for the admin; runs a user creates are owned
    by their name.

    >>> alice = Principal("alice")
    >>> alice.may_read({"owner": "alice"}), alice.may_read({"owner": "bob"}), alice.may_read({"owner": None})
    (True, False, False)
    >>> ADMIN.may_read({"owner": "bob"}), Principal("t", teacher=True).sees_owner
    (True, None)
    """

    name: str | None
    teacher: bool = False

    @property
    def reads_all(self) -> bool:
        """The admin and teachers read every run; a student only their own."""
        return self.name is None or self.teacher

    @property
    def sees_owner(self) -> str | None:
        """Whose runs this principal may read: None for every run, else the student's name (`list_runs`' owner)."""
        return None if self.reads_all else self.name

    def may_read(self, run: dict[str, Any]) -> bool:
        """Whether this principal may see run `run` (a `RunRecord`)."""
        return self.reads_all or run.get("owner") == self.name


#: The admin token's principal, and everyone's on a server without token and accounts (one user, loopback).
ADMIN = Principal(None, teacher=True)

_AUTH_HELP = "send 'Authorization: Bearer <token>' or ?token=<token>"


def given_token(conn: HTTPConnection) -> str | None:
    """The token a request carries: ``Authorization: Bearer T`` (preferred), else ``?token=T``.

    >>> from starlette.requests import Request
    >>> req = Request({"type": "http", "headers": [(b"authorization", b"Bearer h1")], "query_string": b"token=q"})
    >>> given_token(req)
    'h1'
    """
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return conn.query_params.get("token")


class Accounts:
    """Turns a request's token into its `Principal`: the admin token is compared in constant time; any other is
    looked up by its hash (`hash_token`) in the store. Users are only ever added, never changed, so a user found
    once is remembered (no database round trip on every request); a token not found is asked again next time
    (the user may have been added since).
    """

    #: Remembered users at most (a class is tens to hundreds); past it, lookups go to the store each time.
    MAX_CACHED = 10_000

    def __init__(self, store: RunStore, admin_token: str | None, has_users: bool) -> None:
        self.store = store
        self.admin_token = admin_token
        self.has_users = has_users
        self._known: dict[str, Principal] = {}

    async def principal(self, conn: HTTPConnection) -> Principal | None:
        """The request's principal, or None when it must be refused (no token, or one nobody has)."""
        if not self.admin_token and not self.has_users:
            return ADMIN  # a server without token and accounts: one user, as before accounts existed
        token = given_token(conn)
        if not token:
            return None
        if self.admin_token and hmac.compare_digest(token.encode(), self.admin_token.encode()):
            return ADMIN
        digest = hash_token(token)
        known = self._known.get(digest)
        if known is not None:
            return known
        user = await run_in_threadpool(self.store.find_user, digest)
        if user is None:
            return None
        found = Principal(str(user["name"]), teacher=bool(user["teacher"]))
        if len(self._known) < self.MAX_CACHED:
            self._known[digest] = found
        return found


async def get_accounts(conn: HTTPConnection) -> Accounts:
    """The server's `Accounts` (app.state.accounts)."""
    accounts: Accounts = conn.app.state.accounts
    return accounts


AccountsDep = Annotated[Accounts, Depends(get_accounts)]


async def get_principal(request: Request, accounts: AccountsDep) -> Principal:
    """Dependency of every /api route: who is asking; 401 without a token the server knows."""
    who = await accounts.principal(request)
    if who is None:
        raise HTTPException(401, f"missing or wrong token: {_AUTH_HELP}", headers={"WWW-Authenticate": "Bearer"})
    return who


#: What a route declares to know who asks.
PrincipalDep = Annotated[Principal, Depends(get_principal)]


def origin_ok(conn: HTTPConnection, settings: Settings) -> bool:
    """Browsers send Origin on WebSocket handshakes and CORS does not apply to them: accept only pages from
    this server itself, the configured CORS origins, or non-browser clients (no Origin)."""
    origin = conn.headers.get("origin")
    if not origin:
        return True
    if origin in settings.cors_origins:
        return True
    return urllib.parse.urlsplit(origin).netloc == conn.headers.get("host", "")
