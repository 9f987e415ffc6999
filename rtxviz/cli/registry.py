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
import sys
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


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the command line) and run the command; its exit code (2 and the help without one)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    code: int = args.run(args)
    return code
