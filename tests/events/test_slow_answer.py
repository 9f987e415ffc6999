"""A server that stores a post but answers after the connect timeout (a server starved of CPU by the training
loop beside it, issue 21) must not have the post counted dropped: the sender waits `answer_timeout` for the
answer of a request that reached the server, and only a server that answers within neither is given up on."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import pytest

import rtxviz.events as events
from rtxviz.events.emitter import HttpTransport

pytestmark = pytest.mark.timeout(60)


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    delay = 0.0
    stored: list[bytes] = []

    def do_POST(self) -> None:  # http.server calls it by this name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        lines = [line for line in body.split(b"\n") if line]
        first = len(self.stored) + 1
        self.stored.extend(lines)  # stored at once, answered late: as a starved server does
        time.sleep(self.delay)
        answer = json.dumps({"run_id": "r", "first_seq": first, "count": len(lines), "viewers": 0}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def slow_server() -> Iterator[tuple[str, type[_SlowHandler]]]:
    handler = type("Handler", (_SlowHandler,), {"delay": 0.0, "stored": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_an_answer_later_than_the_connect_timeout_is_waited_for(slow_server) -> None:
    url, handler = slow_server
    handler.delay = 0.8
    run = events.watch(url, run_name="slow", timeout=0.3, close_timeout=10, flush_interval=0.01)
    with run:
        for i in range(5):
            run.emit("my.tick", i=i)
    stats = run.stats()
    assert stats["dropped"] == 0, stats
    assert stats["sent"] == len(handler.stored) == 7  # run_start, 5 ticks, run_end


def test_a_server_that_never_answers_is_given_up_on_after_answer_timeout(slow_server) -> None:
    url, handler = slow_server
    handler.delay = 5.0
    transport = HttpTransport(url, timeout=0.3, answer_timeout=0.8)
    run = events.Run(transport, run_name="hung")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        transport.send(run, [b'{"v":1,"kind":"my.tick","t":0.0,"step":null}'], 0)
    assert 0.7 <= time.monotonic() - t0 < 3.0
    transport.close()


def test_the_answer_timeout_is_never_shorter_than_the_connect_timeout() -> None:
    assert HttpTransport("http://127.0.0.1:9", timeout=5.0, answer_timeout=1.0).answer_timeout == 5.0
    assert HttpTransport("http://127.0.0.1:9").answer_timeout >= 30.0
