"""`rtxviz serve`: the viewer server (events in, runs stored, live WebSocket streams), loopback unless a token is set.

>>> from rtxviz.cli import build_parser
>>> args = build_parser().parse_args(["serve", "--port", "0"])
>>> (args.host, args.port, args.nice)
('127.0.0.1', 0, 10)
"""

from __future__ import annotations

import argparse
import errno
import gc
import ipaddress
import os
import socket
import sys
import urllib.parse
from typing import TYPE_CHECKING, Any

from ..store import default_db_path
from ..store.pgurl import redact
from .registry import command, database

if TYPE_CHECKING:  # uvicorn is imported when a server starts, not for every `rtxviz` command
    import uvicorn

#: Seconds a client has to send a whole request (rtxviz.web.protocol.DEFAULT_REQUEST_TIMEOUT, repeated here so
#: that building the parser imports no server code).
DEFAULT_REQUEST_TIMEOUT = 30.0


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'.

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0"), is_loopback("localhost")
    (True, True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def port_number(text: str) -> int:
    """argparse type for --port: an integer from 0 (pick a free one) to 65535.

    >>> port_number("8000")
    8000
    >>> port_number("70000")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be from 0 to 65535 (0 picks a free port), got 70000
    """
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 65535, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535 (0 picks a free port), got {port}")
    return port


def worker_count(text: str) -> int:
    """argparse type for --workers: 1 to 64.

    >>> worker_count("4")
    4
    >>> worker_count("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be from 1 to 64, got 0
    """
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number from 1 to 64, got {text!r}") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"must be from 1 to 64, got {n}")
    return n


def cors_origin(text: str) -> str:
    """argparse type for --cors-origin: an origin as a browser sends it, ``scheme://host[:port]`` (lower case, no
    path, no trailing slash), or ``*``. The server compares the Origin header with these strings: one written
    ``http://localhost:3000/`` never matched, and the page was refused with no word why.

    >>> cors_origin("HTTP://LocalHost:3000"), cors_origin("*")
    ('http://localhost:3000', '*')
    >>> cors_origin("http://localhost:3000/")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: an origin is scheme://host[:port] as browsers send it, ..., got 'http://localhost:3000/'
    """
    if text == "*":
        return text
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError for a port that is no number from 0 to 65535)
        ok = bool(parts.scheme and parts.hostname) and not (parts.path or parts.query or parts.fragment
                                                            or "@" in parts.netloc)
    except ValueError:  # a port that is no number from 0 to 65535
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError("an origin is scheme://host[:port] as browsers send it, with no path and "
                                         f"no trailing slash (e.g. http://localhost:3000), got {text!r}")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening socket for `host`:`port` (raises OSError when it cannot be bound).

    Made with proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only when the socket
    says it is TCP, and without it every keep-alive request waits ~40 ms for Nagle's algorithm against the
    client's delayed ACK (issue 17.6: 44 ms against 0.5 ms a request, 26k against 80k events/s from one emitter).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    return sock


def bind_error(host: str, port: int, exc: OSError) -> str:
    """What to say when the port cannot be had."""
    if exc.errno == errno.EADDRINUSE:
        return (f"rtxviz serve: port {port} on {host} is already in use (another rtxviz serve, or another "
                f"program: `ss -ltnp 'sport = :{port}'` names it); pick another with --port N (make demo PORT=N), "
                "or --port 0 for any free one")
    return f"rtxviz serve: cannot bind {host}:{port}: {exc}"


