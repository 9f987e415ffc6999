"""`rtxviz lesson`: list the lessons, run one (or all) in the live page, or export them as offline HTML.

``rtxviz lesson list`` (or a bare ``rtxviz lesson``) lists them, number, name and title in aligned columns;
``rtxviz lesson NAME`` streams that lesson's engine run to ``--url`` (or to a server it starts on a free port,
kept serving until Ctrl-C) and prints the page's address; the server it starts also runs the lesson the page's
"next" button asks for (lesson_runner.py); ``--all`` runs every lesson; ``--export DIR`` writes one
self-contained HTML file per lesson (``01-neuron.html``, ...) and an ``index.html`` listing them, for a course
page with no server.

>>> from rtxviz.cli import build_parser
>>> args = build_parser().parse_args(["lesson", "neuron", "--url", "http://127.0.0.1:8000"])
>>> (args.name, args.url, args.all)
('neuron', 'http://127.0.0.1:8000', False)
>>> from rtxviz.lessons import catalog
>>> print("\\n".join(list_lines(catalog()[8:10])))
 9  mlp-digits     An MLP on digits
10  checkpointing  Checkpointing: memory for compute
"""

from __future__ import annotations

import argparse
import html
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .registry import command, server_url

if TYPE_CHECKING:  # the runner imports FastAPI: only `rtxviz lesson` itself pays for it
    from ..lessons import Lesson
    from .lesson_runner import LessonRunner


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="the lesson to run (name or number); 'list' (or none) lists them")
    p.add_argument("--all", action="store_true", help="run every lesson (from NAME on, when given)")
    p.add_argument("--url", type=server_url, default=os.environ.get("RTXVIZ_SERVER"),
                   help="the server to stream to (default $RTXVIZ_SERVER; none: start one)")
    p.add_argument("--token", default=os.environ.get("RTXVIZ_TOKEN"), help="server token (default $RTXVIZ_TOKEN)")
    p.add_argument("--port", type=int, default=0, help="port of the server it starts (default: a free one)")
    p.add_argument("--db", default=None, help="where the server it starts keeps the lesson runs: a SQLite file "
                                              "(default $RTXVIZ_DB or ~/.rtxviz/runs.db, the one every command "
                                              "reads); not with --url")
    p.add_argument("--export", type=Path, metavar="DIR", help="write the lessons as offline HTML files into DIR")
    p.add_argument("--no-wait", action="store_true", help="do not keep the started server running afterwards")


#: the NAME that lists the lessons (no lesson is called so: `catalog` names come from ``NN-name.md`` files)
LIST = "list"


def list_lines(lessons: list[Lesson]) -> list[str]:
    """One line per lesson: its number, name and title, in columns as wide as the widest entry (numbers
    right-aligned), so titles line up whatever the names' lengths."""
    if not lessons:
        return []
    num_w = max(len(str(x.number)) for x in lessons)
    name_w = max(len(x.name) for x in lessons)
    return [f"{x.number:>{num_w}}  {x.name:<{name_w}}  {x.title}".rstrip() for x in lessons]


def _start_server(port: int, runner: LessonRunner, db: str | None = None) -> tuple[str, Any]:
    """A viewer server on 127.0.0.1 in a thread (its runs in `db`, default $RTXVIZ_DB or ~/.rtxviz/runs.db), with
    the runner's route for the page's "next" button, and its address."""
    import socket

    import uvicorn

    from ..store import default_db_path
    from ..web import Settings, create_app

    app = create_app(db=db or default_db_path(), settings=Settings(allowed_hosts=["127.0.0.1", "localhost"]),
                     routers=[runner.router()])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="rtxviz-lesson-server").start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server


