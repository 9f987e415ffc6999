"""The `rtxviz` command as a new user meets it (review r3): wrong values get one line naming the option and the
value (exit 2 for usage, 1 at run time), never a traceback, and nothing is left half written."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rtxviz import cli
from rtxviz.export import events_from_db, import_jsonl_to_db, write_jsonl
from rtxviz.export import html as html_export
from rtxviz.web import create_app

from ..export.test_html import FAKE_GRAPH, FAKE_INDEX, FAKE_MAIN
from ..render.test_svg import needs_dot
from ..web.server import ThreadServer

SVG = "{http://www.w3.org/2000/svg}"
REPO = Path(__file__).resolve().parents[2]


def _db(tmp_path: Path, events: list[dict], run_id: str = "run-1") -> str:
    src = tmp_path / "src.jsonl"
    write_jsonl(events, str(src))
    db = str(tmp_path / "runs.db")
    import_jsonl_to_db(str(src), db, run_id=run_id)
    return db


def _free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """argparse's exit 2 for `argv`; its stderr."""
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# --url ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["notaurl", "ftp://127.0.0.1:8000", "http://", "http://127.0.0.1:99999",
                                 "127.0.0.1:8000"])
@pytest.mark.parametrize("command", [["import", "FILE"], ["export", "latest", "--jsonl", "out.jsonl"],
                                     ["render", "latest", "-o", "out.svg"]])
def test_a_url_that_is_not_an_http_server_address_is_a_usage_error(tmp_path, capsys, command, url):
    """'notaurl' was a ValueError traceback from urllib; 'ftp://...' was reported as an unreachable server."""
    argv = [str(tmp_path / "run.jsonl") if a == "FILE" else str(tmp_path / a) if a.startswith("out.") else a
            for a in command]
    (tmp_path / "run.jsonl").write_text('{"v":1,"kind":"step_end","t":0.0,"step":0}\n')
    err = _usage_error([*argv, "--url", url], capsys)
    assert "--url" in err and repr(url) in err
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.svg").exists()


def test_import_to_a_url_nobody_listens_on_names_the_url(tmp_path, capsys, run_events):
    """It said only '<urlopen error [Errno 111] Connection refused>'."""
    src = tmp_path / "run.jsonl"
    write_jsonl(run_events, str(src))
    url = f"http://127.0.0.1:{_free_port()}"
    assert cli.main(["import", str(src), "--url", url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert url in err and "cannot reach" in err and "rtxviz serve" in err


# --db -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["users", "list"], ["users", "add", "ada", "--create"], ["import", "FILE"],
                                  ["serve", "--port", "0"], ["render", "latest"],
                                  ["export", "latest", "--jsonl", "out.jsonl"]])
def test_a_database_url_other_than_postgresql_is_refused_and_nothing_is_made(tmp_path, monkeypatch, capsys, argv):
    """`users list --db mysql://x` made a folder 'mysql:' holding a new SQLite file 'x', and said 'no users'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text('{"v":1,"kind":"step_end","t":0.0,"step":0}\n')
    err = _usage_error([*argv, "--db", "mysql://db.example/runs"], capsys)
    assert "--db" in err and "'mysql://db.example/runs'" in err and "postgresql://" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


@pytest.mark.parametrize("argv", [["users", "list"], ["import", "FILE"], ["serve", "--port", "0"],
                                  ["render", "latest"], ["export", "latest", "--jsonl", "out.jsonl"]])
def test_a_folder_given_as_database_is_a_usage_error_and_leaves_no_lock_file(tmp_path, monkeypatch, capsys, argv):
    """A folder was 'cannot open the runs database (disk I/O error)', and import/serve left 'folder.lock' beside."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text('{"v":1,"kind":"step_end","t":0.0,"step":0}\n')
    (tmp_path / "runs").mkdir()
    err = _usage_error([*argv, "--db", "runs"], capsys)
    assert "--db" in err and "'runs' is a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE", "runs"]


# output files -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--jsonl", "--trace", "--html"])
def test_export_to_a_folder_or_into_a_missing_folder_names_the_option(tmp_path, capsys, run_events, flag):
    """'[Errno 21] Is a directory' named no option; --trace made missing folders while --jsonl and --html failed."""
    db = _db(tmp_path, run_events)
    (tmp_path / "adir").mkdir()
    assert cli.main(["export", "run-1", flag, str(tmp_path / "adir"), "--db", db]) == 1
    err = capsys.readouterr().err
    assert flag in err and f"{str(tmp_path / 'adir')!r} is a folder" in err
    missing = tmp_path / "nowhere" / "out.file"
    assert cli.main(["export", "run-1", flag, str(missing), "--db", db]) == 1
    err = capsys.readouterr().err
    assert flag in err and f"no folder {str(tmp_path / 'nowhere')!r}" in err
    assert not (tmp_path / "nowhere").exists()


