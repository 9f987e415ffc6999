"""The `rtxviz` command: ``serve``, ``render``, ``import``, ``export`` (one decorated function each).

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
import urllib.error
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
    p.add_argument("--nice", type=int, default=10, metavar="N",
                   help="lower the server's CPU priority by N (default 10; 0 keeps it; POSIX): on a machine that "
                        "also trains, the training loop gets the cores first and the server takes what is idle")


@command("serve", "run the viewer server (events in, runs stored, live WebSocket streams)", _serve_args)
def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .store import default_db_path
    from .web import Settings, create_app

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


# -- import / export ----------------------------------------------------------------------------------------------
def _default_db() -> str:
    from .store import default_db_path

    return default_db_path()


def _source_args(p: argparse.ArgumentParser, verb: str) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--db", default=None, help=f"{verb} the server's SQLite file (default $RTXVIZ_DB or "
                                                "~/.rtxviz/runs.db; safe while the server runs)")
    src.add_argument("--url", default=None, help=f"{verb} a running server instead, e.g. http://127.0.0.1:8000")
    p.add_argument("--token", default=os.environ.get("RTXVIZ_TOKEN"), help="server token (default $RTXVIZ_TOKEN)")


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a JSON-lines run (one event per line, as `rtxviz export --jsonl` "
                                                "writes)")
    _source_args(p, "into")
    p.add_argument("--run-id", default=None, help="id for the new run (default import-<time>-<random>)")


@command("import", "load a JSON-lines run into a server's database or a running server", _import_args)
def import_(args: argparse.Namespace) -> int:
    from .engine.errors import RtxvizError
    from .export import import_jsonl, import_jsonl_to_db

    if not os.path.isfile(args.file):
        print(f"rtxviz import: no file {args.file!r}", file=sys.stderr)
        return 1
    try:
        if args.url:
            run_id = import_jsonl(args.file, args.url, run_id=args.run_id, token=args.token)
            where = args.url
        else:
            where = args.db or _default_db()
            run_id = import_jsonl_to_db(args.file, where, run_id=args.run_id)
    except (RtxvizError, OSError, urllib.error.URLError) as exc:
        print(f"rtxviz import: {exc}", file=sys.stderr)
        return 1
    print(f"rtxviz import: {args.file} -> run {run_id} ({where})")
    return 0


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_ref", metavar="RUN", help="run id, unique run name, or 'latest'")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--jsonl", metavar="OUT", help="JSON-lines (what `rtxviz import` and the ingest endpoint take)")
    out.add_argument("--trace", metavar="OUT", help="Chrome trace JSON (open in ui.perfetto.dev or chrome://tracing)")
    out.add_argument("--html", metavar="OUT", help="one self-contained HTML page: the viewer with the run inside")
    _source_args(p, "read")


def _run_info(args: argparse.Namespace, run_id: str) -> dict:
    """The run's metadata (name, status...) for the HTML page; an id-only stub when it cannot be read."""
    import json
    import urllib.parse
    import urllib.request

    try:
        if args.url:
            req = urllib.request.Request(f"{args.url.rstrip('/')}/api/runs/{urllib.parse.quote(run_id)}",
                                         headers={"Authorization": f"Bearer {args.token}"} if args.token else {})
            with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - the user's own server
                return json.loads(resp.read())
        from .store import open_store

        store = open_store(args.db or _default_db())
        try:
            return store.get_run(run_id) or {"id": run_id}
        finally:
            store.close()
    except (OSError, ValueError):
        return {"id": run_id}


@command("export", "write a recorded run as JSON-lines, a Chrome trace or a self-contained HTML page", _export_args)
def export(args: argparse.Namespace) -> int:
    from .engine.errors import RtxvizError
    from .export import chrome_trace, events_from_db, events_from_server, export_html, write_jsonl, write_trace

    try:
        if args.url:
            run_id, events = events_from_server(args.url, args.run_ref, token=args.token)
        else:
            run_id, events = events_from_db(args.db or _default_db(), args.run_ref)
        if args.jsonl:
            out = args.jsonl
            write_jsonl(events, out)
        elif args.trace:
            out = write_trace(chrome_trace(events, process=f"rtxviz run {run_id}"), args.trace)
        else:
            out = export_html(events, args.html, run=_run_info(args, run_id))
    except (RtxvizError, OSError) as exc:
        print(f"rtxviz export: {exc}", file=sys.stderr)
        return 1
    print(f"rtxviz export: run {run_id} ({len(events)} events) -> {out}")
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
