"""A large post reaches the page in parts (issue 15: the server stores and sends it a part at a time): the page
applies each part as it comes and draws once, when the last is in, and what it draws is what the same post sent
in one message gives."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from rtxviz.events.emitter import encode_event

from ..web.server import ThreadServer
from .conftest import _skip_reason
from .graphs import gpt_graph

# every WebSocket message's arrival, before the page's own handler sees it
WS_COUNT = """(() => { window.__wsEvents = []; const W = window.WebSocket;
  window.WebSocket = class extends W { constructor(...a) { super(...a); this.addEventListener('message', (m) => {
    const d = JSON.parse(m.data); if (d.type !== 'events') return;
    if (d.until && window.__firstPart === undefined) window.__firstPart = performance.now();
    window.__wsEvents.push([d.first_seq, d.events.length, d.until ?? null]); }); } }; })()"""


def _post(url: str, run_id: str, events: list[dict]) -> dict:
    body = b"\n".join(encode_event(e) for e in events)
    req = urllib.request.Request(f"{url}/api/runs/{run_id}/events?name={run_id}", data=body, method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _watch_a_burst(page, chunk: int, tmp_path) -> dict:
    """Open a live run, post one ~2,600-event step at once into a server storing parts of `chunk`; what the page
    received and drew."""
    from rtxviz.web.app import create_app

    events = gpt_graph(n_blocks=6, ops_per_block=200)
    with ThreadServer(create_app(db=str(tmp_path / f"runs{chunk}.db"), ingest_chunk_events=chunk)) as url:
        _post(url, "burst", events[:1])
        page.add_init_script(WS_COUNT)
        page.goto(f"{url}/?run=burst")
        page.wait_for_function("window.__rtxviz && window.__rtxviz.metrics.frames > 0")
        draws_before = page.evaluate("window.__rtxviz.metrics.drawLog.length")
        answer = _post(url, "burst", events[1:])
        last = answer["first_seq"] + answer["count"] - 1
        page.wait_for_function(f"window.__rtxviz.metrics.drawnSeq >= {last}")
        page.wait_for_timeout(300)  # any further draw of the same events would have come by now
        return {"events": len(events) - 1, "last": last,
                "messages": [m for m in page.evaluate("window.__wsEvents") if m[0] > 1],  # after run_start's
                "draws": page.evaluate("window.__rtxviz.metrics.drawLog.length") - draws_before,
                "total": page.locator("#counts").get_attribute("data-total"),
                "visible": page.locator("#counts").get_attribute("data-visible"),
                "drawn": sorted(page.evaluate("[...document.querySelectorAll('g.vnode')].map(n => n.dataset.vid)")),
                "latencies": len(page.evaluate("window.__rtxviz.metrics.latencies")),
                "errors": list(page.errors)}


def test_a_post_in_parts_is_drawn_once_and_as_one_message_draws_it(browser, tmp_path):
    if _skip_reason():
        pytest.skip(_skip_reason())
    seen = {}
    for chunk in (500, 100_000):  # in parts; in one message
        ctx = browser.new_context(viewport={"width": 1400, "height": 860}, bypass_csp=True)
        page = ctx.new_page()
        page.errors = []
        page.on("pageerror", lambda e, page=page: page.errors.append(str(e)))
        try:
            seen[chunk] = _watch_a_burst(page, chunk, tmp_path)
        finally:
            ctx.close()
    parts, whole = seen[500], seen[100_000]
    n = parts["events"]
    assert [m[0] for m in parts["messages"]] == list(range(2, 2 + n, 500))  # parts of 500, in order
    assert all(m[2] == parts["last"] for m in parts["messages"][:-1]) and parts["messages"][-1][2] is None
    assert len(whole["messages"]) == 1 and whole["messages"][0][2] is None
    assert parts["draws"] == 1, parts["draws"]  # the parts were held for the last, then drawn at once
    assert parts["latencies"] == whole["latencies"] == n + 1  # every event drawn, once (and run_start before)
    for key in ("total", "visible", "drawn"):
        assert parts[key] == whole[key], key
    assert int(parts["total"]) > 1000 and not parts["errors"] and not whole["errors"]


def test_a_post_that_fails_part_way_is_drawn_as_far_as_it_was_stored(browser, tmp_path):
    # the disk fills after a few parts (SQLite's page limit, as a full file system answers): the page got parts
    # that say more is coming, the rest never comes; it draws what it has once HOLD_MS (1 s) has passed
    if _skip_reason():
        pytest.skip(_skip_reason())
    from rtxviz.web.app import create_app

    events = gpt_graph(n_blocks=6, ops_per_block=200)
    app = create_app(db=str(tmp_path / "runs.db"), ingest_chunk_events=300)
    ctx = browser.new_context(viewport={"width": 1400, "height": 860}, bypass_csp=True)
    page = ctx.new_page()
    try:
        with ThreadServer(app) as url:
            _post(url, "burst", events[:1])
            page.add_init_script(WS_COUNT)
            page.goto(f"{url}/?run=burst")
            page.wait_for_function("window.__rtxviz && window.__rtxviz.metrics.frames > 0")
            draws_before = page.evaluate("window.__rtxviz.metrics.drawLog.length")
            store = app.state.store
            pages = store._w.execute("PRAGMA page_count").fetchone()[0]
            page_size = store._w.execute("PRAGMA page_size").fetchone()[0]
            store._w.execute(f"PRAGMA max_page_count = {pages + 250_000 // page_size}")
            body = b"\n".join(encode_event(e) for e in events[1:])
            req = urllib.request.Request(f"{url}/api/runs/burst/events", data=body, method="POST",
                                         headers={"Content-Type": "application/x-ndjson"})
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(req, timeout=30)
            answer = json.loads(info.value.read())
            assert info.value.code == 507 and answer["stored"] > 0, answer
            last = 1 + answer["stored"]
            page.wait_for_function(f"window.__rtxviz.metrics.drawnSeq >= {last}")
            messages = [m for m in page.evaluate("window.__wsEvents") if m[0] > 1]
            draws = page.evaluate("window.__rtxviz.metrics.drawLog")[draws_before:]
            first_arrival = page.evaluate("window.__firstPart")
            store._w.execute("PRAGMA max_page_count = 1073741823")
    finally:
        ctx.close()
    assert sum(m[1] for m in messages) == answer["stored"]  # every kept part shown, nothing more
    assert all(m[2] == len(events) for m in messages)  # each said the post ends at its last seq, never reached
    assert len(draws) == 1 and draws[0][1] == last
    assert draws[0][0] - first_arrival >= 900  # held, then drawn once HOLD_MS (1 s) had passed
