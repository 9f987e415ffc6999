"""`rtxviz lesson list` (and a bare `rtxviz lesson`): every lesson's number, name and title in aligned columns,
exit 0. The expected lessons are read from the lesson files themselves (``NN-name.md``, first ``# `` line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rtxviz import cli

LESSONS = Path(__file__).resolve().parents[2] / "rtxviz" / "lessons"


def expected() -> list[tuple[str, str, str]]:
    """(number, name, title) of each lesson file, in file order."""
    rows = []
    for md in sorted(LESSONS.glob("[0-9][0-9]-*.md")):
        title = next(line[2:].strip() for line in md.read_text(encoding="utf-8").splitlines()
                     if line.startswith("# "))
        rows.append((str(int(md.stem[:2])), md.stem[3:], title))
    return rows


def check_columns(out: str) -> None:
    rows = expected()
    lines = out.splitlines()
    assert len(lines) == len(rows) > 10
    assert len({len(name) for _, name, _ in rows}) > 1  # names differ in length: alignment is tested
    for line, (number, name, title) in zip(lines, rows, strict=True):
        assert line.split(None, 2) == [number, name, title], line
    # each column starts at the same offset on every line (numbers right-aligned)
    name_at = {line.index(name, len(number)) for line, (number, name, _) in zip(lines, rows, strict=True)}
    title_at = {line.rindex(title) for line, (_, _, title) in zip(lines, rows, strict=True)}
    number_end = {line.index(number) + len(number) for line, (number, _, _) in zip(lines, rows, strict=True)}
    assert len(name_at) == len(title_at) == len(number_end) == 1, (name_at, title_at, number_end)


@pytest.mark.parametrize("argv", [["lesson", "list"], ["lesson"]])
def test_lesson_list_prints_aligned_columns(argv, capsys):
    assert cli.main(argv) == 0
    check_columns(capsys.readouterr().out)


def test_lesson_list_from_the_console():
    done = subprocess.run([sys.executable, "-m", "rtxviz.cli", "lesson", "list"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    check_columns(done.stdout)


def test_lesson_help_offers_list(capsys):
    with pytest.raises(SystemExit):
        cli.main(["lesson", "--help"])
    positional = capsys.readouterr().out.split("positional arguments:")[1].split("options:")[0]
    assert "'list'" in positional, positional


@pytest.mark.parametrize("flag", [["--all"], ["--export", "out"]])
def test_lesson_list_refuses_run_flags(flag, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lesson", "list", *flag]) == 2
    err = capsys.readouterr().err
    assert "rtxviz lesson list" in err and flag[0] in err
    assert not (tmp_path / "out").exists()
