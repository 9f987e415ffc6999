"""`rtxviz render`: a recorded run's step drawn from the server's database (skipped without graphviz `dot`)."""

from __future__ import annotations

import rtxviz
from rtxviz import Tensor, nn
from rtxviz.cli.render import add_render_command, configure_render, run_render
from rtxviz.events import EventHook
from rtxviz.store import SQLiteStore

from ..render._svg import parse
from ..render.test_svg import needs_dot


def _recorded_db(path):
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    events = []
    hook = EventHook(events.append)
    rtxviz.add_hook(hook)
    try:
        for step in range(2):
            hook.new_step(step)
            events.append({"v": 1, "kind": "step_begin", "t": 0.0, "step": step})
            model.zero_grad()
            model(Tensor.ones([2, 3])).sum().backward()
            events.append({"v": 1, "kind": "step_end", "t": 0.0, "step": step})
    finally:
        rtxviz.remove_hook(hook)
    import json

    store = SQLiteStore(str(path))
    store.append("run-a", "demo", [(e["kind"], e.get("step"), json.dumps(e)) for e in events])
    store.close()


@needs_dot
def test_render_cli_from_sqlite(tmp_path, capsys):
    import argparse

    db = tmp_path / "runs.db"
    _recorded_db(db)
    p = argparse.ArgumentParser()
    configure_render(p)
    out = tmp_path / "run.svg"
    assert run_render(p.parse_args(["demo", "-o", str(out), "--db", str(db)])) == 0
    svg = parse(out.read_bytes())
    labels = sorted(v["texts"][0] for v in svg["nodes"].values() if "rtx-op" in v["class"] or
                    "rtx-output" in v["class"])
    assert labels == ["linear", "linear", "relu", "sum"]
    assert "step 1" in out.read_text()  # the last step is drawn, titled
    assert "run-a" in capsys.readouterr().out
    assert run_render(p.parse_args(["nope", "-o", str(out), "--db", str(db)])) == 1
    assert "no run 'nope'" in capsys.readouterr().err


def test_render_cli_registration_helper():
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    add_render_command(sub)
    args = parser.parse_args(["render", "latest", "-o", "x.svg"])
    assert args.run is run_render and args.run_ref == "latest"


def _parser():
    import argparse

    p = argparse.ArgumentParser()
    configure_render(p)
    return p


@needs_dot
def test_render_cli_says_why_instead_of_a_traceback(tmp_path, capsys):
    """Review (eighteenth session): a missing output folder and --timeout nan gave tracebacks."""
    db = tmp_path / "runs.db"
    _recorded_db(db)
    p = _parser()
    assert run_render(p.parse_args(["demo", "-o", str(tmp_path / "nodir" / "x.svg"), "--db", str(db)])) == 1
    err = capsys.readouterr().err
    assert "rtxviz render:" in err and "nodir" in err and "Traceback" not in err
    for flag, value in (("--timeout", "nan"), ("--timeout", "0"), ("--max-nodes", "-5")):
        try:
            p.parse_args(["demo", flag, value])
        except SystemExit as exc:
            assert exc.code == 2
        else:
            raise AssertionError(f"{flag} {value} was accepted")
        assert flag in capsys.readouterr().err


def test_render_cli_refuses_a_run_without_a_graph(tmp_path, capsys):
    """Review: the default step ('last') and --step none wrote a legend-only SVG and exited 0."""
    import json

    store = SQLiteStore(str(tmp_path / "runs.db"))
    store.append("empty1", "notes", [("run_start", None, json.dumps({"v": 1, "kind": "run_start", "t": 0.0,
                                                                     "step": None, "name": "notes"}))])
    store.close()
    _recorded_db(tmp_path / "runs.db")
    p = _parser()
    out = tmp_path / "b.svg"
    assert run_render(p.parse_args(["empty1", "-o", str(out), "--db", str(tmp_path / "runs.db")])) == 1
    assert "recorded no graph" in capsys.readouterr().err and not out.exists()
    assert run_render(p.parse_args(["demo", "--step", "none", "-o", str(out), "--db", str(tmp_path / "runs.db")])) == 1
    assert "steps with a graph: 0-1" in capsys.readouterr().err and not out.exists()
