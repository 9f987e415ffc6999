"""The debugging page's graph aids in a real Chromium (issue 16): the minimap, saved tensors on the graph and in the
inspector, and shapes on edges. Expected values come from the events posted, from the engine's own saved tensors
and memory accounting, or from geometry re-derived here."""

from __future__ import annotations

import math

import numpy as np

from rtxviz import Tensor, Variable, memory_stats
from rtxviz.engine.checkpoint.api import checkpoint

from .conftest import post_events
from .engine_runs import recorded
from .graphs import big_graph, known_graph
from .test_search import centre_offset
from .test_viewer import MATMUL, click_key, open_known

NODE_W, NODE_H = 150, 44  # place.ts
MINI_W, MINI_H, MINI_PAD = 200, 150, 6  # minimap.ts

NODE_POS = """() => Object.fromEntries([...document.querySelectorAll('g.vnode')].map(n => {
  const m = /translate\\(([-\\d.e]+),([-\\d.e]+)\\)/.exec(n.getAttribute('transform'));
  return [n.dataset.vid, [+m[1], +m[2]]];
}))"""


def open_big(page, server, blocks=4, ops=40):
    events = big_graph(blocks, ops)
    post_events(server, "big", events)
    total = sum(e["kind"] in ("node", "leaf") for e in events)
    page.goto(server + "/?budget=5000")
    page.wait_for_selector(f'#counts[data-total="{total}"]')
    page.click("#expand-btn")
    page.wait_for_function(f"document.querySelectorAll('g.vnode').length === {total}")
    return total


FRAMES = "() => new Promise(r => { let n = 0; const f = () => (++n < 4 ? requestAnimationFrame(f) : r()); f(); })"


def frames(page) -> None:
    """Let four animation frames pass (the minimap moves its rectangle at most every other frame)."""
    page.evaluate(FRAMES)


def settle(page) -> None:
    """Wait until a full layout has landed and no other follows within 0.6 s (positions no longer move)."""
    page.wait_for_selector("body[data-layouts]")
    last = None
    for _ in range(50):
        now = page.evaluate("document.body.dataset.layouts")
        if now == last:
            return
        last = now
        page.wait_for_timeout(600)
    raise AssertionError("layouts kept landing")


def test_place_constants_match_the_page(page, server):
    open_known(page, server)
    w, h = page.evaluate("() => { const r = document.querySelector('g.vnode rect.body');"
                         " return [+r.getAttribute('width'), +r.getAttribute('height')]; }")
    assert (w, h) == (NODE_W, NODE_H)


# -- minimap ----------------------------------------------------------------------------------------------------
def mini_fit(pos: dict[str, list[float]]) -> tuple[float, float, float]:
    """The minimap's scale and offset, re-derived from the nodes' boxes (top-left corners + the node size)."""
    x0 = min(x for x, _ in pos.values())
    y0 = min(y for _, y in pos.values())
    x1 = max(x for x, _ in pos.values()) + NODE_W
    y1 = max(y for _, y in pos.values()) + NODE_H
    k = min((MINI_W - 2 * MINI_PAD) / (x1 - x0), (MINI_H - 2 * MINI_PAD) / (y1 - y0))
    return k, (MINI_W - (x1 - x0) * k) / 2 - x0 * k, (MINI_H - (y1 - y0) * k) / 2 - y0 * k


def test_minimap_hidden_for_a_small_graph(page, server):
    open_known(page, server)
    frames(page)
    assert page.locator("#minimap").is_hidden()


