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
N_NODES = 10  # x, W, bias, matmul, add, checkpoint, sum, exp, and the recomputed relu and mul


def edge_attr(page, src: str, dst: str, attr: str) -> str | None:
    return page.evaluate("([a, b, k]) => { const e = [...document.querySelectorAll('path.edge')]"
                         ".find(e => e.dataset.from === a && e.dataset.to === b);"
                         " return e ? e.getAttribute(k) : null; }", [src, dst, attr])


def node_attr(page, key: str, attr: str) -> str | None:
    return page.evaluate("([k, a]) => { const e = [...document.querySelectorAll('g.vnode')]"
                         ".find(n => n.dataset.key === k); return e ? e.getAttribute(a) : null; }", [key, attr])


def click_key(page, key: str) -> None:
    page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                  ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", key)


def open_known(page, server):
    post_events(server, "known", known_graph())
    page.goto(server + "/")
    page.wait_for_selector(f'#counts[data-total="{N_NODES}"]')
    page.wait_for_function(f"document.querySelectorAll('g.vnode').length === {N_NODES}")


def test_known_graph_nodes_labels_and_kinds(page, server):
    open_known(page, server)
    assert page.locator("#run-title").text_content() == "known-graph"
    assert page.locator("li.run.current .run-name").text_content() == "known-graph"
    labels = page.evaluate("[...document.querySelectorAll('g.vnode')].map(n => [n.dataset.key, n.dataset.kind,"
                           " n.querySelector('text.l1').textContent, n.querySelector('text.l2').textContent])")
    by_key = {k: (kind, l1, l2) for k, kind, l1, l2 in labels}
    assert by_key[MATMUL] == ("op", "matmul", "(2, 2)")
    assert by_key[SUM] == ("output", "sum", "data 185.3")  # the backward root, a scalar: its value shown
    assert by_key["L:x"] == ("input", "x", "(2, 3)")
    assert by_key["L:model.fc.bias"] == ("param", "fc.bias", "(2,)")  # "model." is implied
    assert by_key[RELU] == ("op", "↻ relu", "(2, 2)")
    assert by_key[f"L:{XSS}"][0] == "param"
    # x→matmul, W→matmul, matmul→add, bias→add, add→checkpoint, checkpoint→sum, add→exp, add→relu (the
    # recomputation starts from the segment's input, not from a new leaf), relu→mul (twice, drawn as one edge)
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
    # 1e-9 flowed from the recomputed relu into its input (the segment's input, add)
    assert edge_attr(page, ADD, RELU, "data-grad-class") == "vanishing"
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
    assert page.locator("text.segment-label").text_content() == "checkpoint #1 · block · ↻ recomputed (2 ops)"
    assert "recomputed" in node_attr(page, RELU, "class")
    assert "recomputed" in node_attr(page, MUL, "class")
    assert page.locator("#cache-badge").get_attribute("data-state") == "hit"
    assert "HIT" in page.locator("#cache-badge").text_content()
    assert page.locator("#cache-counters").text_content() == "hits 1 · misses 1 · evictions 0"
    assert page.locator("#graph-badge").is_visible()
    # the hit happened in step 1 while step 0 is drawn (step 1 has no nodes): the banner says so
    assert page.locator("#graph-badge").text_content() == \
        "↻ graph cache hit: mlp() replayed its cached graph in step 1, nothing re-recorded"


def _boxes(page) -> dict:
    """Screen boxes of the nodes (by key), and of the segment's shading pieces."""
    return page.evaluate("""() => {
      const r = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
      const nodes = {};
      for (const n of document.querySelectorAll('g.vnode')) nodes[n.dataset.key] = r(n.querySelector('rect.body'));
      const seg = document.querySelector('g.segment');
      const shade = [...seg.querySelectorAll('.shade rect')].map(r);
      return { nodes, shade, members: seg.dataset.members.split('\\n') };
    }""")


