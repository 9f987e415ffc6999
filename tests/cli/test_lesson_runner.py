"""The lesson runner behind the page's "next" button (rtxviz/cli/lesson_runner.py): queued names run in order, a
failing lesson is reported and the runner goes on, an unknown name and a full queue are refused."""

from __future__ import annotations

import queue
import threading

import pytest

from rtxviz.cli import lesson_runner
from rtxviz.cli.lesson_runner import LessonRunner


def test_a_failing_lesson_is_reported_and_the_runner_goes_on(monkeypatch, capsys):
    calls: list[str] = []

    def fake_run(lesson, url=None, token=None):
        calls.append(lesson.name)
        if lesson.name == "chain-rule":
            raise ConnectionError("server gone")

    monkeypatch.setattr(lesson_runner, "run_lesson", fake_run)
    runner, stop = LessonRunner(), threading.Event()
    ran: list[str] = []

    def record(lesson):
        ran.append(lesson.name)
        if len(ran) == 1:
            stop.set()

    runner.request("chain-rule")
    runner.request("fan-out")
    runner.serve("http://127.0.0.1:9", None, stop, ran=record)
    assert calls == ["chain-rule", "fan-out"] and ran == ["fan-out"]
    assert "rtxviz lesson: chain-rule failed: ConnectionError: server gone" in capsys.readouterr().err


def test_unknown_names_and_a_full_queue_are_refused():
    runner = LessonRunner()
    with pytest.raises(ValueError, match="no lesson 'x'"):
        runner.request("x")
    for _ in range(32):
        runner.request("neuron")
    with pytest.raises(queue.Full):
        runner.request("neuron")