def test_minimap_overview_viewport_click_drag_and_follow(page, server):
    total = open_big(page, server)
    settle(page)
    page.wait_for_function("!document.querySelector('#minimap').hidden")
    page.wait_for_function(f"window.__rtxviz.pane.minimap.drawnItems === {total}")
    pos = page.evaluate(NODE_POS)
    k, ox, oy = mini_fit(pos)
    # every node is drawn on the canvas: the pixel at a node's centre is not the blank background
    vid = sorted(pos, key=lambda v: pos[v][1])[len(pos) // 2]  # one halfway down the graph
    mx = ox + (pos[vid][0] + NODE_W / 2) * k
    my = oy + (pos[vid][1] + NODE_H / 2) * k
    # pixels: the node is drawn at its place (its colour, not the blank margin beside the graph's bounds)
    def pixel(x, y):
        return page.evaluate("""([x, y]) => {
          const c = document.querySelector('#minimap canvas'); const s = c.width / 200;
          return [...c.getContext('2d').getImageData(Math.round(x * s), Math.round(y * s), 1, 1).data]; }""", [x, y])
    margin = (ox / 2, my) if ox > 8 else (mx, oy / 2)
    assert ox > 8 or oy > 8  # the graph does not fill both ways: there is a margin to compare with
    assert pixel(mx, my)[:3] != pixel(*margin)[:3]
    # a click there centres the view on that node
    box = page.locator("#minimap").bounding_box()
    page.mouse.click(box["x"] + mx, box["y"] + my)
    assert centre_offset(page, vid) < NODE_H  # within the minimap's resolution of a node (under 1 px there)
    # the viewport's rectangle, re-derived from the view's transform and the canvas size
    def rect():  # where the browser shows the rectangle, relative to the minimap's box
        return page.evaluate("""() => { const b = document.querySelector('#minimap').getBoundingClientRect();
          const r = document.querySelector('#minimap .minimap-view').getBoundingClientRect();
          return [r.left - b.left, r.top - b.top, r.width, r.height]; }""")
    t = page.evaluate("(() => { const v = window.__rtxviz.view; return [v.tx, v.ty, v.k]; })()")
    sw, sh = page.evaluate("(() => { const r = document.querySelector('svg#graph').getBoundingClientRect();"
                           " return [r.width, r.height]; })()")
    frames(page)
    want = [ox + (-t[0] / t[2]) * k, oy + (-t[1] / t[2]) * k, sw / t[2] * k, sh / t[2] * k]
    assert all(math.isclose(a, b, abs_tol=0.2) for a, b in zip(rect(), want, strict=True)), (rect(), want)
    # the rectangle's centre is the clicked point
    r = rect()
    assert math.hypot(r[0] + r[2] / 2 - mx, r[1] + r[3] / 2 - my) < 1
    # it follows a zoom (the wheel on the graph): twice the zoom, half the rectangle
    before = rect()
    sb = page.locator("svg#graph").bounding_box()
    page.mouse.move(sb["x"] + sb["width"] / 2, sb["y"] + sb["height"] / 2)
    k0 = page.evaluate("window.__rtxviz.view.k")
    page.mouse.wheel(0, -200)
    page.wait_for_function(f"window.__rtxviz.view.k > {k0 * 1.01}")
    frames(page)
    k1 = page.evaluate("window.__rtxviz.view.k")
    assert math.isclose(rect()[2], before[2] * k0 / k1, rel_tol=0.01)
    # and a pan of the graph by dragging it: the rectangle moves by the pan over the scale
    before = rect()
    page.evaluate("(() => { const v = window.__rtxviz.view; v.setTransform(v.tx - 300, v.ty, v.k); })()")
    frames(page)
    assert math.isclose(rect()[0] - before[0], 300 / k1 * k, abs_tol=0.2)
    # a drag on the minimap moves the view with the pointer
    page.mouse.move(box["x"] + 40, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(box["x"] + 120, box["y"] + 100, steps=4)
    page.mouse.up()
    frames(page)
    r = rect()
    assert math.hypot(r[0] + r[2] / 2 - 120, r[1] + r[3] / 2 - 100) < 1
    assert page.errors == []


# -- saved tensors ------------------------------------------------------------------------------------------------
def saved_run():
    """x @ W -> tanh -> checkpoint(((h * 2).exp() * 3).tanh()) -> sum; the engine's own saved tensors per node id,
    and what the checkpointed function's ops hold when run without the checkpoint (memory_stats' current)."""
    truth: dict[int, list[tuple[str, int | None, int]]] = {}

    def seg(h):
        return ((h * 2.0).exp() * 3.0).tanh()

    def start():
        rng = np.random.default_rng(0)
        x = Variable.from_tensor(Tensor(rng.standard_normal((8, 16))), name="x")
        x.requires_grad = False
        w = Variable.from_tensor(Tensor(rng.standard_normal((16, 16)) * 0.1), name="model.w")
        return (x @ w).tanh()

    # not watched: the segment's ops without the checkpoint, what they would hold until backward
    h = start()
    before = memory_stats()["current"]
    plain = seg(h)
    truth[-1] = [("held", None, memory_stats()["current"] - before)]
    del plain, h

    def body(run):
        h = start()
        loss = checkpoint(seg, h).sum()
        stack, seen = [loss.grad_fn], set()
        while stack:
            n = stack.pop()
            if n is None or getattr(n, "_is_var", False) or n.id in seen:
                continue
            seen.add(n.id)
            rows = [("input", i, int(t.data.nbytes)) for i, t in enumerate(n.inputs or ()) if t is not None]
            if n.out_data is not None:
                rows.append(("output", None, int(n.out_data.nbytes)))
            truth[n.id] = rows
            stack.extend(n.next)
        truth[-2] = [("kept", None, int(h.data.nbytes))]
        loss.backward()

    return recorded("saved", body), truth


def test_saved_tensors_in_the_inspector_badges_and_checkpoint_savings(page, server):
    events, truth = saved_run()
    post_events(server, "saved", events)
    nodes = [e for e in events if e["kind"] == "node"]
    page.goto(server + "/")
    page.wait_for_function(f"document.querySelectorAll('g.vnode').length >= {len(nodes)}")
    page.wait_for_function("window.__rtxviz.history.graph && window.__rtxviz.history.graph.backward === 'done'")
    by_id = {e["id"]: e for e in nodes}
    keys = page.evaluate("() => Object.fromEntries([...window.__rtxviz.history.graph.nodes.values()]"
                         ".filter(n => n.kind === 'op').map(n => [n.id, n.key]))")
    matmul = next(e for e in nodes if e["op"] == "matmul")
    # the inspector lists the matmul's saved tensors: the data input x and the parameter W, neither an activation
    click_key(page, keys[str(matmul["id"])])
    rows = page.evaluate("() => [...document.querySelectorAll('#inspector-body .saved-row')]"
                         ".map(r => [r.dataset.slot, +r.dataset.bytes, r.classList.contains('not-counted')])")
    assert rows == [[f"input {i}" if role == "input" else role, b, True] for role, i, b in truth[matmul["id"]]]
    assert page.locator("#inspector-body .saved-total").get_attribute("data-bytes") == "0"
    # every forward node recorded before backward: the rows are the engine's saved tensors
    for nid, want in truth.items():
        if nid < 0 or nid not in by_id:
            continue
        click_key(page, keys[str(nid)])
        got = page.evaluate("() => [...document.querySelectorAll('#inspector-body .saved-row')]"
                            ".map(r => [r.dataset.slot, +r.dataset.bytes])")
        assert got == [[f"input {i}" if role == "input" else role, b] for role, i, b in want], by_id[nid]["op"]
    # the checkpoint node says what checkpointing saved: what its ops hold without it, less what it keeps
    ck = next(e for e in nodes if e["op"] == "checkpoint")
    click_key(page, keys[str(ck["id"])])
    held, kept = truth[-1][0][2], truth[-2][0][2]
    assert held == 2 * 8 * 16 * 8 and kept == 8 * 16 * 8  # by hand: exp's and tanh's outputs; the segment input
    assert page.locator("#inspector-body .saved-checkpoint").get_attribute("data-saved") == str(held - kept)
    # the toggle: a badge of bytes on each op node (the tanh before the checkpoint keeps its output: 1 KiB),
    # and the step's totals beside it
    assert page.evaluate("document.querySelectorAll('rect.saved-badge').length") == 0
    page.check("#saved-toggle")
    tanh = next(e for e in nodes if e["op"] == "tanh" and not e.get("recomputed") and e["id"] < ck["id"])
    badge = page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k).dataset.saved",
                          keys[str(tanh["id"])])
    assert badge == str(8 * 16 * 8)
    texts = page.evaluate("() => [...document.querySelectorAll('text.saved-badge-text')].map(t => t.textContent)")
    assert "1.00 KiB saved" in texts
    summary = page.locator("#saved-summary")
    assert summary.is_visible()
    assert summary.get_attribute("data-checkpoint-saved") == str(held - kept)
    # forward activations (not the recomputation): tanh's output and the checkpoint's kept input, one buffer each
    # time (the checkpoint keeps h, which tanh saved: an alias, counted once)
    fwd = [e for e in events[:next(i for i, e in enumerate(events) if e["kind"] == "backward_begin")]
           if e["kind"] == "node"]
    assert int(summary.get_attribute("data-activations")) == sum(
        s["bytes"] for e in fwd for s in e.get("saved", []) if "alias" not in s
        and not (s["role"] == "input" and "leaf" in e["inputs"][s.get("index", 0)]))
    # and on the graph: the checkpoint segment's label says what it saved
    label = page.locator("text.segment-label")
    assert label.get_attribute("data-saved") == str(held - kept)
    assert label.text_content().endswith(" · saved 1.00 KiB")
    page.uncheck("#saved-toggle")
    assert page.evaluate("document.querySelectorAll('rect.saved-badge').length") == 0
    assert label.get_attribute("data-saved") is None and "saved" not in label.text_content()
    assert page.errors == []


