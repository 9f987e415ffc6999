"""`rtxviz lesson --db FILE`: the lesson's server keeps its runs where every other command's --db says (found by a
docs walk: lesson had no --db and always wrote $RTXVIZ_DB or ~/.rtxviz/runs.db)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtxviz import cli
from rtxviz.store.sqlite import SQLiteStore


def test_a_lesson_run_lands_in_the_given_database_and_nowhere_else(tmp_path: Path, monkeypatch, capsys) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("RTXVIZ_DB", raising=False)
    db = tmp_path / "lessons.db"
    assert cli.main(["lesson", "1", "--no-wait", "--db", str(db)]) == 0
    store = SQLiteStore(str(db), read_only=True)
    try:
        runs = store.list_runs()
        assert len(runs) == 1 and runs[0]["n_events"] > 10
        kinds = {json.loads(text)["kind"] for _, text in store.events(runs[0]["id"], limit=10_000)}
        assert {"run_start", "lesson", "node", "run_end"} <= kinds
    finally:
        store.close()
    assert not (home / ".rtxviz").exists()  # the default database was never touched


def test_db_with_url_is_refused_as_a_usage_error(tmp_path: Path, capsys) -> None:
    assert cli.main(["lesson", "1", "--url", "http://127.0.0.1:9", "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert "--db" in err and "--url" in err
    assert not (tmp_path / "x.db").exists()


def test_a_database_that_cannot_be_opened_is_one_line_not_a_traceback(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "not.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    assert cli.main(["lesson", "1", "--no-wait", "--db", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(bad) in err
    assert bad.read_bytes() == b"this is not sqlite" * 100


@pytest.fixture(autouse=True)
def _quiet(monkeypatch) -> None:
    monkeypatch.delenv("RTXVIZ_SERVER", raising=False)


def test_a_url_that_is_no_server_address_is_a_usage_error(capsys) -> None:
    # found by the CLI review: `--url notaurl` exited 0 after dropping every event
    with pytest.raises(SystemExit) as exit_:
        cli.main(["lesson", "1", "--url", "notaurl"])
    assert exit_.value.code == 2 and "notaurl" in capsys.readouterr().err


def test_a_server_nobody_runs_is_an_error_naming_the_url(capsys) -> None:
    assert cli.main(["lesson", "1", "--url", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert "http://127.0.0.1:9" in err and "Traceback" not in err
