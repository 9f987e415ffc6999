"""Lessons: short narrated engine runs for the live page (`rtxviz lesson`, issue 15).

Each lesson is a Markdown file here, ``NN-name.md`` (its first ``# `` line is the title), and a Python file
``lNN_name.py`` beside it with ``body(run)``: a real engine run, streamed by `rtxviz.events.watch`. The lesson's
text travels in the run itself, as a ``lesson`` event (a generic kind: name, number, title, text, the next
lesson) sent before the first step, so the live page and an exported HTML file show it beside the graph without
another route; the page renders the Markdown itself, as text nodes only (no HTML from the file reaches the page
as markup). The run_start's meta names the lesson too (``meta["lesson"]``), for listing runs.

>>> [lesson.name for lesson in catalog()][:3]
['neuron', 'chain-rule', 'fan-out']
>>> find("neuron").title
'A neuron by hand'
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Lesson:
    """One lesson: `name` (from the file name), its `title`, its Markdown `text` and the module that runs it."""

    number: int
    name: str
    title: str
    text: str
    module: str

    def body(self) -> Callable[[Any], None]:
        """The lesson's engine run: ``body(run)`` with the `watch` run it streams into."""
        return importlib.import_module(f"{__name__}.{self.module}").body

    def event(self, next_lesson: Lesson | None) -> dict[str, Any]:
        """The ``lesson`` event the run carries for the page (the whole text: run_start's meta would cut it)."""
        nxt = None if next_lesson is None else {"name": next_lesson.name, "title": next_lesson.title}
        return {"v": 1, "kind": "lesson", "t": time.time(), "step": None, "name": self.name, "title": self.title,
                "number": self.number, "text": self.text, "next": nxt}

    @property
    def run_name(self) -> str:
        return f"lesson {self.number}: {self.title}"


def catalog() -> list[Lesson]:
    """Every lesson, in order."""
    out = []
    for md in sorted(HERE.glob("[0-9][0-9]-*.md")):
        number, name = int(md.stem[:2]), md.stem[3:]
        text = md.read_text(encoding="utf-8")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), name)
        out.append(Lesson(number, name, title, text, f"l{md.stem[:2]}_{name.replace('-', '_')}"))
    return out


def find(name: str) -> Lesson:
    """The lesson called `name` (or numbered so); ValueError naming the lessons there are."""
    for lesson in catalog():
        if name in (lesson.name, str(lesson.number), f"{lesson.number:02d}"):
            return lesson
    raise ValueError(f"rtxviz lesson: no lesson {name!r}; there are: {', '.join(x.name for x in catalog())}")


def next_of(lesson: Lesson) -> Lesson | None:
    lessons = catalog()
    i = [x.name for x in lessons].index(lesson.name)
    return lessons[i + 1] if i + 1 < len(lessons) else None


def run_lesson(lesson: Lesson, url: str | None = None, token: str | None = None, transport: Any = None) -> Any:
    """Stream the lesson's engine run to the server at `url` (or into `transport`), its text in run_start; returns
    the closed Run (its `stats()` say what reached the server)."""
    from ..events import watch

    with watch(url, run_name=lesson.run_name, token=token, transport=transport,
               meta={"lesson": lesson.name}) as run:
        run.hook.sink(lesson.event(next_of(lesson)))  # straight to the queue: the text whole, not cut to 200
        lesson.body()(run)
    return run
