"""The viewer in a real Chromium: what the page shows for known event streams (see graphs.py)."""

from __future__ import annotations

import time

from .conftest import post_events, screenshot
from .graphs import XSS, big_graph, known_graph

# Hand-derived from the documented ramp (viridis stops over log10 norm, -7 .. 3): ‖g‖ = 1e-2 sits at 0.5, the middle
# stop (33, 145, 140); ‖g‖ = 1 sits at 0.7, i.e. 0.8 of the way from (33, 145, 140) to (94, 201, 98).
COLOUR_1E_2 = "rgb(33, 145, 140)"
COLOUR_1 = "rgb(82, 190, 106)"

MATMUL, ADD, CKPT, SUM, EXP = "model.fc|matmul|1", "model.fc|add|1", "model.block|checkpoint|1", "|sum|1", \
    "model.aux|exp|1"
RELU, MUL = "rc1:model.block|relu|1", "rc1:model.block|mul|1"
RC_LEAF = "L:rc1:model.block|relu|1#0"


def node_attr(page, key: str, attr: str) -> str | None:
    return page.evaluate("([k, a]) => { const e = [...document.querySelectorAll('g.vnode')]"
                         ".find(n => n.dataset.key === k); return e ? e.getAttribute(a) : null; }", [key, attr])


def click_key(page, key: str) -> None:
    page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                  ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", key)


def open_known(page, server):
    post_events(server, "known", known_graph())
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="11"]', timeout=10_000)
    page.wait_for_function("document.querySelectorAll('g.vnode').length === 11")


def test_known_graph_nodes_labels_and_kinds(page, server):
    open_known(page, server)
    assert page.locator("#run-title").text_content() == "known-graph"
    assert page.locator("li.run.current .run-name").text_content() == "known-graph"
    labels = page.evaluate("[...document.querySelectorAll('g.vnode')].map(n => [n.dataset.key, n.dataset.kind,"
                           " n.querySelector('text.l1').textContent, n.querySelector('text.l2').textContent])")
    by_key = {k: (kind, l1, l2) for k, kind, l1, l2 in labels}
    assert by_key[MATMUL] == ("op", "matmul", "(2, 2)")
    assert by_key[SUM] == ("output", "sum", "()")  # the backward root
    assert by_key["L:x"] == ("input", "x", "(2, 3)")
    assert by_key["L:model.fc.bias"] == ("param", "model.fc.bias", "(2,)")
    assert by_key[f"L:{XSS}"][0] == "param"
    # x→matmul, W→matmul, matmul→add, bias→add, add→checkpoint, checkpoint→sum, add→exp, leaf→relu,
    # relu→mul (twice, drawn as one edge)
    assert len(page.locator("path.edge").all()) == 9
    assert page.errors == []


def test_gradient_colours_and_flags(page, server):
    open_known(page, server)
    assert node_attr(page, SUM, "data-grad-class") == "ok"
    assert node_attr(page, SUM, "data-grad-color") == COLOUR_1
    assert node_attr(page, CKPT, "data-grad-color") == COLOUR_1E_2
    assert node_attr(page, ADD, "data-grad-class") == "nonfinite"  # NaN
    assert node_attr(page, MATMUL, "data-grad-class") == "zero"  # exactly 0: not the same as not computed
    assert node_attr(page, EXP, "data-grad-class") == "none"  # never reached by backward
    assert node_attr(page, EXP, "class").count("grad-none") == 1
    edge_cls = page.evaluate("k => [...document.querySelectorAll('path.edge')].find(e => e.dataset.from === k)"
                             ".dataset.gradClass", RC_LEAF)
    assert edge_cls == "vanishing"  # 1e-9 flowed into the recomputed relu's input
    # a badge on the NaN node and on the zero node, none on the not-computed one
    assert page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                         ".querySelector('text.badge-text').textContent", ADD) == "NaN/Inf"
    assert page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                         ".querySelector('text.badge-text')", EXP) is None
    assert "backward of checkpoint node #3" in page.locator("#alerts").text_content()


def test_checkpoint_and_cache_markers(page, server):
    open_known(page, server)
    seg = page.locator("g.segment")
    assert seg.count() == 1
    assert seg.get_attribute("data-state") == "recomputed"
    assert "checkpoint #1 (block)" in seg.text_content()
    assert "recomputed" in node_attr(page, RELU, "class")
    assert "recomputed" in node_attr(page, MUL, "class")
    assert page.locator("#cache-badge").get_attribute("data-state") == "hit"
    assert "HIT" in page.locator("#cache-badge").text_content()
    assert page.locator("#cache-counters").text_content() == "hits 1 · misses 1 · evictions 0"
    assert page.locator("#graph-badge").is_visible()


def test_inspector_numbers(page, server):
    open_known(page, server)
    click_key(page, "L:model.fc.bias")
    body = page.locator("#inspector-body")
    assert body.locator("h3").text_content() == "model.fc.bias · param"
    assert body.locator("pre.node-values").text_content() == "0.1  -0.1"
    assert body.locator("pre.grad-values").text_content() == "2.5  2.449"
    assert body.locator(".stats.grad .norm .v").text_content() == "3.5"
    click_key(page, MATMUL)
    text = body.text_content()
    assert "dA = dC @ Bᵀ, dB = Aᵀ @ dC" in text and "float32" in text and "model.fc" in text and "48 B" in text
    assert body.locator("pre.node-values").text_content() == "-5.25  4\n-11.88  9.625"
    screenshot(page, "viewer-known-graph.png")


