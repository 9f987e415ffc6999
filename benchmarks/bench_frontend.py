"""Viewer speed in headless Chromium (issue 7, item 7): the real server, the built page, Debian's chromium.

1. emit -> drawn latency at 1,000 events/s: events are stamped with their emission time (`t`, one per ms),
   posted as NDJSON every 100 ms (the emitter's default flush interval), and the page records, in the frame that
   draws them, `now - t` (same machine clock). p50/p95 over every event; and, per WebSocket message, emit ->
   arrival in the page of its first event (the batching and the server's share of the latency).
2. first render of a recorded 2,000-node graph: navigation start -> the frame that drew the graph's last event,
   grouped (default budget 300) and fully expanded (budget 5,000, every node an SVG element).
3. frames per second while panning that graph (a transform on the one viewport group, changed every frame).
4. expanding a collapsed ~2,500-node GPT-like graph in place (issue 15): "expand all", and a double-click on the
   folded blocks, from the click to the end of the next animation frame (the draw is synchronous); then whether
   the layout is right (every drawn edge points down: no output section left on top of block 0). Each is done
   `--repeat` times on a fresh page (median and min reported), and the last time under a Chromium trace that
   gives the renderer main thread's own CPU time (script, style, layout, paint): a figure the machine's load
   inflates much less than the wall clock.
5. a 13,000-event burst (issue 15): one recorded step's worth of events posted at once to a live run, each stamped
   with the moment of the post; p50/p95 of emit -> drawn over the burst, split into the server's part (the post
   answered, the WebSocket message arriving in the page) and the page's (that message -> drawn). The events are
   encoded before they are stamped, as `watch` has them (it encodes each event when it is emitted, on the training
   thread: at the post they are bytes in its queue); the cold encoding of 13,000 events in this process took
   73-137 ms of the window before the server saw a byte. The page is a new tab that nothing observes (a Chromium
   driven over the DevTools protocol by cdp_page.py, as a user's browser has no observer: Playwright relays every
   WebSocket frame's payload to this process, measured at ~135 ms more p95 on this burst); the same burst into a
   Playwright page is reported beside it (`under_playwright`), and one more there runs under a Chromium trace for
   the page's main-thread CPU (`message_task`: tracing costs the page CPU, so never in a measured burst).
6. search over a ~5,000-node graph drawn fully expanded (issue 16): a query typed one character at a time into
   the search box, each keystroke timed from its input event to the end of the next animation frame (matching,
   drawing the marks, and the browser's restyle and paint of them).
7. issue 16's sizes: first render of a recorded ~5,000-node graph fully expanded (a budget above its size, so no
   group collapses or folds), with the minimap drawn; frames per second panning a ~2,600-node graph fully expanded.
8. history of a parameter over 10,000 steps (issue 16): a run of 10,000 steps (each with its optimizer_step
   report, the last with the graph), the parameter's node clicked; from the click to the first animation frame
   after its sparklines are drawn (GET /api/runs/{id}/history, the JSON, the two sparklines), the history's cache
   emptied before each of 5 tries; and the inspector redrawn from the cache (the sparklines alone).

    python benchmarks/bench_frontend.py [--seconds 8] [--repeat 3] [--only expand,live,burst] [--json out.json]
                                        [--server process|thread] [--static DIR (with --server thread)]

The server is `rtxviz serve` in a process of its own (`--server process`, the default), as a user runs it. With
`--server thread` it runs in a thread of this process, as the browser tests run it (needed for `--static`, which
serves another build of the page): it then shares this process's interpreter lock and garbage collector with
Playwright and the benchmark's own events (a young-generation collection scanning the burst's freshly built
13,000 event dicts cost 26-52 ms inside the server's ingest, measured).

Needs the built frontend (cd frontend && npm ci && npm run build) and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rtxviz.events.emitter import encode_event  # noqa: E402
from tests.browser.conftest import ServerThread, post_events  # noqa: E402
from tests.browser.graphs import big_graph, gpt_graph  # noqa: E402
from tests.browser.shared_browser import CHROMIUM, LAUNCH_ARGS  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from cdp_page import CdpBrowser  # noqa: E402
from serving import server_process  # noqa: E402

TARGETS = {"latency_p95_ms": 150, "first_render_ms": 1500, "pan_fps": 30, "expand_ms": 300, "burst_p95_ms": 400,
           "search_keystroke_ms": 50, "first_render_5k_ms": 1000, "pan_fps_2500": 50,
           "history_10k_ms": 200}
# every drawn edge points down (the layered placement's promise), from the nodes' transforms (an edge that passes
# through the part drawn, its end not drawn, is left to EDGES_UP_ALL)
EDGES_UP = """() => {
  const pos = {};
  for (const n of document.querySelectorAll('g.vnode')) {
    const m = /translate\\(([-\\d.e]+),([-\\d.e]+)\\)/.exec(n.getAttribute('transform'));
    pos[n.dataset.vid] = +m[2];
  }
  return [...document.querySelectorAll('path.edge')].filter(e => e.dataset.to in pos && e.dataset.from in pos
    && !(pos[e.dataset.to] > pos[e.dataset.from])).length;
}"""
# the same over every visible edge, drawn or not, from the page's positions (a large drawing builds only the part
# near the view: frontend/src/cull.ts); and the drawn nodes that are not where those positions say
EDGES_UP_ALL = """() => { const p = window.__rtxviz.pane, pos = p.place.pos;
  return p.visible.edges.filter(e => !(pos.get(e.to).y > pos.get(e.from).y)).length; }"""
DRAWN_ELSEWHERE = """() => { const pos = window.__rtxviz.pane.place.pos;
  return [...document.querySelectorAll('g.vnode')].filter(n => {
    const m = /translate\\(([-\\d.e]+),([-\\d.e]+)\\)/.exec(n.getAttribute('transform')), p = pos.get(n.dataset.vid);
    return !p || Math.abs(+m[1] + 75 - p.x) > 0.01 || Math.abs(+m[2] + 22 - p.y) > 0.01; }).length; }"""
# the click, then the end of the next animation frame (the click's draw is synchronous in its handler); the
# handler's own share too; user-timing marks bracket it for the trace
TIMED = """(sel) => new Promise(done => {
  const el = document.querySelector(sel); performance.mark('rtxviz-expand-0'); const t0 = performance.now();
  if (sel === '#expand-btn') el.click(); else el.dispatchEvent(new MouseEvent('dblclick', {bubbles: true}));
  const handler = performance.now() - t0;
  requestAnimationFrame(() => setTimeout(() => {
    performance.mark('rtxviz-expand-1'); done([performance.now() - t0, handler]);
  }, 0));
})"""
# what the renderer's main thread did between the marks, by its own CPU time (trace events' tdur), in ms
TRACE_PARTS = {"script": ("EventDispatch", "FunctionCall", "TimerFire", "FireAnimationFrame"),
               "style": ("UpdateLayoutTree",), "layout": ("Layout",), "paint": ("PrePaint", "Paint", "Layerize")}
# every WebSocket message's arrival (Date.now()) and its first event's emission time `t` (events come in order)
WS_LOG = """(() => { window.__wsLog = []; const W = window.WebSocket;
  window.WebSocket = class extends W { constructor(...a) { super(...a); this.addEventListener('message', (m) => {
    const t = typeof m.data === 'string' ? /"t":([0-9.e+-]+)/.exec(m.data.slice(0, 4000)) : null;
    window.__wsLog.push([Date.now(), t ? +t[1] * 1000 : null]); }); } }; })()"""


def _main_thread_cpu(trace: bytes) -> dict:
    """Main-thread CPU ms per part (TRACE_PARTS) between the rtxviz-expand marks of a Chromium trace."""
    data = json.loads(trace)
    evs = data["traceEvents"] if isinstance(data, dict) else data
    marks = {e["name"]: e["ts"] for e in evs if e.get("name", "").startswith("rtxviz-expand-")}
    main = {(e["pid"], e["tid"]) for e in evs if e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}
    t0, t1 = marks.get("rtxviz-expand-0"), marks.get("rtxviz-expand-1")
    if t0 is None or t1 is None:
        return {}
    part_of = {name: part for part, names in TRACE_PARTS.items() for name in names}
    out = dict.fromkeys(TRACE_PARTS, 0.0)
    end = -1.0  # nested events (a FunctionCall inside an EventDispatch) are counted once: the outer one
    for e in sorted((e for e in evs if (e.get("pid"), e.get("tid")) in main and e.get("ph") == "X"
                     and e.get("name") in part_of and t0 - 1000 <= e["ts"] <= t1), key=lambda e: e["ts"]):
        if e["ts"] + e.get("dur", 0) <= end:
            continue
        end = e["ts"] + e.get("dur", 0)
        out[part_of[e["name"]]] += e.get("tdur", e.get("dur", 0)) / 1000
    return {k: round(v) for k, v in out.items()} | {"total": round(sum(out.values()))}


def _message_task_cpu(trace: bytes) -> dict:
    """The renderer main thread's task that handled the burst's WebSocket message (the one whose script ran
    longest): its wall and CPU ms, and the CPU of the garbage collections inside it."""
    data = json.loads(trace)
    evs = data["traceEvents"] if isinstance(data, dict) else data
    main = {(e["pid"], e["tid"]) for e in evs if e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}
    xs = [e for e in evs if (e.get("pid"), e.get("tid")) in main and e.get("ph") == "X"]
    calls = [e for e in xs if e.get("name") == "FunctionCall"]
    if not calls:
        return {}
    call = max(calls, key=lambda e: e.get("dur", 0))
    task = max((e for e in xs if e.get("name") == "RunTask" and e["ts"] <= call["ts"]
                and e["ts"] + e.get("dur", 0) >= call["ts"] + call.get("dur", 0)), key=lambda e: e.get("dur", 0),
               default=call)
    t0, t1 = task["ts"], task["ts"] + task.get("dur", 0)
    gc = sum(e.get("tdur", 0) for e in xs if e.get("name") in ("MinorGC", "MajorGC", "V8.GCScavenger")
             and t0 <= e["ts"] <= t1)
    return {"wall_ms": round(task.get("dur", 0) / 1000, 1), "cpu_ms": round(task.get("tdur", 0) / 1000, 1),
            "gc_cpu_ms": round(gc / 1000, 1)}


def _cpu_s(cdp) -> float:
    """The page's renderer process CPU time so far (s), all its threads (main, raster, compositor, workers): on a
    loaded machine, wall-clock figures grow with the load and this one far less, so both are reported."""
    return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "ProcessTime")


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def _post_ndjson(url: str, run_id: str, events: list[dict], name: str) -> None:
    # encoded as `watch` encodes them (encode_event: orjson, ~0.6 us an event); the stdlib's json.dumps took
    # ~180 ms of a 13,000-event burst's emit -> drawn on the bench's side, before the server saw a byte
    _post_body(url, run_id, b"\n".join(encode_event(e) for e in events), name)


def _post_body(url: str, run_id: str, body: bytes, name: str) -> None:
    req = urllib.request.Request(f"{url}/api/runs/{run_id}/events?name={name}", data=body, method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()


def live_stream_events(seconds: float) -> list[dict]:
    """Training-like steps of a ~250-node model (nodes, then a backward with a grad per node), repeated."""
    step_events = big_graph(n_blocks=4, ops_per_block=50)
    body = [e for e in step_events if e["kind"] not in ("run_start",)]
    out = [step_events[0]]
    step = 0
    while len(out) < seconds * 1000:
        for e in body:
            e2 = dict(e)
            if e2["kind"] == "leaf" and step > 0:
                continue  # leaves are announced once per run
            e2["step"] = step
            out.append(e2)
        step += 1
    return out[: int(seconds * 1000)]


def bench_latency(browser, url: str, seconds: float) -> dict:
    events = live_stream_events(seconds)
    _post_ndjson(url, "bench-live", events[:1], "bench-live")  # the run exists before the page opens
    page = browser.new_page()
    page.add_init_script(WS_LOG)
    page.goto(f"{url}/?run=bench-live")
    page.wait_for_function("window.__rtxviz && window.__rtxviz.metrics.frames > 0", timeout=15_000)
    page.evaluate("window.__rtxviz.metrics.latencies.length = 0; window.__wsLog.length = 0")
    rate = 1000.0
    t0 = time.time()
    i = 1
    sent = 1
    while i < len(events):
        now = time.time()
        due = min(len(events), 1 + int((now - t0) * rate))
        batch = []
        for k in range(i, due):  # each event stamped with the moment it was due: its emission time
            e = events[k]
            e["t"] = t0 + (k - 1) / rate
            batch.append(e)
        if batch:
            _post_ndjson(url, "bench-live", batch, "bench-live")
            sent += len(batch)
        i = due
        time.sleep(max(0.0, 0.1 - (time.time() - now)))
    elapsed = time.time() - t0
    page.wait_for_function(f"window.__rtxviz.metrics.drawnSeq >= {sent}", timeout=30_000)
    lat = page.evaluate("window.__rtxviz.metrics.latencies")
    arrive = [a - t for a, t in page.evaluate("window.__wsLog") if t is not None]
    page.close()
    return {"events": sent, "rate_per_s": round(sent / elapsed), "latency_p50_ms": round(_pct(lat, 0.5), 1),
            "latency_p95_ms": round(_pct(lat, 0.95), 1), "latency_max_ms": round(max(lat), 1), "n": len(lat),
            # a message's first event, emitted -> in the page: the 100 ms batching and the server's share
            "ws_arrival_p50_ms": round(_pct(arrive, 0.5), 1), "ws_arrival_p95_ms": round(_pct(arrive, 0.95), 1)}


def bench_big(browser, url: str, budget: int, run: str = "big") -> dict:
    page = browser.new_page()
    last = int(json.loads(urllib.request.urlopen(f"{url}/api/runs/{run}").read())["n_events"])
    page.goto(f"{url}/?run={run}&budget={budget}")
    page.wait_for_function(f"window.__rtxviz && window.__rtxviz.metrics.drawnSeq >= {last}", timeout=30_000)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    cpu_first = _cpu_s(cdp)  # the renderer started with this navigation: its CPU time is what the load cost
    log = page.evaluate("window.__rtxviz.metrics.drawLog")
    first = next(t for t, seq in log if seq >= last)
    total = int(page.locator("#counts").get_attribute("data-total"))
    shown = page.evaluate("document.querySelectorAll('g.vnode').length")
    visible = int(page.locator("#counts").get_attribute("data-visible"))
    edges = page.evaluate("document.querySelectorAll('path.edge').length")
    # what a person sees on opening the run (before the panning below moves the view away)
    page.screenshot(path=str(ROOT / "test-artifacts" / f"bench-{run}-budget{budget}.png"))
    page.wait_for_timeout(500)  # the frame after the draw (its style, layout and paint) is not part of the pan
    cpu0 = _cpu_s(cdp)
    fps = page.evaluate("""() => new Promise(done => {
        const app = window.__rtxviz, v = app.view; const k = v.k; let n = 0; const t0 = performance.now();
        function tick(now) {
            n++; const s = (now - t0) / 1000;
            v.setTransform(200 * Math.sin(s * 2), 150 * Math.cos(s * 2) - 200 * s, k);
            if (now - t0 < 3000) requestAnimationFrame(tick); else done(n / ((now - t0) / 1000));
        }
        requestAnimationFrame(tick);
    })""")
    pan_cpu = _cpu_s(cdp) - cpu0
    page.close()
    frames = fps * 3.0
    return {"budget": budget, "graph_nodes": total, "visible_items": visible, "drawn_nodes": shown,
            "drawn_edges": edges,
            "first_render_ms": round(first), "pan_fps": round(fps, 1),
            # renderer CPU until the last event was drawn, and per pan frame; the fps that CPU time allows (at most
            # the display's 60) if the renderer had a core to itself
            "first_render_cpu_ms": round(cpu_first * 1000), "pan_cpu_ms_per_frame": round(pan_cpu * 1000 / frames, 2),
            "pan_fps_cpu_bound": round(min(60.0, frames / pan_cpu), 1) if pan_cpu > 0 else None}


def bench_expand(browser, url: str, how: str, repeat: int = 3) -> dict:
    """Open the collapsed GPT-like run, expand it in place (`how`: "expand all" or "unfold"), time it; `repeat`
    times on a fresh page, the last under a trace (its main-thread CPU time by part)."""
    walls, handlers, cpu = [], [], {}
    for i in range(repeat):
        page = browser.new_page()
        page.goto(f"{url}/?run=gpt")
        page.wait_for_function("document.querySelector('g.vnode.kind-fold')", timeout=30_000)
        page.wait_for_timeout(500)  # let the collapsed view's own layout land first
        before = page.evaluate("document.querySelectorAll('g.vnode').length")
        traced = i == repeat - 1
        if traced:
            browser.browser.start_tracing(page=page, categories=["devtools.timeline", "blink.user_timing"])
        ms, handler = page.evaluate(TIMED, "#expand-btn" if how == "expand all" else "g.vnode.kind-fold")
        if traced:
            cpu = _main_thread_cpu(browser.browser.stop_tracing())
        walls.append(ms)
        handlers.append(handler)
        shown = int(page.locator("#counts").get_attribute("data-visible"))
        drawn = page.evaluate("document.querySelectorAll('g.vnode').length")
        up = page.evaluate(EDGES_UP)
        up_all = page.evaluate(EDGES_UP_ALL)
        elsewhere = page.evaluate(DRAWN_ELSEWHERE)
        page.close()
    return {"how": how, "items_before": before, "items_after": shown, "drawn_after": drawn,
            "edges_not_pointing_down_all": up_all, "drawn_nodes_misplaced": elsewhere,
            "expand_ms": round(_pct(walls, 0.5)),
            "expand_ms_min": round(min(walls)), "handler_ms": round(_pct(handlers, 0.5)),
            "per_try_ms": [round(x) for x in walls], "main_thread_cpu_ms": cpu, "edges_not_pointing_down": up}


# one keystroke: the input event (the search matches and marks synchronously in its handler), then the end of the
# next animation frame (the restyle and paint of the marks)
KEYSTROKE = """(text) => new Promise(done => {
  const el = document.querySelector('#search'); const t0 = performance.now();
  el.value = text; el.dispatchEvent(new Event('input', {bubbles: true}));
  const handler = performance.now() - t0;
  requestAnimationFrame(() => setTimeout(() => done([performance.now() - t0,
    +document.querySelector('#search-count').dataset.count || 0, handler]), 0));
})"""


def bench_search(browser, url: str, query: str = "layers.17.mlp") -> dict:
    """Type `query` into the search box of the fully expanded 5,000-node run, one character at a time."""
    page = browser.new_page()
    last = int(json.loads(urllib.request.urlopen(f"{url}/api/runs/big5k").read())["n_events"])
    page.goto(f"{url}/?run=big5k&budget=5000")
    page.wait_for_function(f"window.__rtxviz && window.__rtxviz.metrics.drawnSeq >= {last}", timeout=60_000)
    page.wait_for_selector("body[data-layouts]", timeout=60_000)
    layouts = int(page.evaluate("document.body.dataset.layouts"))
    page.click("#expand-btn")  # identical blocks fold even within the budget: open everything
    page.wait_for_function("+document.querySelector('#counts').dataset.visible >= 5000", timeout=120_000)
    # the expanded graph's own layout (in the worker, when one runs at this size) may still land; let it try
    page.wait_for_timeout(3000)
    layouts_after = int(page.evaluate("document.body.dataset.layouts"))
    drawn = page.evaluate("document.querySelectorAll('g.vnode').length")
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    times, counts, handler, cpu = [], [], [], []
    for i in range(1, len(query) + 1):
        c0 = _cpu_s(cdp)
        ms, n, js = page.evaluate(KEYSTROKE, query[:i])
        cpu.append((_cpu_s(cdp) - c0) * 1000)
        times.append(ms)
        counts.append(n)
        handler.append(js)
    page.close()
    return {"drawn_nodes": drawn, "full_layout_landed_after_expand": layouts_after > layouts, "query": query,
            "keystrokes": len(times), "matches_last": counts[-1],
            "keystroke_p50_ms": round(_pct(times, 0.5), 1), "keystroke_max_ms": round(max(times), 1),
            "per_keystroke_ms": [round(x, 1) for x in times],
            # of which the input handler (matching and setting the classes); the rest is the browser's frame
            "handler_ms": [round(x, 1) for x in handler],
            # the renderer's CPU per keystroke (matching, marks, restyle, raster), the load's waiting left out
            "cpu_ms": [round(x, 1) for x in cpu], "cpu_p50_ms": round(_pct(cpu, 0.5), 1),
            "cpu_max_ms": round(max(cpu), 1)}


def history_run(steps: int = 10_000) -> list[dict]:
    """`steps` training steps of one parameter: each reports its optimizer step (gradient norm, update ratio, a
    norm that spans decades); the last also records its graph (the parameter feeding a matmul, then the loss)."""
    sh = dict(dtype="float32", device="cpu")
    evs = [{"v": 1, "kind": "run_start", "t": 0.0, "step": None, "name": "history10k"},
           {"v": 1, "kind": "leaf", "t": 0.0, "step": 0, "id": 1, "name": "model.fc.weight", "shape": [8, 8],
            "requires_grad": True, "param": True, **sh}]
    for st in range(steps):
        g = 10 ** (-3 + 4 * ((st * 37) % 1000) / 1000)  # 1e-3 .. 10, four decades
        evs.append({"v": 1, "kind": "step_begin", "t": 0.0, "step": st})
        if st == steps - 1:
            evs += [{"v": 1, "kind": "node", "t": 0.0, "step": st, "id": 1, "op": "matmul", "inputs": [{"leaf": 1}],
                     "shape": [8, 8], "module": "model.fc", **sh},
                    {"v": 1, "kind": "node", "t": 0.0, "step": st, "id": 2, "op": "sum", "inputs": [{"node": 1}],
                     "shape": [], **sh}]
        evs.append({"v": 1, "kind": "optimizer_step", "t": 0.0, "step": st, "optimizer": "SGD", "params": [
            {"leaf": 1, "name": "model.fc.weight", "grad_norm": g, "param_norm": 1.0, "update_norm": g * 0.01,
             "update_ratio": g * 0.01}]})
        evs.append({"v": 1, "kind": "step_end", "t": 0.0, "step": st})
    return evs


# click the node, then poll each animation frame until its sparklines are drawn: ms from the click
HISTORY_CLICK = """([key, n]) => new Promise(done => {
  window.__rtxviz.normHistory.reset();
  const el = [...document.querySelectorAll('g.vnode')].find(e => e.dataset.key === key);
  const t0 = performance.now();
  el.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  const poll = () => {
    const box = document.querySelector(`.norm-history[data-n="${n}"]`);
    if (box && box.dataset.drawn) done(performance.now() - t0); else requestAnimationFrame(poll);
  };
  requestAnimationFrame(poll);
})"""
HISTORY_REDRAW = """() => new Promise(done => {
  const t0 = performance.now();
  window.__rtxviz.inspector.render();
  const js = performance.now() - t0;
  requestAnimationFrame(() => setTimeout(() => done([performance.now() - t0, js]), 0));
})"""


def bench_history(browser, url: str, steps: int = 10_000, tries: int = 5) -> dict:
    """Click a parameter whose history has `steps` steps; time until its sparklines are drawn."""
    page = browser.new_page()
    last = int(json.loads(urllib.request.urlopen(f"{url}/api/runs/history10k").read())["n_events"])
    page.goto(f"{url}/?run=history10k")
    page.wait_for_function(f"window.__rtxviz && window.__rtxviz.metrics.drawnSeq >= {last}", timeout=120_000)
    page.wait_for_function("[...document.querySelectorAll('g.vnode')].some(e => e.dataset.key === 'L:model.fc.weight')")
    clicks = [page.evaluate(HISTORY_CLICK, ["L:model.fc.weight", steps]) for _ in range(tries)]
    redraws = [page.evaluate(HISTORY_REDRAW) for _ in range(tries)]
    scale = page.get_attribute("svg.spark-grad", "data-scale")
    page.close()
    return {"steps": steps, "click_to_drawn_ms": [round(x, 1) for x in clicks],
            "click_to_drawn_p50_ms": round(_pct(clicks, 0.5), 1), "click_to_drawn_max_ms": round(max(clicks), 1),
            "redraw_from_cache_ms": [round(x[0], 1) for x in redraws],
            "redraw_inspector_js_ms": [round(x[1], 1) for x in redraws], "scale": scale}


#: the emission time in the burst's pre-encoded events, replaced by the moment of the post (bench_burst)
_T_SENTINEL = 1234567.0


class _Burst(NamedTuple):
    """A burst encoded once, the emission time left as a sentinel (`stamp`) that each post replaces."""

    template: bytes
    stamp: bytes
    last_seq: int  # after the run's start event (seq 1)

    @staticmethod
    def of(events: list[dict]) -> _Burst:
        """The burst of `events[1:]` (events[0] starts the run)."""
        template = b"\n".join(encode_event({**e, "t": _T_SENTINEL}) for e in events[1:])
        stamp = b'"t":' + repr(_T_SENTINEL).encode()
        if template.count(stamp) != len(events) - 1:
            raise RuntimeError("the burst's events hold the emission-time sentinel elsewhere")
        return _Burst(template, stamp, len(events))


def _post_burst(url: str, run_id: str, burst: _Burst) -> tuple[float, float]:
    """Stamp every event of `burst` with now and post them at once; (now, when the post was answered)."""
    now = time.time()
    _post_body(url, run_id, burst.template.replace(burst.stamp, b'"t":' + repr(now).encode()), run_id)
    return now, time.time()


def _burst_once(browser, url: str, run_id: str, start: dict, burst: _Burst,
                traced: bool) -> tuple[tuple, bytes | None]:
    """The burst into a page Playwright drives (its network observer relays every WebSocket frame, see
    cdp_page.py) after the run's `start` event; ((now, answered, latencies, ws log), the trace or None)."""
    _post_ndjson(url, run_id, [start], run_id)
    page = browser.new_page()
    page.add_init_script(WS_LOG)
    page.goto(f"{url}/?run={run_id}")
    page.wait_for_function("window.__rtxviz && window.__rtxviz.metrics.frames > 0", timeout=15_000)
    page.evaluate("window.__rtxviz.metrics.latencies.length = 0; window.__wsLog.length = 0")
    if traced:  # the main thread's CPU in the message's task (the page's share as CPU, which load inflates less)
        browser.browser.start_tracing(page=page, categories=["devtools.timeline", "v8"])
    now, answered = _post_burst(url, run_id, burst)
    page.wait_for_function(f"window.__rtxviz.metrics.drawnSeq >= {burst.last_seq}", timeout=60_000)
    trace = browser.browser.stop_tracing() if traced else None
    lat = page.evaluate("window.__rtxviz.metrics.latencies")
    ws = page.evaluate("window.__wsLog")
    page.close()
    return (now, answered, lat, ws), trace


