"""`rtxviz render RUN -o out.svg`: draw a recorded run's step from the server's database or its REST API.

The command lives here, beside the others; rtxviz/render draws only. With a plain argparse sub-parser set of your
own, `add_render_command(subparsers)` adds it there.

>>> p = argparse.ArgumentParser(); configure_render(p)
>>> p.parse_args(["latest", "-o", "g.svg", "--step", "3"]).step
'3'
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from ..engine.errors import RtxvizError
from ..store import StoreError, default_db_path
from .registry import command, database, fail, output_problem, server_url

HELP = "draw a recorded run's graph (one step) to SVG, PNG, PDF or DOT"


def configure_render(p: argparse.ArgumentParser) -> None:
    """Add the render command's arguments to `p`."""
    # dest is not "run": the registry stores the handler in args.run
    p.add_argument("run_ref", metavar="RUN", help="run id, unique run name, or 'latest'")
    p.add_argument("-o", "--output", default="graph.svg",
                   help="output file; its extension picks the format: .svg, .png, .pdf or .dot (default graph.svg)")
    p.add_argument("--step", default="last", help="step to draw: a number, 'none' (events outside steps) or 'last' "
                                                  "(default: the last step that recorded nodes)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--db", type=database, default=None,
                     help="the server's SQLite file (default $RTXVIZ_DB or ~/.rtxviz/runs.db)")
    src.add_argument("--url", type=server_url, default=None,
                     help="read from a running server instead, e.g. http://127.0.0.1:8000")
    p.add_argument("--token", default=os.environ.get("RTXVIZ_TOKEN"), help="server token (default $RTXVIZ_TOKEN)")
    p.add_argument("--no-grads", action="store_true", help="leave gradient norms and marks out")
    p.add_argument("--saved", action="store_true", help="show bytes saved for backward per node")
    p.add_argument("--shapes", action="store_true", help="label each edge with the shape of the tensor it carries")
    p.add_argument("--attrs", action="store_true", help="show each op's rule and attributes")
    p.add_argument("--no-groups", action="store_true", help="no module clusters, no collapsing")
    p.add_argument("--max-nodes", type=_positive(int, "--max-nodes"), default=300,
                   help="node budget: module groups collapse, then long chains are elided (default 300)")
    p.add_argument("--timeout", type=_positive(float, "--timeout"), default=30.0,
                   help="seconds graphviz may take (default 30)")


def _positive(kind: type, flag: str) -> Any:
    """An argparse type: a finite number above 0 of `kind` (argparse names the flag and the value it refused).

    >>> _positive(float, "--timeout")("2.5")
    2.5
    >>> _positive(float, "--timeout")("nan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: --timeout must be a number above 0, got 'nan'
    """
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{flag} must be a{'n integer' if kind is int else ' number'} above 0, "
                                             f"got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _step(text: str) -> int | str | None:
    if text in ("last", "none"):
        return "last" if text == "last" else None
    try:
        step = int(text)
    except ValueError:
        raise RtxvizError(f"render: --step must be a number, 'none' or 'last', got {text!r}") from None
    if step < 0:
        raise RtxvizError(f"render: --step must be >= 0 (steps count from 0), got {step}")
    return step


def _ranges(steps: list[int], limit: int = 6) -> str:
    """'0-4, 10, 20-21' for a sorted list of steps (the first `limit` runs of consecutive numbers).

    >>> _ranges([0, 1, 2, 5, 7, 8])
    '0-2, 5, 7-8'
    """
    runs: list[list[int]] = []
    for s in steps:
        if runs and s == runs[-1][1] + 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    return ", ".join(parts) + (f", ... ({len(runs) - limit} more ranges)" if len(runs) > limit else "")


