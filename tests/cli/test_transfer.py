"""`rtxviz import` and `rtxviz export`: JSON-lines round trips through the command line, trace and HTML output."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from rtxviz import cli
from rtxviz.export import events_from_db, events_from_server, import_jsonl_to_db, read_jsonl, write_jsonl
from rtxviz.export import html as html_export
from rtxviz.web import create_app

from ..export.test_html import FAKE_GRAPH, FAKE_INDEX, FAKE_MAIN
from ..web.server import ThreadServer


def _db_with_run(tmp_path: Path, events: list[dict]) -> tuple[str, str]:
    src = tmp_path / "src.jsonl"
    write_jsonl(events, str(src))
    db = str(tmp_path / "src.db")
    return db, import_jsonl_to_db(str(src), db, run_id="orig-run")


def _no_seq(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "seq"} for e in events]


def test_export_jsonl_then_import_into_a_fresh_db_gives_the_same_events(tmp_path, run_events, capsys):
    db, run_id = _db_with_run(tmp_path, run_events)
    out = tmp_path / "out.jsonl"
    assert cli.main(["export", run_id, "--jsonl", str(out), "--db", db]) == 0
    assert f"run {run_id} ({len(run_events)} events)" in capsys.readouterr().out
    assert list(read_jsonl(str(out))) == _no_seq(run_events)

    fresh = str(tmp_path / "fresh.db")
    assert cli.main(["import", str(out), "--db", fresh, "--run-id", "copy-1"]) == 0
    assert "copy-1" in capsys.readouterr().out
    got_id, got = events_from_db(fresh, "copy-1")
    assert got_id == "copy-1"
    assert got == run_events  # the same events, and the same seq numbers 1..n


def test_export_by_run_name_and_latest(tmp_path, run_events):
    db, _ = _db_with_run(tmp_path, run_events)
    for ref in ("exported-demo", "latest"):  # the run_start event's name
        out = tmp_path / f"{ref}.jsonl"
        assert cli.main(["export", ref, "--jsonl", str(out), "--db", db]) == 0
        assert len(list(read_jsonl(str(out)))) == len(run_events)


def test_export_trace_has_forward_and_backward_slices(tmp_path, run_events):
    db, run_id = _db_with_run(tmp_path, run_events)
    out = tmp_path / "trace.json"
    assert cli.main(["export", run_id, "--trace", str(out), "--db", db]) == 0
    trace = json.loads(out.read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    n_nodes = sum(e["kind"] == "node" for e in run_events)
    n_grads = sum(e["kind"] == "grad" for e in run_events)
    assert sum(e["cat"] == "forward" for e in xs) == n_nodes > 0
    assert sum(e["cat"] == "backward" and e["name"] != "backward pass" for e in xs) == n_grads > 0
    assert all(isinstance(e["ts"], int | float) and e["dur"] >= 0 for e in xs)


def test_import_and_export_over_http(tmp_path, run_events, capsys):
    src = tmp_path / "run.jsonl"
    write_jsonl(run_events, str(src))
    with ThreadServer(create_app(db=":memory:")) as url:
        assert cli.main(["import", str(src), "--url", url, "--run-id", "via-http"]) == 0
        _, stored = events_from_server(url, "via-http")
        out = tmp_path / "back.jsonl"
        assert cli.main(["export", "via-http", "--jsonl", str(out), "--url", url]) == 0
    assert stored == run_events
    assert list(read_jsonl(str(out))) == _no_seq(run_events)
    assert "via-http" in capsys.readouterr().out


def test_export_html_embeds_the_run(tmp_path, run_events, monkeypatch):
    root = tmp_path / "static"
    (root / "js").mkdir(parents=True)
    (root / "index.html").write_text(FAKE_INDEX)
    (root / "style.css").write_text(".node { color: red; }")
    (root / "js" / "main.js").write_text(FAKE_MAIN)
    (root / "js" / "graph.js").write_text(FAKE_GRAPH)
    monkeypatch.setattr(html_export, "default_static_dir", lambda: root)
    db, run_id = _db_with_run(tmp_path, run_events)
    out = tmp_path / "run.html"
    assert cli.main(["export", run_id, "--html", str(out), "--db", db]) == 0
    page = out.read_text()
    assert "window.RTXVIZ_EMBEDDED = true" in page and 'src="' not in page
    block = page.split('<script type="application/json" id="rtxviz-run">')[1].split("</script>")[0]
    payload = json.loads(block)
    assert payload["run"]["id"] == run_id and payload["run"]["name"] == "exported-demo"
    assert payload["events"] == run_events


def test_export_html_without_a_built_app_says_so(tmp_path, run_events, monkeypatch, capsys):
    monkeypatch.setattr(html_export, "default_static_dir", lambda: tmp_path / "nothing-here")
    db, run_id = _db_with_run(tmp_path, run_events)
    assert cli.main(["export", run_id, "--html", str(tmp_path / "x.html"), "--db", db]) == 1
    assert "not built" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_errors_are_reported_not_raised(tmp_path, run_events, capsys):
    db, _ = _db_with_run(tmp_path, run_events)
    assert cli.main(["export", "no-such-run", "--jsonl", str(tmp_path / "a.jsonl"), "--db", db]) == 1
    assert "no run 'no-such-run'" in capsys.readouterr().err
    assert cli.main(["export", "x", "--jsonl", "a", "--db", str(tmp_path / "missing.db")]) == 1
    assert "no database" in capsys.readouterr().err
    assert cli.main(["import", str(tmp_path / "missing.jsonl"), "--db", db]) == 1
    assert "no file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v": 1, "kind": "node", "t": 0.0}\n')  # a node event without its fields
    assert cli.main(["import", str(bad), "--db", db]) == 1
    assert "event 0 (kind 'node')" in capsys.readouterr().err


def test_export_needs_exactly_one_output(capsys):
    with pytest.raises(SystemExit):
        cli.main(["export", "latest"])
    with pytest.raises(SystemExit):
        cli.main(["export", "latest", "--jsonl", "a", "--trace", "b"])
    assert "--jsonl" in capsys.readouterr().err


def test_import_help_says_a_served_database_is_refused(capsys):
    """Review (eighteenth session): `import --help` said --db was "safe while the server runs"; the import is
    refused while a server holds the file (docs/server.md)."""
    import pytest

    from rtxviz import cli

    with pytest.raises(SystemExit):
        cli.main(["import", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "refused while a server holds it" in out and "safe while the server runs" not in out
    with pytest.raises(SystemExit):
        cli.main(["export", "--help"])
    assert "safe while the server runs" in " ".join(capsys.readouterr().out.split())


# -- user review: a run's `dropped` count through export and import; files without `step` ----------------------
def _ev(kind: str, step: int | None = None, **fields: object) -> dict:
    return {"v": 1, "kind": kind, "t": 1.0, "step": step, **fields}


#: A run that lost 7 events: two `dropped` notices (3, then 7 in all) and run_end's count, as the emitter sends them
DROPPING = [_ev("run_start", name="dropping"), _ev("step_begin", 0), _ev("dropped", total=3, new=3),
            _ev("step_end", 0), _ev("dropped", total=7, new=4), _ev("run_end", status="ok", dropped=7, sent=5)]


def _served_run_with_drops(tmp_path: Path) -> str:
    """A database holding DROPPING as the server stores it: the run's `dropped` is 7 (the ingest's ?dropped=)."""
    from rtxviz.export.jsonl import encode_event
    from rtxviz.store import open_store

    db = str(tmp_path / "src.db")
    store = open_store(db)
    store.append("dropping", "dropping", [(e["kind"], e["step"], encode_event(e)) for e in DROPPING], dropped=7)
    assert store.get_run("dropping")["dropped"] == 7
    store.close()
    return db


def _run_record(db: str, run_id: str) -> dict:
    from rtxviz.store import open_store

    store = open_store(db, read_only=True)
    try:
        return store.get_run(run_id)
    finally:
        store.close()


def test_the_dropped_count_survives_export_and_import_into_a_database(tmp_path, capsys):
    # user review: the imported run showed dropped 0
    db = _served_run_with_drops(tmp_path)
    out = tmp_path / "out.jsonl"
    assert cli.main(["export", "dropping", "--jsonl", str(out), "--db", db]) == 0
    fresh = str(tmp_path / "fresh.db")
    assert cli.main(["import", str(out), "--db", fresh, "--run-id", "copy"]) == 0, capsys.readouterr().err
    record = _run_record(fresh, "copy")
    assert record["dropped"] == 7 and record["n_events"] == len(DROPPING)  # and no event invented
    assert _no_seq(events_from_db(fresh, "copy")[1]) == DROPPING


@pytest.mark.parametrize("batch", [2, 5000])
def test_the_dropped_count_survives_export_and_import_over_http(tmp_path, batch):
    from rtxviz.export import import_jsonl

    db = _served_run_with_drops(tmp_path)
    out = tmp_path / "out.jsonl"
    assert cli.main(["export", "dropping", "--jsonl", str(out), "--db", db]) == 0
    with ThreadServer(create_app(db=":memory:")) as url:
        assert import_jsonl(str(out), url, run_id="copy", batch=batch) == "copy"
        _, stored = events_from_server(url, "copy")
        with urllib.request.urlopen(f"{url}/api/runs/copy") as resp:
            record = json.loads(resp.read())
    assert record["dropped"] == 7 and record["n_events"] == len(DROPPING)
    assert _no_seq(stored) == DROPPING


def test_a_run_that_never_ended_keeps_the_count_of_its_last_dropped_notice(tmp_path):
    src = tmp_path / "cut.jsonl"
    write_jsonl(DROPPING[:-1], str(src))
    db = str(tmp_path / "cut.db")
    import_jsonl_to_db(str(src), db, run_id="cut")
    assert _run_record(db, "cut")["dropped"] == 7


OLD = [{"v": 1, "kind": "run_start", "t": 1.0, "name": "old"}, {"v": 1, "kind": "my_tool.note", "t": 1.0, "n": 1},
       _ev("step_begin", 0)]


def test_an_export_without_step_from_an_earlier_version_imports_with_step_null(tmp_path):
    # the server now refuses an event without `step`; files exported by earlier versions may lack it (a tool that
    # posted without it): import fills in `step: null`, what its absence meant, and nothing else
    src = tmp_path / "old.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in OLD))
    want = [{**e, "step": e.get("step")} for e in OLD]
    db = str(tmp_path / "new.db")
    assert cli.main(["import", str(src), "--db", db, "--run-id", "old"]) == 0
    assert _no_seq(events_from_db(db, "old")[1]) == want
    with ThreadServer(create_app(db=":memory:")) as url:
        assert cli.main(["import", str(src), "--url", url, "--run-id", "old"]) == 0
        assert _no_seq(events_from_server(url, "old")[1]) == want


def test_a_server_refusal_of_an_import_names_its_reason(tmp_path, capsys):
    # a 422 the file's own check cannot foresee (the server's nesting bound): the message is the server's sentence
    deep: object = 1
    for _ in range(70):
        deep = [deep]
    src = tmp_path / "deep.jsonl"
    write_jsonl([_ev("my_tool.note", x=deep)], str(src))
    with ThreadServer(create_app(db=":memory:")) as url:
        assert cli.main(["import", str(src), "--url", url, "--run-id", "deep"]) == 1
    err = capsys.readouterr().err
    assert "422 event 0 (line 1) nests deeper than 64 levels" in err and '{"detail"' not in err
