"""The `rtxviz` command as a newcomer meets it (issue 17, points 7, 8, 10, 13, 14): errors, never tracebacks; one
prefix; `--version`; a second server or an import on a database in use refused, saying what to do; render --step
checked against what the run recorded.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rtxviz import cli
from rtxviz._version import __version__
from rtxviz.store import SQLiteStore

pytestmark = pytest.mark.timeout(120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rtxviz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rtxviz.cli", *args], capture_output=True, text=True, timeout=60)


def no_traceback(err: str) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 4, err


def ev(kind: str, step: int | None = None, **fields: object) -> tuple[str, int | None, str]:
    return kind, step, json.dumps({"v": 1, "kind": kind, "t": 0.0, "step": step, **fields})


def node(i: int, step: int) -> tuple[str, int | None, str]:
    return ev("node", step, id=i, op="mul", inputs=[], shape=[2], dtype="float32", device="cpu")


@pytest.fixture
def sampled_db(tmp_path: Path) -> Path:
    """A run 'demo': step 0 recorded nodes, step 1 was not sampled, step 2 began but recorded none."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(str(path))
    store.append("run-a", "demo", [ev("run_start", name="demo"), ev("step_begin", 0), node(1, 0), node(2, 0),
                                   ev("step_end", 0), ev("step_begin", 1, sampled=False), ev("step_end", 1),
                                   ev("step_begin", 2), ev("step_end", 2)])
    store.close()
    return path


def test_version():
    out = rtxviz("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"rtxviz {__version__}"


@pytest.mark.parametrize("step, words", [
    ("-1", ["--step must be >= 0", "-1"]),
    ("7", ["run run-a has no step 7", "steps with a graph: 0"]),
    ("1", ["step 1 of run run-a was not sampled", "steps with a graph: 0"]),
    ("2", ["step 2 of run run-a recorded no graph", "steps with a graph: 0"]),
    ("two", ["--step must be a number"]),
])
def test_render_step_that_cannot_be_drawn_is_an_error(sampled_db, tmp_path, capsys, step, words):
    # issue 17.13: an unsampled, missing or negative step exited 0 with a legend-only SVG
    out = tmp_path / "g.svg"
    assert cli.main(["render", "latest", "--db", str(sampled_db), "--step", step, "-o", str(out)]) == 1
    err = capsys.readouterr().err
    for w in words:
        assert w in err, err
    assert err.startswith("rtxviz render: ") and "render: render:" not in err  # issue 17.14: one prefix
    assert not out.exists()


def test_render_from_a_jsonl_file_given_as_db_says_what_to_do(tmp_path, capsys):
    # issue 17.14: `rtxviz render latest --db run.jsonl` was a traceback
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"v": 1, "kind": "step_begin", "t": 0.0, "step": 0}) + "\n")
    assert cli.main(["render", "latest", "--db", str(path), "-o", str(tmp_path / "g.svg")]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and "rtxviz import" in err and "not a readable SQLite database" in err
    no_traceback(err)


def test_serve_with_a_port_out_of_range_is_a_usage_error():
    out = rtxviz("serve", "--port", "70000", "--nice", "0")
    assert out.returncode == 2 and "--port: must be from 0 to 65535" in out.stderr
    no_traceback(out.stderr)


def test_serve_on_a_taken_port_says_how_to_pick_another(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["serve", "--port", str(port), "--db", str(tmp_path / "r.db"), "--nice", "0"]) == 1
    err = capsys.readouterr().err
    assert f"port {port}" in err and "already in use" in err and "--port" in err and "PORT=" in err


@pytest.mark.parametrize("content", [b"not a database at all\n" * 200, b"SQLite format 3\x00" + os.urandom(8192)])
def test_serve_on_a_damaged_database_names_it_and_says_what_to_do(tmp_path, capsys, content):
    # issue 17.8: a 16-line traceback that did not name the file
    db = tmp_path / "runs.db"
    db.write_bytes(content)
    assert cli.main(["serve", "--port", "0", "--db", str(db), "--nice", "0"]) == 1
    err = capsys.readouterr().err
    assert str(db) in err and f"mv {db} {db}.damaged" in err
    no_traceback(err)


def test_import_run_id_the_api_cannot_address_is_refused(tmp_path):
    # issue 17.10: `import --run-id ../../etc` created a run the API could not address
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"v": 1, "kind": "step_begin", "t": 0.0, "step": 0}) + "\n")
    out = rtxviz("import", str(path), "--db", str(tmp_path / "r.db"), "--run-id", "../../etc")
    assert out.returncode == 2 and "--run-id: must be 1-64 letters" in out.stderr
    assert not (tmp_path / "r.db").exists()


def test_import_of_a_line_that_is_not_strict_json_names_the_line(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"v": 1, "kind": "step_begin", "t": 0.0, "step": 0}) + "\n"
                    + '{"v": 1, "kind": "run_start", "t": 0.0, "name": "a\\ud800"}\n')
    assert cli.main(["import", str(path), "--db", str(tmp_path / "r.db")]) == 1
    err = capsys.readouterr().err
    assert f"{path}:2" in err and "surrogate" in err and "import: import:" not in err


def _serve(db: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "rtxviz.cli", "serve", "--port", str(port), "--db", str(db),
                             "--nice", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "serving on" in line, line + proc.stdout.read()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the server did not answer")


def test_a_second_server_or_an_import_on_a_database_in_use_is_refused(sampled_db, tmp_path):
    # issue 17.7: both servers started, and then answered 500s (IntegrityError) and wrong 404s
    proc = _serve(sampled_db, free_port())
    try:
        second = rtxviz("serve", "--port", str(free_port()), "--db", str(sampled_db), "--nice", "0")
        assert second.returncode == 1, second.stdout + second.stderr
        assert str(sampled_db) in second.stderr and f"pid {proc.pid}" in second.stderr
        assert "--url" in second.stderr
        no_traceback(second.stderr)
        jsonl = tmp_path / "run.jsonl"
        jsonl.write_text(json.dumps({"v": 1, "kind": "step_begin", "t": 0.0, "step": 0}) + "\n")
        imp = rtxviz("import", str(jsonl), "--db", str(sampled_db))
        assert imp.returncode == 1 and f"pid {proc.pid}" in imp.stderr and "--url" in imp.stderr
        assert "import: import:" not in imp.stderr
        no_traceback(imp.stderr)
        # reading beside the server is fine
        exp = rtxviz("export", "latest", "--db", str(sampled_db), "--jsonl", str(tmp_path / "out.jsonl"))
        assert exp.returncode == 0, exp.stderr
        assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 9
    finally:
        proc.terminate()
        proc.wait(10)


def test_export_of_a_run_stored_before_strict_ingest_does_not_crash(tmp_path, capsys):
    # issue 17.4: a lone surrogate stored by the old server made `rtxviz export --jsonl` crash (UnicodeEncodeError)
    db = tmp_path / "old.db"
    store = SQLiteStore(str(db))
    store.append("old", "old", [("my_tool.note", None, '{"v":1,"kind":"my_tool.note","t":0.0,"text":"a\\ud800b"}')])
    store.close()
    out = tmp_path / "old.jsonl"
    assert cli.main(["export", "old", "--db", str(db), "--jsonl", str(out)]) == 0, capsys.readouterr().err
    assert json.loads(out.read_text(encoding="utf-8"))["text"] == "a\ufffdb"
    assert cli.main(["import", str(out), "--db", str(tmp_path / "new.db")]) == 0  # and it imports back