def _burst_unobserved(cdp: CdpBrowser, url: str, run_id: str, start: dict, burst: _Burst) -> tuple:
    """The burst into a new page that nothing observes but our scripts (cdp_page.py); (now, answered, latencies,
    ws log)."""
    _post_ndjson(url, run_id, [start], run_id)
    cdp.new_page()
    cdp.goto(f"{url}/?run={run_id}")
    cdp.wait_for("window.__rtxviz && window.__rtxviz.metrics.frames > 0", timeout=15)
    cdp.evaluate("window.__rtxviz.metrics.latencies.length = 0; window.__wsLog.length = 0")
    now, answered = _post_burst(url, run_id, burst)
    cdp.wait_for(f"window.__rtxviz.metrics.drawnSeq >= {burst.last_seq}", timeout=60)
    return now, answered, cdp.evaluate("window.__rtxviz.metrics.latencies"), cdp.evaluate("window.__wsLog")


def _burst_figures(now: float, answered: float, lat: list[float], ws: list) -> dict:
    drawn = max(lat)  # all drawn in one frame
    last_arrival = (max(a for a, _ in ws) - now * 1000) if ws else None
    return {"latency_p50_ms": round(_pct(lat, 0.5), 1), "latency_p95_ms": round(_pct(lat, 0.95), 1),
            "latency_max_ms": round(drawn, 1), "n": len(lat),
            # the server's share: the post answered (validated, stored), the last WebSocket message in the page
            "post_answered_ms": round((answered - now) * 1000), "ws_messages": len(ws),
            "ws_last_arrival_ms": None if last_arrival is None else round(last_arrival),
            # the page's share: that message parsed, applied and drawn
            "page_ms": None if last_arrival is None else round(drawn - last_arrival)}


