"""The `rtxviz` command: ``rtxviz serve`` (and room for ``demo``, ``render``: one function each).

Adding a subcommand is one function decorated with `@command`, whose first lines add its arguments:

    @command("demo", "run a small training loop and stream it")
    def demo(args, parser=None):
        ...

>>> build_parser().parse_args(["serve", "--port", "0"]).port
0
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

#: name -> (help, configure(subparser), run(args) -> exit code)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


def command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] | None = None) -> Callable:  # noqa: A002
    """Register `fn(args) -> int` as subcommand `name`; `configure(parser)` adds its arguments."""

    def deco(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = (help, configure or (lambda p: None), fn)
        return fn

    return deco


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


# -- serve -------------------------------------------------------------------------------------------------------
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


@command("serve", "run the viewer server (events in, runs stored, live WebSocket streams)", _serve_args)
def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .web import Settings, create_app
    from .web.app import default_db_path

    if not is_loopback(args.host) and not args.token:
        print(f"rtxviz serve: refusing to bind {args.host} without --token (anyone on the network could read and "
              "write runs); pass --token T or bind 127.0.0.1", file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # without a token, accept only loopback Host headers: a DNS-rebinding page cannot reach the API then
    # (Starlette's host check cannot parse IPv6 literals, so it is skipped for ::1)
    allowed = None if args.token or family == socket.AF_INET6 else ["127.0.0.1", "localhost"]
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


def _register_render() -> None:
    from .render.cli import HELP, configure_render, run_render

    command("render", HELP, configure_render)(run_render)


_register_render()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rtxviz", description="rtxviz: a graph-visualizing autograd engine")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, configure, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        configure(p)
        p.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> Any:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
