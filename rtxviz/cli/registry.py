"""The command registry and the parser: `command` registers a subcommand, `build_parser` and `main` run them.

Adding a subcommand is one function decorated with `@command` (in a module of this package that
rtxviz/cli/__init__.py imports), with a `configure(parser)` that adds its arguments:

>>> @command("demo", "say hello", lambda p: p.add_argument("--who", default="world"))
... def demo(args: argparse.Namespace) -> int:
...     print(f"hello {args.who}")
...     return 0
>>> main(["demo", "--who", "you"])
hello you
0
>>> del COMMANDS["demo"]
>>> build_parser().parse_args(["serve", "--port", "0"]).port
0
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.parse
from collections.abc import Callable, Sequence

from .._version import __version__

#: Adds a subcommand's arguments to its parser.
Configure = Callable[[argparse.ArgumentParser], None]
#: Runs a subcommand: parsed arguments in, exit code out.
Runner = Callable[[argparse.Namespace], int]

#: name -> (help, configure(subparser), run(args) -> exit code), in the order `rtxviz --help` lists them
COMMANDS: dict[str, tuple[str, Configure, Runner]] = {}


def _no_arguments(p: argparse.ArgumentParser) -> None:
    return None


def command(name: str, help: str, configure: Configure | None = None) -> Callable[[Runner], Runner]:
    """Register `fn(args) -> int` as subcommand `name`; `configure(parser)` adds its arguments."""

    def deco(fn: Runner) -> Runner:
        COMMANDS[name] = (help, configure or _no_arguments, fn)
        return fn

    return deco


def build_parser() -> argparse.ArgumentParser:
    """The `rtxviz` parser with one sub-parser per registered command."""
    parser = argparse.ArgumentParser(prog="rtxviz", description="rtxviz: a graph-visualizing autograd engine")
    parser.add_argument("--version", action="version", version=f"rtxviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, configure, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        configure(p)
        p.set_defaults(run=run)
    return parser


def fail(command_name: str, exc: BaseException | str, code: int = 1) -> int:
    """Print ``rtxviz COMMAND: reason`` on stderr (once: a reason that already starts with the command's name, as
    library errors do, is not prefixed twice) and return `code`.

    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     fail("render", "render: --step must be a number")
    1
    >>> err.getvalue()
    'rtxviz render: --step must be a number\\n'
    """
    reason = str(exc)
    for prefix in (f"rtxviz {command_name}: ", f"{command_name}: "):
        if reason.startswith(prefix):
            reason = reason[len(prefix):]
    print(f"rtxviz {command_name}: {reason}", file=sys.stderr)
    return code


def server_url(text: str) -> str:
    """argparse type for --url: a server's address, ``http(s)://HOST[:PORT]`` (a path is kept: a server behind a
    proxy). Anything else failed later as a traceback ('notaurl') or as an unreachable server ('ftp://...').

    >>> server_url("http://127.0.0.1:8000")
    'http://127.0.0.1:8000'
    >>> server_url("127.0.0.1:8000")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a server's address, http://HOST:PORT (...), got '127.0.0.1:8000'
    """
    try:
        parts = urllib.parse.urlsplit(text)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018  (raises ValueError for a port that is no number from 0 to 65535)
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError("must be a server's address, http://HOST:PORT (e.g. http://127.0.0.1:8000, "
                                         f"what `rtxviz serve` prints), got {text!r}")
    return text


def database(text: str) -> str:
    """argparse type for --db: a SQLite file or a ``postgresql://`` URL. Another URL would be taken for a file path
    (``mysql://x`` made a folder ``mysql:`` holding a new, empty database), and a folder cannot be opened.

    >>> database("runs.db"), database("postgresql://ada@db/class")
    ('runs.db', 'postgresql://ada@db/class')
    >>> database("mysql://db/runs")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: takes a SQLite file or a postgresql://user@host/db URL, got 'mysql://db/runs'
    """
    from ..store import is_postgres_url

    if "://" in text and not is_postgres_url(text):
        raise argparse.ArgumentTypeError(f"takes a SQLite file or a postgresql://user@host/db URL, got {text!r}")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; --db takes the server's SQLite file (e.g. "
                                         f"{os.path.join(text, 'runs.db')})")
    return text


def output_problem(flag: str, path: str) -> str | None:
    """Why `path` cannot be written as the output file of option `flag` (None when it can): a folder, or a file in
    a folder that does not exist (not made: a typo would scatter folders).

    >>> output_problem("--jsonl", "."), output_problem("-o", "no/such/folder/g.svg"), output_problem("-o", "g.svg")
    ("--jsonl '.' is a folder; give a file name in it", "-o 'no/such/folder/g.svg': no folder 'no/such/folder'", None)
    """
    if os.path.isdir(path):
        return f"{flag} {path!r} is a folder; give a file name in it"
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        return f"{flag} {path!r}: no folder {folder!r}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the command line) and run the command; its exit code (2 and the help without one)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    code: int = args.run(args)
    return code
