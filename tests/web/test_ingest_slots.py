"""At most `Settings.ingest_concurrency` posts are parsed and stored at once; the rest wait their turn, in order.

Measured on a real server: each post's `_ingest` is slowed (a sleep inside the worker thread, where the parse and
the commit run), four posts go at once, and the most that ran together is counted. Unbounded, all four would.
"""

from __future__ import annotations

import threading
import time
import urllib.request

import orjson
import pytest

import rtxviz.web.routers.ingest as ingest_route
from rtxviz.web import create_app

from .server import ThreadServer


def _post(url: str, run_id: str, events: list[dict]) -> int:
    body = b"\n".join(orjson.dumps(e) for e in events)
    req = urllib.request.Request(f"{url}/api/runs/{run_id}/events", data=body, method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status


def _most_at_once(tmp_path, monkeypatch, concurrency: int, posts: int = 4) -> tuple[int, list[int]]:
    real = ingest_route._ingest
    lock = threading.Lock()
    running, most = [0], [0]

    def slow_ingest(*args, **kwargs):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.15)
            return real(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(ingest_route, "_ingest", slow_ingest)
    app = create_app(db=str(tmp_path / "runs.db"), ingest_concurrency=concurrency)
    statuses: list[int] = []
    with ThreadServer(app) as url:
        threads = [threading.Thread(target=lambda i=i: statuses.append(_post(
            url, f"r{i}", [{"v": 1, "kind": "run_start", "t": 1.0, "step": None, "name": f"r{i}"}])))
            for i in range(posts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    return most[0], statuses


@pytest.mark.parametrize("concurrency", [1, 2])
def test_no_more_posts_are_stored_at_once_than_the_setting_allows(tmp_path, monkeypatch, concurrency):
    most, statuses = _most_at_once(tmp_path, monkeypatch, concurrency)
    assert statuses == [200] * 4  # every post is taken, in turn
    assert most == concurrency


def test_a_higher_setting_lets_that_many_run_together(tmp_path, monkeypatch):
    most, statuses = _most_at_once(tmp_path, monkeypatch, 4)
    assert statuses == [200] * 4
    assert most == 4


def test_a_setting_below_one_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="ingest_concurrency must be >= 1.*got 0"):
        create_app(db=str(tmp_path / "runs.db"), ingest_concurrency=0)