def bench_burst(browser, url: str, n: int = 13_000) -> dict:
    """A live run gets `n` events in one post (a big model's step arriving at once); emit -> drawn over them in a
    new page that nothing observes (the figure); then the same into a page Playwright drives, as the figure was
    taken before (`under_playwright`); then once more there under a trace, for the page's main-thread CPU."""
    events = gpt_graph(n_blocks=12, ops_per_block=481)[: n + 1]  # run_start, then n events of one step
    start, burst = events[0], _Burst.of(events)
    with CdpBrowser(CHROMIUM, LAUNCH_ARGS, 1400, 860) as cdp:
        cdp.init_script(WS_LOG)
        _burst_unobserved(cdp, url, "burst-warm-up", start, burst)  # a browser started cold is not what a user has
        out = {"events": n} | _burst_figures(*_burst_unobserved(cdp, url, "burst", start, burst))
    out["under_playwright"] = _burst_figures(*_burst_once(browser, url, "burst-playwright", start, burst, False)[0])
    _, trace = _burst_once(browser, url, "burst-traced", start, burst, traced=True)
    # in the traced burst, the renderer main thread's task that handled the largest message (parse, apply, draw,
    # and what follows the draw in that task): wall, CPU, of which garbage collection
    out["message_task"] = _message_task_cpu(trace) if trace is not None else {}
    return out


