"""The sender's cadence follows the server's answer: posts every `flush_interval` while a page may watch the run,
every `idle_flush_interval` while the server says none does (each post costs the server CPU on a machine that
trains). Against fake transports for the timing, and a real server with and without a WebSocket viewer for the
count it answers."""

from __future__ import annotations

import threading
import time

from websockets.sync.client import connect

import rtxviz.events as events
from rtxviz.events.emitter import HttpTransport, viewers_of
from rtxviz.web import create_app
from tests.web.server import ThreadServer


class Answering:
    """A transport that records when each post came and answers `viewers` (a callable of the post's index)."""

    def __init__(self, viewers) -> None:
        self.viewers, self.times = viewers, []
        self.lock = threading.Lock()

    def send(self, run, lines, dropped):
        with self.lock:
            self.times.append(time.monotonic())
            return self.viewers(len(self.times) - 1)

    def close(self):
        pass


def _stream(transport, seconds: float) -> Answering:
    """Custom events at ~500/s for `seconds`, flush 0.02 s, idle flush 0.4 s."""
    run = events.Run(transport, run_name="cadence", flush_interval=0.02, idle_flush_interval=0.4, close_timeout=5)
    run.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        run.emit("my.tick", i=1)
        time.sleep(0.002)
    run.close()
    return transport


def test_nobody_watching_posts_at_the_idle_interval() -> None:
    t = _stream(Answering(lambda i: 0), 1.3)
    gaps = [b - a for a, b in zip(t.times[1:-1], t.times[2:-1], strict=False)]  # the first and last are not paced
    assert 2 <= len(t.times) <= 6, t.times
    assert gaps and min(gaps) >= 0.35, gaps


def test_a_watched_run_or_an_unknown_answer_keeps_the_fast_cadence() -> None:
    for answer in (1, None):
        t = _stream(Answering(lambda i, a=answer: a), 1.0)
        assert len(t.times) >= 12, (answer, len(t.times))  # ~0.02 s apart: dozens; the idle cadence would give 3


def test_a_viewer_arriving_brings_the_fast_cadence_back_at_the_next_answer() -> None:
    t = _stream(Answering(lambda i: 0 if i < 2 else 1), 1.6)
    early = t.times[:3]
    assert early[2] - early[1] >= 0.35  # idle while nobody watched
    assert len(t.times) >= 3 + 10  # then fast again
    assert max(b - a for a, b in zip(t.times[3:-1], t.times[4:-1], strict=False)) < 0.3


def test_the_server_answers_how_many_pages_stream_the_run(tmp_path) -> None:
    app = create_app(db=str(tmp_path / "runs.db"))
    with ThreadServer(app) as url:
        http = HttpTransport(url)
        run = events.Run(http, run_name="v", run_id="viewed")
        line = b'{"v":1,"kind":"my.tick","t":1.0,"step":null,"i":1}'
        assert http.send(run, [line], 0) == 0
        with connect(url.replace("http", "ws") + "/api/runs/viewed/ws?after=0") as ws:
            assert '"hello"' in ws.recv(timeout=10)
            assert http.send(run, [line], 0) == 1
        deadline = time.monotonic() + 10
        while http.send(run, [line], 0) != 0:  # the page closed: the server lets it go
            assert time.monotonic() < deadline
            time.sleep(0.05)
        http.close()


def test_viewers_of_reads_only_a_count() -> None:
    assert viewers_of(b'{"viewers": 2}') == 2
    assert viewers_of(b'{"viewers": -1}') is None and viewers_of(b'{"viewers": "2"}') is None
    assert viewers_of(b"not json") is None and viewers_of(b"[1]") is None
