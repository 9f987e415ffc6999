"""A large post stored and shown in parts (issue 15): each part committed before any viewer sees it, the whole batch
validated before any part is stored, and a failure part-way answered with what was kept, so that nothing is ever
stored twice (the emitter counts the kept part as sent; a client that sends again sends only the rest).

On a store without `AppendsInChunks` (PostgreSQL) a post is one transaction and one message: the tests say so.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rtxviz.events.emitter import HttpTransport, Run
from rtxviz.store import AppendsInChunks, Notifying, StoreUnavailable
from rtxviz.web import create_app

from .server import ThreadServer

pytestmark = pytest.mark.timeout(120)
NDJSON = {"Content-Type": "application/x-ndjson"}
CHUNK = 100


def tool_events(n: int, pad: int = 0, start: int = 0) -> list[dict[str, Any]]:
    """`n` events, each telling itself apart by `i` (so that a duplicate or a gap shows)."""
    return [{"v": 1, "kind": "my.tool", "t": 1.0, "step": None, "i": start + k, **({"pad": "x" * pad} if pad else {})}
            for k in range(n)]


def ndjson(evs: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(e) for e in evs)


def stored_is(client: TestClient, run_id: str) -> list[int]:
    """The `i` of every stored event of the run, in seq order (and the seqs checked dense from 1)."""
    page = client.get(f"/api/runs/{run_id}/events", params={"limit": 10_000}).json()["events"]
    assert [e["seq"] for e in page] == list(range(1, len(page) + 1))
    return [e["i"] for e in page if e["kind"] == "my.tool"]


def test_a_large_post_reaches_the_viewer_in_parts_each_committed_first(tmp_path):
    app = create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=CHUNK)
    store, hub = app.state.store, app.state.hub
    seen_committed: list[tuple[int, int, int]] = []  # (first, last of the part, last seq a reader sees then)
    publish = hub.publish

    def checking_publish(run_id: str, first: int, texts: list[str], until: int | None = None) -> None:
        # the reader connection sees only what is committed (WAL): the part must be there already
        rows = store.events(run_id, after=first + len(texts) - 2, limit=1)
        seen_committed.append((first, first + len(texts) - 1, rows[0][0] if rows else 0))
        publish(run_id, first, texts, until)

    hub.publish = checking_publish
    with TestClient(app) as client:
        assert client.post("/api/runs/r/events", content=ndjson(tool_events(1)), headers=NDJSON).status_code == 200
        with client.websocket_connect("/api/runs/r/ws?after=1") as ws:
            assert ws.receive_json()["type"] == "hello"
            r = client.post("/api/runs/r/events", content=ndjson(tool_events(350, start=1)), headers=NDJSON)
            assert r.status_code == 200 and r.json() == {"run_id": "r", "first_seq": 2, "count": 350,
                                              # the one page streaming r (unsaid where other processes may hold more)
                                              **({} if isinstance(store, Notifying) else {"viewers": 1})}
            got, messages = [], []
            while len(got) < 350:
                m = ws.receive_json()
                messages.append(m)
                got += m["events"]
    assert [e["i"] for e in got] == list(range(1, 351)) and [e["seq"] for e in got] == list(range(2, 352))
    if isinstance(store, AppendsInChunks):
        # parts of CHUNK, in order; all but the last say where the post ends
        assert [m["first_seq"] for m in messages] == [2, 102, 202, 302]
        assert [m.get("until") for m in messages] == [351, 351, 351, None]
        assert [len(m["events"]) for m in messages] == [100, 100, 100, 50]
    else:  # one transaction, one message
        assert [m["first_seq"] for m in messages] == [2] and "until" not in messages[0]
    assert all(seen >= last for _, last, seen in seen_committed[1:]), seen_committed


def test_a_post_of_one_part_is_one_message_without_until(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=CHUNK)) as client:
        with client.websocket_connect("/api/runs/r/ws") as ws:
            assert ws.receive_json()["type"] == "hello"
            assert client.post("/api/runs/r/events", content=ndjson(tool_events(CHUNK)),
                               headers=NDJSON).status_code == 200
            m = ws.receive_json()
        assert m["first_seq"] == 1 and len(m["events"]) == CHUNK and "until" not in m


@pytest.mark.parametrize("bad_at", [0, 250, 349])
def test_a_bad_event_anywhere_in_a_large_post_stores_nothing(tmp_path, bad_at):
    with TestClient(create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=CHUNK)) as client:
        assert client.post("/api/runs/r/events", content=ndjson(tool_events(5)), headers=NDJSON).status_code == 200
        evs = tool_events(350, start=5)
        evs[bad_at]["t"] = "yesterday"  # t must be a number
        r = client.post("/api/runs/r/events", content=ndjson(evs), headers=NDJSON)
        assert r.status_code == 422 and f"event {bad_at}" in r.json()["detail"], r.text
        assert stored_is(client, "r") == list(range(5))
        # and a new run's large bad post does not even create the run
        assert client.post("/api/runs/new/events", content=ndjson(evs), headers=NDJSON).status_code == 422
        assert client.get("/api/runs/new").status_code == 404


def test_a_full_disk_part_way_keeps_the_parts_stored_and_says_so(tmp_path):
    # SQLite only: the disk fills at the file's page limit (SQLITE_FULL, as a full file system answers)
    with TestClient(create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=CHUNK)) as client:
        assert client.post("/api/runs/r/events", content=ndjson(tool_events(1, pad=2000)),
                           headers=NDJSON).status_code == 200
        store = client.app.state.store
        pages = store._w.execute("PRAGMA page_count").fetchone()[0]
        page_size = store._w.execute("PRAGMA page_size").fetchone()[0]
        # room for about two and a half parts of 100 events of ~2 kB
        store._w.execute(f"PRAGMA max_page_count = {pages + 500_000 // page_size}")
        batch = tool_events(600, pad=2000, start=1)
        with client.websocket_connect("/api/runs/r/ws?after=1") as ws:
            assert ws.receive_json()["type"] == "hello"
            r = client.post("/api/runs/r/events", content=ndjson(batch), headers=NDJSON)
            assert r.status_code == 507, r.text
            answer = r.json()
            stored = answer["stored"]
            assert 0 < stored < 600 and stored % CHUNK == 0, answer
            assert answer["first_seq"] == 2
            assert f"the batch's first {stored} events were stored (seq 2..{stored + 1}), the rest not" \
                in answer["detail"] and "send the rest again" in answer["detail"], answer
            shown: list[dict] = []
            while len(shown) < stored:  # what was kept was shown, and nothing more
                shown += ws.receive_json()["events"]
        assert [e["i"] for e in shown] == list(range(1, stored + 1))
        assert stored_is(client, "r") == list(range(stored + 1))
        store._w.execute("PRAGMA max_page_count = 1073741823")  # space freed: the rest, and only the rest, again
        r = client.post("/api/runs/r/events", content=ndjson(batch[stored:]), headers=NDJSON)
        assert r.status_code == 200 and r.json()["first_seq"] == 2 + stored
        assert stored_is(client, "r") == list(range(601))


def test_an_unavailable_store_part_way_is_503_with_what_was_kept(tmp_path):
    app = create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=CHUNK)
    store = app.state.store
    if not isinstance(store, AppendsInChunks):
        pytest.skip("a store without AppendsInChunks stores a post in one transaction: all or nothing")
    append, calls = store.append, []

    def failing_third(*args: Any, **kwargs: Any) -> Any:  # the database becomes unwritable at the third part
        calls.append(1)
        if len(calls) == 3:
            raise StoreUnavailable(f"{store.path}: disk I/O error")
        return append(*args, **kwargs)

    store.append = failing_third
    with TestClient(app) as client:
        r = client.post("/api/runs/r/events", content=ndjson(tool_events(450)), headers=NDJSON)
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        assert r.json()["stored"] == 200 and r.json()["first_seq"] == 1
        assert stored_is(client, "r") == list(range(200))
        assert client.get("/api/runs/r").json()["n_events"] == 200  # the lobby's record counts the kept part


def test_bounds_are_checked_for_the_whole_post_before_any_part(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=CHUNK)) as client:
        store = client.app.state.store
        if not isinstance(store, AppendsInChunks):
            pytest.skip("a store without AppendsInChunks stores a post in one transaction: all or nothing")
        store.max_events_per_run = 300
        r = client.post("/api/runs/r/events", content=ndjson(tool_events(301)), headers=NDJSON)
        assert r.status_code == 507 and r.json()["stored"] == 0 and "max_events_per_run" in r.json()["detail"]
        assert client.get("/api/runs/r").status_code == 404


def wait_for(cond: Any, what: str) -> None:
    for _ in range(600):
        if cond():
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_emitter_counts_a_kept_part_as_sent_and_never_sends_it_again(tmp_path):
    # SQLite only (a full file). watch()'s own batches are at most 2,000 events; this one sends 500 at a time into a
    # server that stores parts of 100, and the disk fills during a batch
    app = create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=CHUNK)
    store = app.state.store
    with ThreadServer(app) as url:
        # a long flush interval: batches go when 500 events are queued (and at close)
        run = Run(HttpTransport(url, timeout=30), run_name="chunks", batch_size=500, flush_interval=30,
                  close_timeout=20, run_id="emit").start()
        pad = ["x" * 190] * 10  # ~2 kB an event (the emitter cuts a string at 200 characters)
        for k in range(500):
            run.emit("my.tool", i=k, pad=pad)
        wait_for(lambda: run.stats()["sent"] >= 500, "the first batches")
        pages = store._w.execute("PRAGMA page_count").fetchone()[0]
        page_size = store._w.execute("PRAGMA page_size").fetchone()[0]
        store._w.execute(f"PRAGMA max_page_count = {pages + 500_000 // page_size}")  # about two and a half parts
        for k in range(500, 1000):
            run.emit("my.tool", i=k, pad=pad)
        wait_for(lambda: run.stats()["failed_batches"], "a batch the full disk refuses")
        store._w.execute("PRAGMA max_page_count = 1073741823")  # space again
        # past the sender's back-off (a close during it drops what is queued, a rule of its own)
        wait_for(lambda: time.monotonic() > run._retry_at, "the back-off")
        for k in range(1000, 1010):
            run.emit("my.tool", i=k)
        run.close()
        stats = run.stats()
        with TestClient(app) as client:
            kept = stored_is(client, "emit")
    assert stats["failed_batches"] == 1 and "PartlyStored" in stats["last_error"], stats
    assert kept == sorted(set(kept)), "an event stored twice, or out of order"
    lost = sorted(set(range(1010)) - set(kept))
    assert lost and lost == list(range(lost[0], lost[-1] + 1))  # the refused batch's unstored rest, nothing else
    assert 0 < lost[0] % 500 or lost[0] > 500  # the refused batch had a part stored before the failure
    # what the server kept counts as sent (with run_start, the dropped report and run_end), only the rest as dropped
    assert stats["send_dropped"] == len(lost) and stats["dropped"] == len(lost)
    assert stats["sent"] == len(kept) + 3