#: What uvicorn takes for its log level (its LOG_LEVELS; another word raised a KeyError after "serving on").
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def uvicorn_config(app: Any, log_level: str = "warning",
                   request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> uvicorn.Config:
    """The uvicorn configuration `rtxviz serve` runs (benchmarks and tests build the same)."""
    import uvicorn

    from ..web.protocol import with_request_timeout

    # no per-message deflate: compressing every batch for a viewer on the same machine costs more CPU than
    # validating and storing it; the httptools protocol (C parsing) with a bound on how long a request may take to
    # arrive (slowloris: uvicorn alone never closes a connection that sent half a request)
    return uvicorn.Config(app, log_level=log_level, ws="websockets-sansio", ws_max_size=1 << 20,
                          ws_per_message_deflate=False, http=with_request_timeout(request_timeout),
                          timeout_keep_alive=5)


#: The collector's first threshold while serving (CPython's default is 700 allocations).
SERVE_GC_THRESHOLD = 10_000


def tune_gc_for_serving() -> None:
    """Collect garbage less often in the server process: freeze what start-up made, then raise the first threshold.

    Ingest builds about 20 containers per event (the decoded event, pydantic's validated copy), alive until the
    batch is stored: at the default threshold of 700 a 2,000-event batch sets off ~60 young collections, and their
    survivors promote into older generations that are scanned again and again. That was about 40% of the ingest
    CPU (benchmarks/README.md, server section). The events hold no reference cycles (JSON values), so reference
    counting frees them either way; the collector is still there for the cycles asyncio and tracebacks make.
    `rtxviz serve` only: an app embedded in another process (a notebook) leaves that process's collector alone.

    >>> import gc
    >>> saved = gc.get_threshold()
    >>> tune_gc_for_serving()
    >>> gc.get_threshold()[0] == SERVE_GC_THRESHOLD and gc.get_freeze_count() > 0
    True
    >>> gc.unfreeze(); gc.set_threshold(*saved)
    """
    gc.collect()  # what start-up left as garbage goes now, not into the permanent generation
    gc.freeze()  # the modules, the app and its routes: never scanned again by a collection
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(SERVE_GC_THRESHOLD, gen1, gen2)


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1; anything else "
                                                       "needs --token)")
    p.add_argument("--port", type=port_number, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--db", type=database, default=None,
                   help="where runs are kept: a SQLite file (default $RTXVIZ_DB or ~/.rtxviz/runs.db) or a "
                        "postgresql://user@host/db URL (a class server; several --workers)")
    p.add_argument("--workers", type=worker_count, default=1, metavar="N",
                   help="server processes accepting on the one port (default 1; more than 1 needs a "
                        "postgresql:// --db: a SQLite file has one writer)")
    p.add_argument("--token", default=os.environ.get("RTXVIZ_TOKEN"),
                   help="require this token on every request (default $RTXVIZ_TOKEN)")
    p.add_argument("--cors-origin", type=cors_origin, action="append", default=[], metavar="ORIGIN",
                   help="allow a browser page from ORIGIN (scheme://host[:port], e.g. http://localhost:3000) to use "
                        "the API (repeatable; default none)")
    p.add_argument("--log-level", default="warning", type=str.lower, choices=LOG_LEVELS, metavar="LEVEL",
                   help=f"uvicorn log level: {', '.join(LOG_LEVELS)} (default warning)")
    p.add_argument("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT, metavar="S",
                   help=f"close a connection whose request has not fully arrived S seconds after it opened or "
                        f"its previous response went out (default {DEFAULT_REQUEST_TIMEOUT:g})")
    p.add_argument("--nice", type=int, default=10, metavar="N",
                   help="lower the server's CPU priority by N (default 10; 0 keeps it; POSIX): on a machine that "
                        "also trains, the training loop gets the cores first and the server takes what is idle")


@command("serve", "run the viewer server (events in, runs stored, live WebSocket streams)", _serve_args)
def serve(args: argparse.Namespace) -> int:
    from ..store import StoreError, is_postgres_url, open_store
    from ..web import Settings, create_app
    from ..web.app import AccountsNeedToken, check_accounts

    if not is_loopback(args.host) and not args.token:
        print(f"rtxviz serve: refusing to bind {args.host} without --token (anyone on the network could read and "
              "write runs); pass --token T or bind 127.0.0.1", file=sys.stderr)
        return 2
    if args.nice < 0:
        print(f"rtxviz serve: --nice must be >= 0, got {args.nice} (raising priority needs privileges)",
              file=sys.stderr)
        return 2
    if not args.request_timeout > 0:
        print(f"rtxviz serve: --request-timeout must be > 0 seconds, got {args.request_timeout}", file=sys.stderr)
        return 2
    if args.nice and hasattr(os, "nice"):
        # Measured on 2 cores: at the default priority the server's parsing and storing competes with a training
        # loop that streams every step, for about 2% of its speed; niced, it runs in the idle time instead.
        os.nice(args.nice)
    # without a token, accept only loopback Host headers: a DNS-rebinding page cannot reach the API then
    allowed = None if args.token else ["127.0.0.1", "localhost", "::1"]
    db = args.db or default_db_path()
    if args.workers > 1 and not is_postgres_url(db):
        print(f"rtxviz serve: --workers {args.workers} needs a PostgreSQL --db (postgresql://user@host/db): the "
              f"SQLite file {db} has one writer process. Drop --workers, or see docs/server.md for a class server",
              file=sys.stderr)
        return 2
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(bind_error(args.host, args.port, exc), file=sys.stderr)
        return 1
    settings = Settings(token=args.token, cors_origins=args.cors_origin, allowed_hosts=allowed)
    try:
        if args.workers == 1:
            app = create_app(db=db, settings=settings)
        else:  # open (and migrate) once here, for the error; each worker opens its own after the fork
            store = open_store(db)
            try:
                check_accounts(store.path, store.list_users(), settings.token)
            finally:
                store.close()
    except StoreError as exc:  # the database cannot be had: say which file and what to do, no traceback
        sock.close()
        print(f"rtxviz serve: {exc}", file=sys.stderr)
        return 1
    except AccountsNeedToken as exc:  # accounts without an admin token would protect nobody
        sock.close()
        print(f"rtxviz serve: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if sock.family == socket.AF_INET6 else args.host
    shown = redact(db) if is_postgres_url(db) else db
    workers = f", {args.workers} workers" if args.workers > 1 else ""
    print(f"rtxviz: serving on http://{host}:{port}  (db {shown}{workers})", flush=True)
    import uvicorn

    # last before serving: everything made so far is frozen (workers forked after this inherit it)
    tune_gc_for_serving()
    if args.workers > 1:
        from .workers import run_workers

        return run_workers(sock, args.workers, lambda: create_app(db=db, settings=settings),
                           lambda app: uvicorn_config(app, args.log_level, args.request_timeout))
    uvicorn.Server(uvicorn_config(app, args.log_level, args.request_timeout)).run(sockets=[sock])
    return 0