def export_lessons(lessons: list, out: Path) -> list[Path]:
    """One offline HTML file per lesson (its run recorded in memory, its text beside the graph), and an index."""
    from ..events import MemoryTransport
    from ..export.html import export_html
    from ..lessons import run_lesson

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for lesson in lessons:
        keep = MemoryTransport()
        run_lesson(lesson, transport=keep)
        events = [dict(e, seq=i) for i, e in enumerate(keep.events, 1)]
        path = out / f"{lesson.number:02d}-{lesson.name}.html"
        export_html(events, str(path), run={"id": f"lesson-{lesson.name}", "name": lesson.run_name,
                                            "status": "ok"})
        written.append(path)
    items = "".join(f'<li><a href="{html.escape(p.name)}">{html.escape(x.run_name)}</a></li>'
                    for p, x in zip(written, lessons, strict=True))
    (out / "index.html").write_text(f"<!doctype html><meta charset='utf-8'><title>rtxviz lessons</title>"
                                    f"<h1>rtxviz lessons</h1><ol>{items}</ol>", encoding="utf-8")
    return written


@command("lesson", "list the lessons, run one in the live page, or export them as offline HTML", _args)
def lesson(args: argparse.Namespace) -> int:
    from ..lessons import catalog, find, run_lesson

    lessons = catalog()
    if args.name == LIST:
        flags = [f for f, on in (("--all", args.all), ("--export", args.export)) if on]
        if flags:
            print(f"rtxviz lesson list: takes no {', '.join(flags)} (it only lists the lessons; run one with "
                  "`rtxviz lesson NAME`)", file=sys.stderr)
            return 2
        args.name = None
    try:
        start = find(args.name) if args.name else None
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.export:
        chosen = lessons if start is None else (lessons[lessons.index(start):] if args.all else [start])
        for path in export_lessons(chosen, args.export):
            print(path)
        return 0
    if start is None:
        for line in list_lines(lessons):
            print(line)
        print("\nrun one: rtxviz lesson NAME [--url http://127.0.0.1:8000]", file=sys.stderr)
        return 0
    chosen = lessons[lessons.index(start):] if args.all else [start]
    if args.url and args.db:
        print(f"rtxviz lesson: --db is where the server this command starts keeps its runs; with --url "
              f"{args.url} the lessons go to that server, which has its own (drop --db or --url)", file=sys.stderr)
        return 2
    if args.url:  # another server: the lessons are streamed to it; its page's "next" shows the command
        for x in chosen:
            stats = run_lesson(x, url=args.url, token=args.token).stats()
            if not stats["sent"]:  # nothing reached it: say so, rather than print a page with no run on it
                print(f"rtxviz lesson: could not stream {x.run_name} to the server at {args.url} "
                      f"({stats['last_error'] or 'nothing was acknowledged'}); is `rtxviz serve` running there?",
                      file=sys.stderr)
                return 1
            print(f"{x.run_name}: {args.url}/")
        return 0
    stop = threading.Event()
    if args.no_wait:
        stop.set()

    def ready(url: str) -> None:
        if not stop.is_set():
            print("serving the lessons; the page's next button runs the next one; Ctrl-C stops", file=sys.stderr)

    from ..store import StoreError

    try:
        serve_lessons(chosen, args.port, stop, ready=ready, db=args.db)
    except KeyboardInterrupt:
        pass
    except StoreError as exc:  # a database that cannot be opened or written: its own message names it
        print(f"rtxviz lesson: {exc}", file=sys.stderr)
        return 1
    return 0


def serve_lessons(chosen: list[Lesson], port: int, stop: threading.Event,
                  ready: Callable[[str], None] = lambda url: None, db: str | None = None) -> None:
    """Start a server on `port` (0: a free one), run `chosen` into it, then call `ready(url)` and run the lessons
    the page asks for until `stop` is set; the server stops with it."""
    from ..lessons import run_lesson
    from .lesson_runner import LessonRunner

    runner = LessonRunner()
    url, server = _start_server(port, runner, db)
    try:
        for x in chosen:
            run_lesson(x, url=url)
            print(f"{x.run_name}: {url}/", flush=True)
        ready(url)
        runner.serve(url, None, stop, ran=lambda x: print(f"{x.run_name}: {url}/", flush=True))
    finally:
        server.should_exit = True