def test_group_total_is_the_sum_of_its_members(page, server):
    events = big_graph(4, 40)
    post_events(server, "big", events)
    page.goto(server + "/?budget=100")
    total = sum(e["kind"] in ("node", "leaf") for e in events)
    page.wait_for_selector(f'#counts[data-total="{total}"]')
    page.check("#saved-toggle")
    groups = page.evaluate("() => [...document.querySelectorAll('g.vnode')].filter(n => n.dataset.kind !== 'op'"
                           " && n.dataset.saved !== undefined).map(n => [n.dataset.vid, +n.dataset.saved])")
    assert groups
    # big_graph's events carry saved_bytes only (no per-tensor list): a group's total is its members' saved_bytes
    for vid, got in groups:
        members = page.evaluate("v => window.__rtxviz.pane.item(v).members.filter(m => m.kind === 'op')"
                                ".map(m => m.id)", vid)
        want = sum(e.get("saved_bytes", 0) for e in events if e["kind"] == "node" and e["id"] in set(members))
        assert got == want, vid
    assert page.errors == []


# -- shapes on edges -----------------------------------------------------------------------------------------------
def edge_labels(page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('text.edge-label')].map(t => {
      const b = t.getBBox(); return {from: t.dataset.from, to: t.dataset.to, text: t.textContent,
        x0: b.x, y0: b.y, x1: b.x + b.width, y1: b.y + b.height}; })""")


def test_shapes_on_edges_readable_and_toggled(page, server):
    open_known(page, server)
    page.wait_for_selector("body[data-layouts]")
    assert page.is_checked("#edge-shapes")  # a small graph: on by default
    labels = edge_labels(page)
    assert labels
    # each label is its source's output shape, from the events
    shapes = {(e["kind"], e["id"]): e["shape"] for e in known_graph() if e["kind"] in ("node", "leaf")}
    keyed = page.evaluate("() => Object.fromEntries([...window.__rtxviz.history.graph.nodes.values()]"
                          ".map(n => [n.key, [n.kind === 'op' ? 'node' : 'leaf', n.id]]))")
    for lab in labels:
        s = shapes[tuple(keyed[lab["from"]])]
        assert lab["text"] == "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"
    assert any(lab["from"] == MATMUL and lab["text"] == "(2, 2)" for lab in labels)
    # readable: no two labels overlap, and none sits on a node's box
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            assert not (a["x0"] < b["x1"] and b["x0"] < a["x1"] and a["y0"] < b["y1"] and b["y0"] < a["y1"]), (a, b)
    boxes = page.evaluate(NODE_POS)
    for lab in labels:
        for x, y in boxes.values():
            assert not (lab["x0"] < x + NODE_W and x < lab["x1"] and lab["y0"] < y + NODE_H and y < lab["y1"]), lab
    # every edge out of a node with one consumer is labelled (nothing crowds the known graph)
    edges_from_nodes = page.evaluate("() => [...document.querySelectorAll('path.edge')].filter(e =>"
                                     " window.__rtxviz.pane.item(e.dataset.from)?.node).length")
    assert len(labels) >= edges_from_nodes - 2
    page.uncheck("#edge-shapes")
    assert edge_labels(page) == []
    page.check("#edge-shapes")
    assert len(edge_labels(page)) == len(labels)
    assert page.errors == []


def test_shapes_on_edges_off_by_default_for_a_big_graph(page, server):
    open_big(page, server)
    assert not page.is_checked("#edge-shapes")
    assert edge_labels(page) == []
    page.check("#edge-shapes")
    labels = edge_labels(page)
    assert len(labels) > 50
    for i, a in enumerate(labels[:200]):
        for b in labels[i + 1:200]:
            assert not (a["x0"] < b["x1"] and b["x0"] < a["x1"] and a["y0"] < b["y1"] and b["y0"] < a["y1"])
    assert page.errors == []


# -- what a keystroke and a pan cost the drawing (the speed targets are measured by benchmarks/bench_frontend.py;
# these check the mechanisms behind them) --------------------------------------------------------------------------
WATCH = """() => { window.__mut = []; const svg = document.querySelector('svg#graph');
  window.__obs = new MutationObserver(ms => { for (const m of ms) window.__mut.push(
    [m.type, m.target === svg ? 'svg' : (m.target.id || m.target.getAttribute('class') || m.target.tagName),
     m.attributeName]); });
  window.__obs.observe(svg, {subtree: true, attributes: true, childList: true, characterData: true}); }"""
TAKE = "() => { window.__obs.takeRecords().forEach(m => window.__mut.push([m.type, '?', m.attributeName]));" \
       " window.__obs.disconnect(); return window.__mut; }"


def test_a_search_keystroke_changes_nothing_in_the_drawing(page, server):
    open_big(page, server)
    settle(page)  # nothing moves by itself any more
    page.evaluate(WATCH)
    for q in ("l", "la", "layers.2", "layers.2.mlp"):
        page.fill("#search", q)
        page.wait_for_function("document.querySelector('#search-count').dataset.count !== ''")
    page.wait_for_function("+document.querySelector('svg#marks').dataset.matches > 0")
    muts = page.evaluate(TAKE)
    # the search's look is in the overlay: the big drawing saw only its root's "searching" class, once
    assert muts == [["attributes", "svg", "class"]], muts[:10]
    n = int(page.locator("svg#marks").get_attribute("data-matches"))
    assert n == int(page.locator("#search-count").get_attribute("data-count"))
    assert page.errors == []


def test_a_pan_changes_only_the_viewport_transform_and_far_out_drops_arrowheads(page, server):
    open_big(page, server)
    settle(page)
    page.evaluate(WATCH)
    page.evaluate("""() => { const v = window.__rtxviz.view;
      for (let i = 0; i < 20; i++) v.setTransform(v.tx + 7, v.ty - 5, v.k); }""")
    muts = page.evaluate(TAKE)
    assert muts and all(m == ["attributes", "viewport", "transform"] for m in muts), muts[:10]
    marker = "() => getComputedStyle(document.querySelector('path.edge')).markerEnd"
    page.evaluate("(() => { const v = window.__rtxviz.view; v.setTransform(v.tx, v.ty, 1); })()")
    assert page.evaluate(marker) == 'url("#arrow")'
    page.evaluate("(() => { const v = window.__rtxviz.view; v.setTransform(v.tx, v.ty, 0.2); })()")
    assert page.evaluate(marker) == "none"
    assert page.errors == []
