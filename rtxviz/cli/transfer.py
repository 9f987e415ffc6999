"""`rtxviz import` and `rtxviz export`: move a recorded run between a server (its database or its REST API) and a
JSON-lines file; export also writes a Chrome trace or one self-contained HTML page.

>>> from rtxviz.cli import build_parser
>>> args = build_parser().parse_args(["export", "latest", "--jsonl", "run.jsonl"])
>>> (args.run_ref, args.jsonl, args.db, args.url)
('latest', 'run.jsonl', None, None)
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
from typing import Any

from ..files import replacing
from ..store import StoreError, default_db_path, open_store
from .registry import command, database, fail, output_problem, server_url


def run_id_arg(text: str) -> str:
    """argparse type for --run-id: what the API can address (``/api/runs/{id}``).

    >>> run_id_arg("my-run_2")
    'my-run_2'
    >>> run_id_arg("../../etc")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be 1-64 letters, digits, '_' or '-' (...), got '../../etc'
    """
    from ..export.jsonl import RUN_ID

    if not RUN_ID.match(text):
        raise argparse.ArgumentTypeError("must be 1-64 letters, digits, '_' or '-' (the API addresses runs as "
                                         f"/api/runs/ID), got {text!r}")
    return text


def _source_args(p: argparse.ArgumentParser, verb: str) -> None:
    src = p.add_mutually_exclusive_group()
    # reading is safe while a server writes the file; writing it is refused then (the server holds it: use --url)
    when = "safe while the server runs" if verb == "read" else "refused while a server holds it: use --url then"
    src.add_argument("--db", type=database, default=None,
                     help=f"{verb} the server's SQLite file (default $RTXVIZ_DB or ~/.rtxviz/runs.db; {when})")
    src.add_argument("--url", type=server_url, default=None,
                     help=f"{verb} a running server instead, e.g. http://127.0.0.1:8000")
    p.add_argument("--token", default=os.environ.get("RTXVIZ_TOKEN"), help="server token (default $RTXVIZ_TOKEN)")


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a JSON-lines run (one event per line, as `rtxviz export --jsonl` "
                                                "writes)")
    _source_args(p, "into")
    p.add_argument("--run-id", type=run_id_arg, default=None,
                   help="id for the new run: 1-64 letters, digits, '_' or '-' (default import-<time>-<random>)")


@command("import", "load a JSON-lines run into a server's database or a running server", _import_args)
def import_(args: argparse.Namespace) -> int:
    from ..engine.errors import RtxvizError
    from ..export import import_jsonl, import_jsonl_to_db

    if os.path.isdir(args.file):
        return fail("import", f"{args.file!r} is a folder; FILE is a JSON-lines run (rtxviz export --jsonl)")
    if not os.path.isfile(args.file):
        return fail("import", f"no file {args.file!r}")
    try:
        if not _has_a_line(args.file):  # a run with no events is no run: most likely the wrong file
            return fail("import", f"{args.file} holds no events (it is empty); nothing was imported")
    except OSError as exc:
        return fail("import", f"cannot read {args.file!r}: {exc.strerror or exc}")
    try:
        if args.url:
            run_id = import_jsonl(args.file, args.url, run_id=args.run_id, token=args.token)
            where = args.url
        else:
            where = args.db or default_db_path()
            run_id = import_jsonl_to_db(args.file, where, run_id=args.run_id)
    except (RtxvizError, StoreError, OSError, urllib.error.URLError) as exc:
        return fail("import", exc)
    print(f"rtxviz import: {args.file} -> run {run_id} ({where})")
    return 0


def _has_a_line(path: str) -> bool:
    """Whether the file holds a line that is not blank (read up to the first one only)."""
    with open(path, "rb") as f:
        return any(line.strip() for line in f)


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_ref", metavar="RUN", help="run id, unique run name, or 'latest'")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--jsonl", metavar="OUT", help="JSON-lines (what `rtxviz import` and the ingest endpoint take)")
    out.add_argument("--trace", metavar="OUT", help="Chrome trace JSON (open in ui.perfetto.dev or chrome://tracing)")
    out.add_argument("--html", metavar="OUT", help="one self-contained HTML page: the viewer with the run inside")
    _source_args(p, "read")


def _run_info(args: argparse.Namespace, run_id: str) -> dict[str, Any]:
    """The run's metadata (name, status...) for the HTML page; an id-only stub when it cannot be read."""
    import json
    import urllib.parse
    import urllib.request

    try:
        if args.url:
            req = urllib.request.Request(f"{args.url.rstrip('/')}/api/runs/{urllib.parse.quote(run_id)}",
                                         headers={"Authorization": f"Bearer {args.token}"} if args.token else {})
            with urllib.request.urlopen(req, timeout=10) as resp:  # the user's own server
                info: dict[str, Any] = json.loads(resp.read())
                return info
        store = open_store(args.db or default_db_path(), read_only=True)
        try:
            return store.get_run(run_id) or {"id": run_id}
        finally:
            store.close()
    except (OSError, ValueError, StoreError):
        return {"id": run_id}


@command("export", "write a recorded run as JSON-lines, a Chrome trace or a self-contained HTML page", _export_args)
def export(args: argparse.Namespace) -> int:
    from ..engine.errors import RtxvizError
    from ..export import chrome_trace, events_from_db, events_from_server, export_html, write_jsonl, write_trace

    flag, out = next((f"--{k}", getattr(args, k)) for k in ("jsonl", "trace", "html") if getattr(args, k))
    problem = output_problem(flag, out)
    if problem:
        return fail("export", problem)
    try:
        if args.url:
            run_id, events = events_from_server(args.url, args.run_ref, token=args.token)
        else:
            run_id, events = events_from_db(args.db or default_db_path(), args.run_ref)
    except (RtxvizError, StoreError, OSError) as exc:
        return fail("export", exc)
    try:
        with replacing(out) as tmp:  # the previous export stays whole until this one is
            if args.jsonl:
                write_jsonl(events, tmp)
            elif args.trace:
                write_trace(chrome_trace(events, process=f"rtxviz run {run_id}"), tmp)
            else:
                export_html(events, tmp, run=_run_info(args, run_id))
    except OSError as exc:
        return fail("export", f"cannot write {flag} {out!r}: {exc.strerror or exc}; the file was left as it was")
    except RtxvizError as exc:
        return fail("export", exc)
    # `--jsonl /dev/stdout | rtxviz import ...`: the summary must not become the stream's last line
    to_stdout = os.path.realpath(out) in {os.path.realpath(p) for p in ("/dev/stdout", "/proc/self/fd/1")}
    print(f"rtxviz export: run {run_id} ({len(events)} events) -> {out}", file=sys.stderr if to_stdout else sys.stdout)
    return 0
