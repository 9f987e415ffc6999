"""create_app: the FastAPI application (FastAPI's "bigger applications" layout: routers under routers/).

/api/...        ingest, runs, WebSockets (token-checked when a token is set; scoped to a student's own runs when
                the token is a student's, see deps.Accounts)
/docs           the API reference
/               the viewer: static files from rtxviz/web/static/ (when that folder exists)

>>> from fastapi.testclient import TestClient
>>> with TestClient(create_app(db=":memory:")) as client:
...     client.get("/api/runs").json()
[]
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, PlainTextResponse

from .._version import __version__
from ..store import (
    Notifying,
    RunStore,
    StoreError,
    StoreForbidden,
    StoreFull,
    StoreUnavailable,
    default_db_path,
    open_store,
)
from .deps import Accounts, Settings, get_principal
from .hub import Hub
from .routers import history, ingest, runs, ws

STATIC_DIR = Path(__file__).parent / "static"


class AccountsNeedToken(ValueError):
    """The database has user accounts but the server was given no admin token: refused at start."""


def check_accounts(path: str, users: list[dict[str, Any]], token: str | None) -> None:
    """Refuse a server whose database has accounts but which has no admin token of its own: without a token every
    request is the admin's, so any student could read every run while believing the accounts protect them.

    >>> check_accounts("class.db", [], None)
    >>> check_accounts("class.db", [{"name": "ada"}], "t0ken")
    >>> check_accounts("class.db", [{"name": "ada"}, {"name": "bo"}], None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rtxviz.web.app.AccountsNeedToken: class.db has 2 user accounts (ada, bo) but the server has no --token: ...
    """
    if users and not token:
        names = ", ".join(str(u["name"]) for u in users[:5]) + (", ..." if len(users) > 5 else "")
        raise AccountsNeedToken(
            f"{path} has {len(users)} user account{'s' if len(users) != 1 else ''} ({names}) but the server has "
            "no --token: without one every request would read and write every student's runs. Start it with "
            "--token T (the teacher's admin token, or $RTXVIZ_TOKEN), or serve another --db")


def host_name(host_header: str) -> str:
    """The host part of a Host header: 'localhost:8000' -> 'localhost', '[::1]:8000' -> '::1'.

    >>> host_name("[::1]:8000"), host_name("127.0.0.1:80"), host_name("localhost")
    ('::1', '127.0.0.1', 'localhost')
    """
    if host_header.startswith("["):
        return host_header[1:host_header.find("]")] if "]" in host_header else ""
    return host_header.rsplit(":", 1)[0]


class HostCheck:
    """Refuse requests whose Host header names another host (a DNS-rebinding page): Starlette's
    TrustedHostMiddleware cannot read IPv6 literals such as ``[::1]:8000``, this one can."""

    def __init__(self, app: Any, allowed_hosts: list[str]) -> None:
        self.app = app
        self.allowed = frozenset(allowed_hosts)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            name = host_name(Headers(scope=scope).get("host", ""))
            if name not in self.allowed:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": "invalid host"})
                    return
                await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _listen(store: Notifying, hub: Hub) -> Callable[[], None]:
    """Hand the ranges other server processes commit to this one's hub (fan-out across workers); returns the
    function that stops it. The store calls back from its own thread: each range hops onto the event loop,
    where the hub lives, in the order it came."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task] = set()

    async def announce(run_id: str) -> None:  # a run appeared or changed in another process: tell the lobby
        run = await asyncio.to_thread(cast(RunStore, store).get_run, run_id)
        if run is not None:
            hub.publish_run(run)

    def on_loop(run_id: str, first: int, last: int, changed: bool) -> None:
        hub.notified(run_id, first, last)
        if changed:
            task = loop.create_task(announce(run_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def from_thread(run_id: str, first: int, last: int, changed: bool) -> None:
        try:
            loop.call_soon_threadsafe(on_loop, run_id, first, last, changed)
        except RuntimeError:  # the loop has closed: the server is stopping
            pass

    def reconnected() -> None:  # ranges committed while the store was not listening: read them from the store
        try:
            loop.call_soon_threadsafe(hub.resync)
        except RuntimeError:
            pass

    return store.listen(from_thread, reconnected)


def _store_error(exc: StoreError) -> dict[str, Any]:
    """A 507/503 answer: the reason, and how many of the batch's events were stored before the failure (a large
    batch is stored in parts, routers/ingest.py): ``stored`` events from ``first_seq`` on are kept (and shown), so a
    client that sends the batch again sends only its events after the first ``stored`` (docs/server.md)."""
    if not exc.stored:
        return {"detail": str(exc), "stored": 0}
    return {"detail": str(exc), "stored": exc.stored, "first_seq": exc.first_seq}


#: How `request_errors_text` names where a fault is, by the first item of pydantic's `loc`.
_PLACES = {"query": "query parameter", "path": "path parameter", "header": "header", "cookie": "cookie",
           "body": "body field"}


def request_errors_text(errors: Sequence[Any]) -> str:
    """FastAPI's validation errors (``RequestValidationError.errors()``) as one sentence: where (the parameter or
    body field), what was expected, and the value when it is a plain one; at most five, then how many more.

    >>> request_errors_text([{"loc": ("query", "dropped"), "msg": "Input should be greater than or equal to 0",
    ...                       "input": "-1"}, {"loc": ("body",), "msg": "Field required", "input": None}])
    "query parameter 'dropped': Input should be greater than or equal to 0, got '-1'; body: Field required"
    >>> request_errors_text([{"type": "json_invalid", "loc": ("body", 1), "msg": "JSON decode error", "input": {},
    ...                       "ctx": {"error": "Expecting property name enclosed in double quotes"}}])
    'the body, at character 1: JSON decode error (Expecting property name enclosed in double quotes)'
    """
    parts = []
    for err in errors[:5]:
        loc = [str(p) for p in err.get("loc", ())]
        if err.get("type") == "json_invalid":  # its loc is ("body", the character where decoding stopped)
            why = (err.get("ctx") or {}).get("error")
            parts.append(f"the body, at character {loc[-1]}: {err.get('msg')}" + (f" ({why})" if why else ""))
            continue
        where = f"{_PLACES.get(loc[0], loc[0])} {'.'.join(loc[1:])!r}" if len(loc) > 1 else (loc or ["request"])[0]
        value = err.get("input")
        got = f", got {value!r:.40}" if type(value) in (int, float, str, bool) else ""
        parts.append(f"{where}: {err.get('msg', 'invalid')}{got}")
    if len(errors) > 5:
        parts.append(f"... and {len(errors) - 5} more error(s)")
    return "; ".join(parts)


def unprocessable(detail: str, errors: list[Any]) -> JSONResponse:
    """A 422 in the one shape every 422 has (docs/server.md): ``detail``, a sentence naming the field and what was
    expected; ``errors``, the structured list (pydantic's ``loc``/``msg``/``type``, or one entry for an event
    batch the schema refuses)."""
    return JSONResponse({"detail": detail, "errors": errors}, status_code=422)


def create_app(db: str | None = None, settings: Settings | None = None, static_dir: str | Path | None = None,
               routers: Sequence[APIRouter] = (), **options: Any) -> FastAPI:
    """Build the server app. `db`: SQLite path (``":memory:"`` for a throwaway store) or a ``postgresql://``
    URL (several server processes may share it: each one's viewers see every one's events); `settings` or keyword
    options (token=..., max_body_bytes=..., see `Settings`); `routers`: more routes under /api, token-checked like
    the rest (the process that serves adds what it does itself: `rtxviz lesson`'s runner). Raises
    `rtxviz.store.StoreOpenError` (naming the file and what to do) when the database cannot be opened,
    `StoreLocked` when another process writes it.

    Store failures while serving are answered with their reason: 507 when full (a bound, or the disk), 503 when
    the database cannot be used (damaged, I/O error, connection lost), 403 when a student posts to another's run.
    Raises `AccountsNeedToken` when the database has user accounts and `settings` no token."""
    s = settings or Settings(**options)
    if s.ingest_concurrency < 1:
        raise ValueError(f"create_app: ingest_concurrency must be >= 1 (posts parsed and stored at once), got "
                         f"{s.ingest_concurrency}")
    store = open_store(db or default_db_path())
    try:
        users = store.list_users()
        check_accounts(store.path, users, s.token)
    except BaseException:
        store.close()
        raise
    hub = Hub(store, max_clients=s.max_clients, queue_batches=s.client_queue_batches)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = _listen(store, hub) if isinstance(store, Notifying) else None
        try:
            yield
        finally:
            if stop is not None:
                stop()
            store.close()

    app = FastAPI(title="rtxviz", version=__version__, lifespan=lifespan)
    app.state.settings = s
    app.state.store = store
    app.state.accounts = Accounts(store, s.token, has_users=bool(users))
    app.state.hub = hub
    app.state.ingest_slots = asyncio.Semaphore(s.ingest_concurrency)  # FIFO: posts are taken in arrival order

    @app.exception_handler(StoreFull)
    async def store_full(request: Request, exc: StoreFull) -> JSONResponse:
        # 507 Insufficient Storage: a bound, or the disk; the same request succeeds once there is room
        return JSONResponse(_store_error(exc), status_code=507)

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
        return JSONResponse(_store_error(exc), status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(StoreForbidden)
    async def store_forbidden(request: Request, exc: StoreForbidden) -> JSONResponse:
        # a student posting into another student's run (reads of it answer 404 instead: see routers/runs.py). Our
        # own words, not the store's: its message may name the run's owner, which a student must not learn
        run_id = request.path_params.get("run_id", "?")
        return JSONResponse({"detail": f"run {run_id!r} belongs to another user: post to a run of your own (watch() "
                                       "picks a fresh run id unless run_id= is given)"}, status_code=403)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer has `detail` as a list of {loc, msg}; ours a sentence: one shape for every 422
        errors = exc.errors()
        return unprocessable(request_errors_text(errors), jsonable_encoder(errors))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Any:
        if exc.status_code == 422 and isinstance(exc.detail, str):  # a batch the schema refuses (routers/ingest.py)
            return unprocessable(exc.detail, [{"loc": ["body"], "msg": exc.detail, "type": "event_error"}])
        return await http_exception_handler(request, exc)

    auth = [Depends(get_principal)]
    app.include_router(ingest.router, prefix="/api", dependencies=auth)
    app.include_router(runs.router, prefix="/api", dependencies=auth)
    app.include_router(history.router, prefix="/api", dependencies=auth)
    app.include_router(ws.router, prefix="/api")  # WebSockets check the token themselves (no headers in browsers)
    for extra in routers:  # before the static mount at "/", which would answer every path
        app.include_router(extra, prefix="/api", dependencies=auth)

    if s.cors_origins:  # closed unless origins are named
        app.add_middleware(CORSMiddleware, allow_origins=list(s.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    if s.allowed_hosts:
        app.add_middleware(HostCheck, allowed_hosts=list(s.allowed_hosts))

    folder = Path(static_dir) if static_dir is not None else STATIC_DIR
    if folder.is_dir():
        app.mount("/", StaticFiles(directory=folder, html=True), name="static")
    return app