@contextlib.contextmanager
def _server(args: argparse.Namespace, db: str) -> Iterator[str]:
    """The server the page talks to: `rtxviz serve` in a child process with its defaults (--server process), or a
    thread of this process serving `args.static` (--server thread)."""
    if args.server == "process":
        with server_process(db) as url:
            yield url
        return
    from rtxviz.cli.serve import tune_gc_for_serving
    from rtxviz.web.app import create_app

    # in this process: its collector set as `rtxviz serve` sets it (at CPython's default threshold a 13,000-event
    # post spent ~100 ms more in young collections that also scanned this process's own objects)
    tune_gc_for_serving()
    with ServerThread(create_app(db=db, static_dir=args.static)) as url:
        yield url


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--repeat", type=int, default=3, help="expand tries per way (fresh page each; median reported)")
    ap.add_argument("--static", type=Path, default=None,
                    help="serve this built viewer instead of rtxviz/web/static (to compare two builds, run by run; "
                         "with --server thread)")
    ap.add_argument("--server", choices=("process", "thread"), default="process",
                    help="`rtxviz serve` in its own process (default, as a user runs it), or a thread of this one")
    ap.add_argument("--only", default=None,
                    help="comma-separated parts: big, expand, live, burst, search, render5k, pan2500, history "
                         "(default all)")
    args = ap.parse_args()
    if args.static is not None and args.server != "thread":
        ap.error("--static serves another build from a server in this process: add --server thread")
    every = {"big", "expand", "live", "burst", "search", "render5k", "pan2500", "history"}
    parts = set(args.only.split(",")) if args.only else every
    if not (ROOT / "rtxviz" / "web" / "static" / "app.js").is_file():
        print("frontend not built: cd frontend && npm ci && npm run build", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    results: dict = {"server": args.server}
    with tempfile.TemporaryDirectory() as tmp, _server(args, f"{tmp}/runs.db") as url, sync_playwright() as p:
        # the page's CSP forbids eval, which Playwright's wait_for_function needs: a context that bypasses it
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS).new_context(
            bypass_csp=True, viewport={"width": 1400, "height": 860})
        if "big" in parts:
            big = big_graph(n_blocks=10, ops_per_block=160)
            post_events(url, "big", big)
            results["recorded_graph"] = {"nodes": sum(e["kind"] == "node" for e in big),
                                         "leaves": sum(e["kind"] == "leaf" for e in big), "events": len(big)}
            results["grouped"] = bench_big(browser, url, 300)
            results["expanded"] = bench_big(browser, url, 5000)
        if "expand" in parts:
            gpt = gpt_graph(n_blocks=12, ops_per_block=165)
            post_events(url, "gpt", gpt)
            results["gpt_graph"] = {"nodes": sum(e["kind"] in ("node", "leaf") for e in gpt)}
            results["expand_all"] = bench_expand(browser, url, "expand all", args.repeat)
            results["unfold"] = bench_expand(browser, url, "unfold", args.repeat)
        if "live" in parts:
            results["live"] = bench_latency(browser, url, args.seconds)
        if "burst" in parts:
            results["burst"] = bench_burst(browser, url)
        if "search" in parts:
            big5k = big_graph(n_blocks=25, ops_per_block=160)
            post_events(url, "big5k", big5k)
            results["search"] = bench_search(browser, url)
            results["search"]["graph_nodes"] = sum(e["kind"] in ("node", "leaf") for e in big5k)
        if "render5k" in parts:
            r5k = big_graph(n_blocks=25, ops_per_block=160)
            post_events(url, "r5k", r5k)
            results["render5k"] = bench_big(browser, url, 10_000, "r5k")
        if "pan2500" in parts:
            p2k = big_graph(n_blocks=13, ops_per_block=160)
            post_events(url, "p2k", p2k)
            results["pan2500"] = bench_big(browser, url, 10_000, "p2k")
        if "history" in parts:
            post_events(url, "history10k", history_run())
            results["history"] = bench_history(browser, url)
        browser.browser.close()
    ok = (parts == every
          and results["live"]["latency_p95_ms"] <= TARGETS["latency_p95_ms"]
          and all(results[m]["first_render_ms"] <= TARGETS["first_render_ms"] for m in ("grouped", "expanded"))
          and all(results[m]["pan_fps"] >= TARGETS["pan_fps"] for m in ("grouped", "expanded"))
          and all(results[m]["expand_ms"] <= TARGETS["expand_ms"] and not results[m]["edges_not_pointing_down"]
                  and not results[m]["edges_not_pointing_down_all"] and not results[m]["drawn_nodes_misplaced"]
                  for m in ("expand_all", "unfold"))
          and results["burst"]["latency_p95_ms"] <= TARGETS["burst_p95_ms"]
          and results["search"]["keystroke_max_ms"] <= TARGETS["search_keystroke_ms"]
          and results["render5k"]["first_render_ms"] <= TARGETS["first_render_5k_ms"]
          and results["pan2500"]["pan_fps"] >= TARGETS["pan_fps_2500"]
          and results["history"]["click_to_drawn_max_ms"] <= TARGETS["history_10k_ms"])
    results["targets"] = TARGETS
    results["load_average"] = [round(x, 2) for x in os.getloadavg()]
    results["all_targets_met"] = ok
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench_frontend"
    raise SystemExit(main())