@needs_dot
def test_render_to_a_folder_or_into_a_missing_folder_names_the_option(tmp_path, capsys, run_events):
    db = _db(tmp_path, run_events)
    (tmp_path / "d.svg").mkdir()
    assert cli.main(["render", "run-1", "-o", str(tmp_path / "d.svg"), "--db", db]) == 1
    err = capsys.readouterr().err
    assert "-o" in err and f"{str(tmp_path / 'd.svg')!r} is a folder" in err
    assert cli.main(["render", "run-1", "-o", str(tmp_path / "nowhere" / "g.svg"), "--db", db]) == 1
    err = capsys.readouterr().err
    assert "-o" in err and f"no folder {str(tmp_path / 'nowhere')!r}" in err


def _limited_cli(argv: list[str], max_bytes: int) -> subprocess.CompletedProcess[str]:
    """`rtxviz argv` in a child whose files may grow to `max_bytes` only: a write past it fails (EFBIG) as on a full
    disk."""
    def limit() -> None:
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG from write(), not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "rtxviz.cli", *argv], capture_output=True, text=True, env=env,
                          preexec_fn=limit, cwd=REPO, timeout=120)


@pytest.mark.parametrize("flag", ["--jsonl", "--trace"])
def test_an_export_that_fails_half_way_leaves_the_previous_file_whole(tmp_path, run_events, flag):
    """A write that failed part way (a full disk) left a truncated, half-written file where the last export was."""
    out = tmp_path / "out.file"
    out.write_text("the previous export\n")
    with ThreadServer(create_app(db=":memory:")) as url:
        assert cli.main(["import", _jsonl(tmp_path, run_events), "--url", url, "--run-id", "r1"]) == 0
        proc = _limited_cli(["export", "r1", flag, str(out), "--url", url], max_bytes=2048)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and flag in proc.stderr and str(out) in proc.stderr
    assert out.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.file", "run.jsonl"]  # no temporary file left


@needs_dot
def test_a_render_that_fails_half_way_leaves_the_previous_file_whole(tmp_path, run_events):
    out = tmp_path / "g.svg"
    out.write_text("<svg>the previous drawing</svg>")
    with ThreadServer(create_app(db=":memory:")) as url:
        assert cli.main(["import", _jsonl(tmp_path, run_events), "--url", url, "--run-id", "r1"]) == 0
        proc = _limited_cli(["render", "r1", "-o", str(out), "--url", url], max_bytes=2048)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and str(out) in proc.stderr
    assert out.read_text() == "<svg>the previous drawing</svg>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.svg", "run.jsonl"]


def _jsonl(tmp_path: Path, events: list[dict]) -> str:
    src = tmp_path / "run.jsonl"
    write_jsonl(events, str(src))
    return str(src)


# import -----------------------------------------------------------------------------------------------------------

def test_import_of_an_empty_file_is_refused_and_makes_no_run(tmp_path, capsys):
    """An empty file made a run with no events and said '-> run import-...'."""
    src = tmp_path / "empty.jsonl"
    src.write_text("\n\n")
    db = str(tmp_path / "runs.db")
    assert cli.main(["import", str(src), "--db", db]) == 1
    err = capsys.readouterr().err
    assert str(src) in err and "no events" in err
    assert not os.path.exists(db)


def test_import_of_a_folder_says_it_is_a_folder(tmp_path, capsys):
    assert cli.main(["import", str(tmp_path), "--db", str(tmp_path / "runs.db")]) == 1
    assert f"{str(tmp_path)!r} is a folder" in capsys.readouterr().err


# serve ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("origin", ["http://localhost:3000/", "localhost:3000", "http://localhost:3000/app",
                                    "http://"])
def test_a_cors_origin_a_browser_never_sends_is_a_usage_error(capsys, origin):
    """A browser's Origin is scheme://host[:port]: 'http://localhost:3000/' (a trailing slash) was accepted and then
    never matched, so the page was refused with no word why."""
    err = _usage_error(["serve", "--port", "0", "--cors-origin", origin], capsys)
    assert "--cors-origin" in err and repr(origin) in err


def test_a_cors_origin_is_kept_as_browsers_write_it():
    args = cli.build_parser().parse_args(["serve", "--cors-origin", "HTTP://LocalHost:3000",
                                          "--cors-origin", "https://class.example.org"])
    assert args.cors_origin == ["http://localhost:3000", "https://class.example.org"]


# what render draws ------------------------------------------------------------------------------------------------

EVIL = '<script>alert(1)</script> & &amp; &lt;b&gt; "q"'


def _evil(events: list[dict]) -> list[dict]:
    """The run with markup and entity-like text in its op, module and parameter names."""
    out = []
    for e in events:
        e = dict(e)
        if e["kind"] == "node":
            e["op"] = f"op {EVIL}"
            e["module"] = f"mod {EVIL}"
        elif e["kind"] == "leaf" and e.get("name"):
            e["name"] = f"p {EVIL}"
        elif e["kind"] == "run_start":
            e["name"] = f"run {EVIL}"
        out.append(e)
    return out


