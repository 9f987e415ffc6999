"""`rtxviz serve`: the viewer server (events in, runs stored, live WebSocket streams), loopback unless a token is set.

>>> from rtxviz.cli import build_parser
>>> args = build_parser().parse_args(["serve", "--port", "0"])
>>> (args.host, args.port, args.nice)
('127.0.0.1', 0, 10)
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys

from ..store import default_db_path
from .registry import command


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


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1; anything else "
                                                       "needs --token)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--db", default=None, help="SQLite file for runs (default $RTXVIZ_DB or ~/.rtxviz/runs.db)")
    p.add_argument("--token", default=os.environ.get("RTXVIZ_TOKEN"),
                   help="require this token on every request (default $RTXVIZ_TOKEN)")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="allow a browser page from ORIGIN to use the API (repeatable; default none)")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    p.add_argument("--nice", type=int, default=10, metavar="N",
                   help="lower the server's CPU priority by N (default 10; 0 keeps it; POSIX): on a machine that "
                        "also trains, the training loop gets the cores first and the server takes what is idle")


@command("serve", "run the viewer server (events in, runs stored, live WebSocket streams)", _serve_args)
def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..web import Settings, create_app

    if not is_loopback(args.host) and not args.token:
        print(f"rtxviz serve: refusing to bind {args.host} without --token (anyone on the network could read and "
              "write runs); pass --token T or bind 127.0.0.1", file=sys.stderr)
        return 2
    if args.nice < 0:
        print(f"rtxviz serve: --nice must be >= 0, got {args.nice} (raising priority needs privileges)",
              file=sys.stderr)
        return 2
    if args.nice and hasattr(os, "nice"):
        # Measured on 2 cores: at the default priority the server's parsing and storing competes with a training
        # loop that streams every step, for about 2% of its speed; niced, it runs in the idle time instead.
        os.nice(args.nice)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # without a token, accept only loopback Host headers: a DNS-rebinding page cannot reach the API then
    allowed = None if args.token else ["127.0.0.1", "localhost", "::1"]
    db = args.db or default_db_path()
    app = create_app(db=db, settings=Settings(token=args.token, cors_origins=args.cors_origin,
                                              allowed_hosts=allowed))
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host.strip("[]"), args.port))
    except OSError as exc:
        print(f"rtxviz serve: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(f"rtxviz: serving on http://{host}:{port}  (db {db})", flush=True)
    # no per-message deflate: compressing every batch for a viewer on the same machine costs more CPU than
    # validating and storing it
    config = uvicorn.Config(app, log_level=args.log_level, ws="websockets-sansio", ws_max_size=1 << 20,
                            ws_per_message_deflate=False)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