def test_recomputed_nodes_drawn_inside_their_segment(page, server):
    open_known(page, server)
    page.wait_for_selector("body[data-layouts]")  # the full (dagre) layout has landed
    for key in (RELU, MUL):  # styled as recomputation: a dashed ring, "↻" in the label, a tooltip saying so
        assert page.evaluate("k => !![...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                             ".querySelector('rect.rc-ring')", key)
        assert "recomputed in backward" in page.evaluate(
            "k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
            ".querySelector('title').textContent", key)
    assert "recompute" in edge_attr(page, ADD, RELU, "class")  # edges into a recomputation are drawn faint
    b = _boxes(page)
    assert set(b["members"]) == {CKPT, RELU, MUL}
    ck, relu, mul = b["nodes"][CKPT], b["nodes"][RELU], b["nodes"][MUL]
    assert relu[0] > ck[2] and abs(relu[1] - ck[1]) < 2  # beside the checkpoint node, same height
    assert mul[1] > relu[3] and abs(mul[0] - relu[0]) < 2  # the chain goes down in one column

    def inside(n, boxes):
        return any(n[0] >= s[0] - 1 and n[2] <= s[2] + 1 and n[1] >= s[1] - 1 and n[3] <= s[3] + 1 for s in boxes)

    def overlaps(n, s):
        return n[0] < s[2] and s[0] < n[2] and n[1] < s[3] and s[1] < n[3]

    assert all(inside(b["nodes"][k], b["shade"]) for k in b["members"])
    others = [k for k in b["nodes"] if k not in b["members"]]
    assert not [k for k in others if any(overlaps(b["nodes"][k], s) for s in b["shade"])]  # covers nothing else
    click_key(page, RELU)
    assert "ran again during backward" in page.locator("#inspector-body").text_content()
    screenshot(page, "viewer-recompute.png")


def test_export_svg_button_downloads_the_graph(page, server):
    open_known(page, server)
    with page.expect_download() as dl:
        page.click("#svg-btn")
    text = open(dl.value.path(), encoding="utf-8").read()
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and root.get("viewBox")
    nodes = [g for g in root.iter(f"{ns}g") if "vnode" in (g.get("class") or "")]
    assert len(nodes) == N_NODES
    assert root.find(f"{ns}style") is not None and ".vnode" in root.find(f"{ns}style").text
    assert "↻ relu" in [t.text for t in root.iter(f"{ns}text")]


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
    page.wait_for_selector(f'#counts[data-total="{N_NODES}"]')
    key = f"L:{XSS}"
    assert page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                         ".querySelector('title').textContent", key).startswith(XSS)
    click_key(page, key)
    assert page.locator("#inspector-body h3").text_content() == f"{XSS} · param"
    assert page.locator("img").count() == 0  # text nodes only: an <img> would exist right after the render
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
    page.wait_for_function(f"document.querySelectorAll('g.vnode').length === {N_NODES}")
    page.click("#live-btn")
    page.wait_for_function("document.querySelector('#live-btn').classList.contains('on')")


def test_token_from_url_and_prompt(page, token_server):
    post_events(token_server, "secured", known_graph(), token="s3cret")
    page.goto(token_server + "/?token=s3cret")
    page.wait_for_selector(f'#counts[data-total="{N_NODES}"]')
    assert page.dialogs == []
    assert "token" not in page.url  # moved to the tab's session storage, out of history and shared links
    page.evaluate("sessionStorage.clear()")
    with page.expect_event("dialog"):  # the handler in conftest records and dismisses it
        page.goto(token_server + "/")
    assert any("token" in m for m in page.dialogs)


def test_live_stream_picks_newest_live_run(page, server):
    post_events(server, "old", known_graph()[:5] + [{"v": 1, "kind": "run_end", "t": 0.0, "step": None}])
    page.goto(server + "/")
    page.wait_for_selector("li.run")
    events = known_graph()
    events[0]["name"] = "live-one"
    post_events(server, "live1", events[:8])  # run_start .. add
    page.wait_for_function("document.querySelector('#run-title').textContent === 'live-one'")
    # x, W, bias, matmul, add
    page.wait_for_function("document.querySelectorAll('g.vnode').length === 5")
    pos = node_attr(page, MATMUL, "transform")
    post_events(server, "live1", events[8:])
    page.wait_for_selector(f'#counts[data-total="{N_NODES}"]')
    assert node_attr(page, MATMUL, "transform") == pos or page.evaluate("window.__rtxviz.metrics.layouts") > 0


def test_large_graph_grouped_and_folded(page, server):
    events = big_graph(n_blocks=25, ops_per_block=200)
    n_nodes = sum(1 for e in events if e["kind"] in ("node",))
    post_events(server, "big", events)
    t0 = time.monotonic()
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('#counts') && +document.querySelector('#counts').dataset.total"
                           f" >= {n_nodes}")
    shown = int(page.locator("#counts").get_attribute("data-visible"))
    assert shown <= 300
    assert time.monotonic() - t0 < 20  # generous: a loaded 2-core CI box; the benchmark measures speed
    fold = page.locator("g.vnode.kind-fold")
    assert fold.count() == 1
    assert "Block × 25" in fold.locator("text.l1").text_content()
    fold.dispatch_event("dblclick")
    page.wait_for_function("document.querySelectorAll('g.vnode.kind-group').length >= 25")
    assert page.locator("g.vnode.kind-fold").count() == 0
    screenshot(page, "viewer-large-graph.png")