@needs_dot
def test_render_shows_names_exactly_as_given_and_no_markup_gets_in(tmp_path, run_events):
    """Graphviz reads '&amp;' in a label as an entity: a module named 'a &amp; b' was drawn as 'a & b', and
    '&lt;b&gt;' as '<b>'."""
    db = _db(tmp_path, _evil(run_events))
    out = tmp_path / "g.svg"
    assert cli.main(["render", "run-1", "-o", str(out), "--db", db, "--step", "0"]) == 0
    root = ET.fromstring(out.read_bytes())  # well-formed XML
    assert not [el for el in root.iter() if el.tag.split("}")[-1].lower() == "script"]
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert f"op {EVIL}" in texts and f"mod {EVIL}" in texts and f"p {EVIL}" in texts
    tips = {v for el in root.iter() for k, v in el.attrib.items() if k.endswith("title")}
    assert f"op in mod {EVIL}" in tips


def test_the_html_export_embeds_names_as_data_only(tmp_path, run_events, monkeypatch):
    root = tmp_path / "static"
    (root / "js").mkdir(parents=True)
    (root / "index.html").write_text(FAKE_INDEX)
    (root / "style.css").write_text(".node { color: red; }")
    (root / "js" / "main.js").write_text(FAKE_MAIN)
    (root / "js" / "graph.js").write_text(FAKE_GRAPH)
    monkeypatch.setattr(html_export, "default_static_dir", lambda: root)
    db = _db(tmp_path, _evil(run_events))
    out = tmp_path / "run.html"
    assert cli.main(["export", "run-1", "--html", str(out), "--db", db]) == 0
    page = out.read_text()
    assert "alert(1)" in page and "<script>alert(1)" not in page
    title = page.split("<title>")[1].split("</title>")[0]
    assert title == "rtxviz · run &lt;script&gt;alert(1)&lt;/script&gt; &amp; &amp;amp; &amp;lt;b&amp;gt; \"q\""
    block = page.split('<script type="application/json" id="rtxviz-run">')[1].split("</script>")[0]
    payload = json.loads(block)
    assert payload["run"]["name"] == f"run {EVIL}"
    assert {e["op"] for e in payload["events"] if e["kind"] == "node"} == {f"op {EVIL}"}


# export while the run is written ----------------------------------------------------------------------------------

def test_export_of_a_run_still_being_written_gives_what_was_stored(tmp_path, run_events):
    """Halfway through a run (the server still appending), an export is the events stored so far, in order, and
    it imports into a run of its own."""
    from rtxviz.store import open_store

    db = str(tmp_path / "live.db")
    half = len(run_events) // 2
    store = open_store(db)  # the writer, as a running server holds it
    try:
        store.append("live", "live", [(e["kind"], e.get("step"), json.dumps({k: v for k, v in e.items()
                                                                             if k != "seq"}))
                                      for e in run_events[:half]])
        out = tmp_path / "half.jsonl"
        assert cli.main(["export", "live", "--jsonl", str(out), "--db", db]) == 0
        store.append("live", "live", [(e["kind"], e.get("step"), json.dumps({k: v for k, v in e.items()
                                                                             if k != "seq"}))
                                      for e in run_events[half:]])
    finally:
        store.close()
    fresh = str(tmp_path / "fresh.db")
    assert cli.main(["import", str(out), "--db", fresh, "--run-id", "copy"]) == 0
    assert events_from_db(fresh, "copy")[1] == run_events[:half]


@pytest.mark.parametrize("flag", ["--jsonl", "--trace"])
def test_an_export_to_a_symbolic_link_writes_through_it(tmp_path, run_events, flag):
    """Writing through a temporary file must not replace a link with a file: `--jsonl /dev/stdout` (a link to
    /proc/self/fd/1) would have put a regular file in /dev, and a user's link would no longer point anywhere."""
    db = _db(tmp_path, run_events)
    target = tmp_path / "target.file"
    target.write_text("old\n")
    link = tmp_path / "link.file"
    link.symlink_to(target)
    assert cli.main(["export", "run-1", flag, str(link), "--db", db]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() != "old\n" and len(target.read_text()) > 100


@needs_dot
def test_a_render_to_a_symbolic_link_writes_through_it(tmp_path, run_events):
    db = _db(tmp_path, run_events)
    target = tmp_path / "target.svg"
    target.write_text("old")
    link = tmp_path / "link.svg"
    link.symlink_to(target)
    assert cli.main(["render", "run-1", "-o", str(link), "--db", db]) == 0
    assert link.is_symlink() and ET.fromstring(target.read_bytes()).tag == f"{SVG}svg"


def test_export_to_stdout_keeps_the_summary_out_of_the_stream(tmp_path, run_events):
    """`rtxviz export RUN --jsonl /dev/stdout > f` wrote 'rtxviz export: run ...' as the stream's last line. (A link
    of our own to the process's stdout stands in for /dev/stdout, which a mistake here would replace.)"""
    db = _db(tmp_path, run_events)
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    out = tmp_path / "piped.jsonl"
    with out.open("w") as f:
        proc = subprocess.run([sys.executable, "-m", "rtxviz.cli", "export", "run-1", "--jsonl", str(stdout),
                               "--db", db], stdout=f, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "rtxviz export: run run-1" in proc.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == len(run_events) and all(json.loads(line)["v"] == 1 for line in lines)
    assert stdout.is_symlink()