def test_xss_payload_is_text(strict_page, server):
    page = strict_page
    post_events(server, "known", known_graph())
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="11"]', timeout=10_000)
    key = f"L:{XSS}"
    assert page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                         ".querySelector('title').textContent", key).startswith(XSS)
    click_key(page, key)
    assert page.locator("#inspector-body h3").text_content() == f"{XSS} · param"
    page.wait_for_timeout(300)
    assert page.locator("img").count() == 0
    assert page.dialogs == []


def test_teaching_mode_steps_backward(page, server):
    open_known(page, server)
    page.click("#teach-btn")
    teach = page.locator("#teach-body")
    assert teach.locator(".teach-pos").text_content() == "backward node 1 of 6"
    assert teach.locator(".teach-op").text_content() == "sum ()"
    assert teach.locator(".teach-in pre").text_content() == "1"
    assert teach.locator(".teach-out pre").text_content() == "0.005  0.005\n0.005  0.005"
    # the graph is shown as it was at that moment: the checkpoint node's gradient is not computed yet
    assert node_attr(page, CKPT, "data-grad-class") == "none"
    page.click("#teach-next")
    assert teach.locator(".teach-op").text_content() == "mul (2, 2)"
    for _ in range(3):
        page.click("#teach-next")
    assert teach.locator(".teach-pos").text_content() == "backward node 5 of 6"
    assert teach.locator(".teach-op").text_content() == "add (2, 2)"
    outs = teach.locator(".teach-out")
    assert outs.nth(1).locator("pre").text_content() == "2.5  2.449"
    assert "NaN/Inf" in teach.text_content()
    screenshot(page, "viewer-teaching.png")


def test_timeline_scrub_and_play(page, server):
    open_known(page, server)
    page.evaluate("() => { const s = document.querySelector('#scrub'); s.value = '8';"
                  " s.dispatchEvent(new Event('input')); }")
    assert page.locator("#live-btn").get_attribute("class") != "on"
    assert page.evaluate("document.querySelectorAll('g.vnode').length") == 7  # x, W, bias, matmul, add, checkpoint, sum
    assert node_attr(page, MATMUL, "data-grad-class") == "none"
    page.click("#play-btn")
    page.select_option("#speed", "16")
    page.wait_for_function("document.querySelectorAll('g.vnode').length === 11", timeout=10_000)
    page.click("#live-btn")
    page.wait_for_function("document.querySelector('#live-btn').classList.contains('on')")


def test_token_from_url_and_prompt(page, token_server):
    post_events(token_server, "secured", known_graph(), token="s3cret")
    page.goto(token_server + "/?token=s3cret")
    page.wait_for_selector('#counts[data-total="11"]', timeout=10_000)
    assert page.dialogs == []
    page.goto(token_server + "/")
    page.wait_for_timeout(800)
    assert any("token" in m for m in page.dialogs)


def test_live_stream_picks_newest_live_run(page, server):
    post_events(server, "old", known_graph()[:5] + [{"v": 1, "kind": "run_end", "t": 0.0, "step": None}])
    page.goto(server + "/")
    page.wait_for_selector("li.run")
    events = known_graph()
    events[0]["name"] = "live-one"
    post_events(server, "live1", events[:8])  # run_start .. add
    page.wait_for_function("document.querySelector('#run-title').textContent === 'live-one'", timeout=10_000)
    # x, W, bias, matmul, add
    page.wait_for_function("document.querySelectorAll('g.vnode').length === 5", timeout=10_000)
    pos = node_attr(page, MATMUL, "transform")
    post_events(server, "live1", events[8:])
    page.wait_for_selector('#counts[data-total="11"]', timeout=10_000)
    assert node_attr(page, MATMUL, "transform") == pos or page.evaluate("window.__rtxviz.metrics.layouts") > 0


def test_large_graph_grouped_and_folded(page, server):
    events = big_graph(n_blocks=25, ops_per_block=200)
    n_nodes = sum(1 for e in events if e["kind"] in ("node",))
    post_events(server, "big", events)
    t0 = time.monotonic()
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('#counts') && +document.querySelector('#counts').dataset.total"
                           f" >= {n_nodes}", timeout=20_000)
    shown = int(page.locator("#counts").get_attribute("data-visible"))
    assert shown <= 300
    assert time.monotonic() - t0 < 10
    fold = page.locator("g.vnode.kind-fold")
    assert fold.count() == 1
    assert "Block × 25" in fold.locator("text.l1").text_content()
    fold.dispatch_event("dblclick")
    page.wait_for_function("document.querySelectorAll('g.vnode.kind-group').length >= 25")
    assert page.locator("g.vnode.kind-fold").count() == 0
    screenshot(page, "viewer-large-graph.png")