def check_step(run_id: str, events: list[dict[str, Any]], step: int) -> None:
    """Raise RtxvizError, saying which steps can be drawn, unless step `step` of the run recorded a graph.

    >>> evs = [{"kind": "step_begin", "step": 0}, {"kind": "node", "step": 0},
    ...        {"kind": "step_begin", "step": 1, "sampled": False}]
    >>> check_step("r", evs, 0)
    >>> check_step("r", evs, 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rtxviz.engine.errors.RtxvizError: render: step 1 of run r was not sampled (...); steps with a graph: 0
    """
    drawn = sorted({e["step"] for e in events if e.get("kind") in ("node", "leaf") and e.get("step") is not None})
    if step in drawn:
        return
    begun = {e.get("step"): e for e in events if e.get("kind") == "step_begin"}
    have = f"steps with a graph: {_ranges(drawn)}" if drawn else "no step of it recorded a graph"
    if step in begun and begun[step].get("sampled") is False:
        raise RtxvizError(f"render: step {step} of run {run_id} was not sampled (watch(sample_every=...) "
                          f"skipped it); {have}")
    if step in begun:
        raise RtxvizError(f"render: step {step} of run {run_id} recorded no graph; {have}")
    raise RtxvizError(f"render: run {run_id} has no step {step}; {have}")


def check_graph(run_id: str, events: list[dict[str, Any]], step: str | None) -> None:
    """Raise RtxvizError unless there is a graph to draw for `step` "last" (any) or None (outside steps): a
    picture with a legend and no graph is not an answer.

    >>> check_graph("r", [{"kind": "node", "step": 0}], "last")
    >>> check_graph("r", [{"kind": "node", "step": 0}], None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rtxviz.engine.errors.RtxvizError: render: run r recorded no graph outside its steps; steps with a graph: 0 ...
    """
    graph = [e for e in events if e.get("kind") in ("node", "leaf")]
    if step == "last" and graph:
        return
    if step is None and any(e.get("step") is None for e in graph):
        return
    drawn = sorted({e["step"] for e in graph if e.get("step") is not None})
    if not drawn:
        raise RtxvizError(f"render: run {run_id} recorded no graph (no node or leaf events)")
    raise RtxvizError(f"render: run {run_id} recorded no graph outside its steps; steps with a graph: "
                      f"{_ranges(drawn)} (pass --step N)")


def load_events(args: argparse.Namespace) -> tuple[str, list[dict[str, Any]]]:
    """(run id, events) of the run named on the command line, from --url or the database."""
    from ..export.source import events_from_db, events_from_server

    if args.url:
        return events_from_server(args.url, args.run_ref, token=args.token)
    return events_from_db(args.db or default_db_path(), args.run_ref)


@command("render", HELP, configure_render)
def run_render(args: argparse.Namespace) -> int:
    """Draw the step and say where it went; 1 with the reason on stderr when it cannot."""
    from ..render import render

    problem = output_problem("-o", args.output)
    if problem:
        return fail("render", problem)
    try:
        step = _step(args.step)
        run_id, events = load_events(args)
        if isinstance(step, int):
            check_step(run_id, events, step)
        else:
            check_graph(run_id, events, step)
    except (RtxvizError, StoreError, OSError) as exc:
        return fail("render", exc)
    try:
        path = render(events, args.output, show_grads=not args.no_grads, show_saved=args.saved,
                      show_shapes=args.shapes, show_attrs=args.attrs, group_modules=not args.no_groups,
                      max_nodes=args.max_nodes, timeout=args.timeout, step=step)
    except RtxvizError as exc:
        return fail("render", exc)
    except OSError as exc:  # render writes the whole file or leaves what was there
        return fail("render", f"cannot write -o {args.output!r}: {exc.strerror or exc}; it was left as it was")
    print(f"rtxviz render: run {run_id} -> {path}")
    return 0


def add_render_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add `render` to an argparse sub-parser set (``parser.add_subparsers()``)."""
    p: argparse.ArgumentParser = subparsers.add_parser("render", help=HELP, description=HELP)
    configure_render(p)
    p.set_defaults(run=run_render)
    return p
