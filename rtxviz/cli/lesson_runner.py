"""The lesson runner: `rtxviz lesson` keeps serving the page and runs the lesson the page's "next" button asks for.

The page cannot run engine code, and the server knows the schema, not the engine; so the process that runs the
lessons serves the page itself, with one more route, ``POST /api/lessons/start`` (``{"name": "fan-out"}``), which
only queues the name: the lesson runs in the runner's own thread and streams to the server like any run, and
the page opens its run when it appears. A plain `rtxviz serve` has no such route (404): the page shows the
command instead.

>>> runner = LessonRunner()
>>> runner.request("chain-rule").run_name
'lesson 2: The chain rule'
>>> runner.request("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: rtxviz lesson: no lesson 'nope'; there are: neuron, chain-rule, fan-out, ...
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from ..lessons import Lesson, find, run_lesson


class StartLesson(BaseModel):
    """The page's request: the lesson to run, by name."""

    name: str = Field(min_length=1, max_length=64)


class LessonRunner:
    """A queue of lessons to run, filled by the route, drained by `serve` in the runner's thread."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Lesson] = queue.Queue(maxsize=32)

    def request(self, name: str) -> Lesson:
        """Queue the lesson called `name`; ValueError naming the lessons when there is none, queue.Full when the
        page has asked for more than 32 not yet run."""
        lesson = find(name)
        self._queue.put_nowait(lesson)
        return lesson

    def router(self) -> APIRouter:
        """``POST /lessons/start``: 202 with the run's name once queued, 404 naming the lessons for an unknown
        name, 429 when too many are waiting."""
        r = APIRouter()

        @r.post("/lessons/start", status_code=202)
        def start(body: StartLesson) -> dict[str, Any]:
            try:
                lesson = self.request(body.name)
            except ValueError as exc:
                raise HTTPException(404, str(exc)) from None
            except queue.Full:
                raise HTTPException(429, "rtxviz lesson: 32 lessons are waiting to run already") from None
            return {"name": lesson.name, "number": lesson.number, "run_name": lesson.run_name}

        return r

    def serve(self, url: str, token: str | None, stop: threading.Event,
              ran: Callable[[Lesson], None] = lambda lesson: None) -> None:
        """Run each requested lesson, streamed to `url`, until `stop` is set. A lesson that fails is reported on
        stderr and the runner goes on: the page can ask for another."""
        while not stop.is_set():
            try:
                lesson = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                run_lesson(lesson, url=url, token=token)
            except Exception as exc:  # one lesson's failure must not end the runner
                print(f"rtxviz lesson: {lesson.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            ran(lesson)
