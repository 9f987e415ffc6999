"""Defects of the page seen on real runs (issue 15), each reproduced here in a real Chromium."""

from __future__ import annotations

from .conftest import post_events
from .engine_runs import anomaly_error_run, inplace_error_run
from .graphs import ev, gpt_graph, known_graph, norm_ladder

# Node boxes and the graph's box on screen, and each edge's ends (node centres in graph coordinates).
BOXES = """() => {
  const r = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const out = {};
  for (const n of document.querySelectorAll('g.vnode')) out[n.dataset.vid] = r(n.querySelector('rect.body'));
  return { nodes: out, svg: r(document.querySelector('svg#graph')) };
}"""
CENTRES = """() => {
  const pos = {};
  for (const n of document.querySelectorAll('g.vnode')) {
    const m = /translate\\(([-\\d.e]+),([-\\d.e]+)\\)/.exec(n.getAttribute('transform'));
    pos[n.dataset.vid] = [+m[1], +m[2]];
  }
  return { pos, edges: [...document.querySelectorAll('path.edge')].map(e => [e.dataset.from, e.dataset.to]) };
}"""


def wide_graph(name: str, n_leaves: int = 12) -> list[dict]:
    """n_leaves inputs each through its own tanh, pairwise added down to one sum: 2 * n_leaves nodes or so."""
    out = [ev("run_start", None, name=name), ev("step_begin", 0)]
    refs = []
    for i in range(1, n_leaves + 1):
        out.append(ev("leaf", 0, id=i, name=f"w{i}", shape=[2], dtype="float32", device="cpu", requires_grad=True,
                      param=True))
        out.append(ev("node", 0, id=i, op="tanh", inputs=[{"leaf": i}], shape=[2], dtype="float32", device="cpu",
                      module=None, rule="r", saved_bytes=8))
        refs.append({"node": i})
    nid = n_leaves
    while len(refs) > 1:
        nid += 1
        out.append(ev("node", 0, id=nid, op="add", inputs=refs[:2], shape=[2], dtype="float32", device="cpu",
                      module=None, rule="r", saved_bytes=0))
        refs = refs[2:] + [{"node": nid}]
    return out


def wait_layout_of(page, n_items: int) -> None:
    page.wait_for_function(f"document.body.dataset.layoutItems === '{n_items}'")


def test_switching_to_a_new_live_run_fits_its_laid_out_graph(page, server):
    # defect 1: the first run is shown and fitted; a new live run takes over, streams in, is laid out: all of it
    # must be in view
    post_events(server, "first", known_graph())
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="10"]')
    wait_layout_of(page, 10)
    second = wide_graph("second")
    post_events(server, "second", second[:4])  # its first leaf and op: the first draw fits these two
    page.wait_for_function("document.querySelector('#run-title').textContent === 'second'")
    page.wait_for_function("document.querySelectorAll('g.vnode').length === 2")
    post_events(server, "second", second[4:])
    n = 12 + 12 + 11
    page.wait_for_selector(f'#counts[data-total="{n}"]')
    wait_layout_of(page, n)
    b = page.evaluate(BOXES)
    sx0, sy0, sx1, sy1 = b["svg"]
    off = [k for k, (x0, y0, x1, y1) in b["nodes"].items() if x0 < sx0 or y0 < sy0 or x1 > sx1 or y1 > sy1]
    assert len(b["nodes"]) == n
    # fitted to the new run's laid-out graph: centred across the canvas, its top row just below the canvas' top;
    # all of it in view, unless that would shrink its labels below the readable zoom (defect 9: then it is drawn
    # at that zoom and the rest is a pan away)
    gx0 = min(x0 for x0, _, _, _ in b["nodes"].values())
    gx1 = max(x1 for _, _, x1, _ in b["nodes"].values())
    gy0 = min(y0 for _, y0, _, _ in b["nodes"].values())
    assert abs((gx0 + gx1) / 2 - (sx0 + sx1) / 2) < 3 and sy0 < gy0 < sy0 + 60
    assert off == [] or abs(page.evaluate("window.__rtxviz.view.k") - 0.85) < 1e-6


# every visible item's centre and every visible edge, drawn or not, from the page's placement (a large drawing
# builds only the part near the view: frontend/src/cull.ts)
PLACED = """() => { const p = window.__rtxviz.pane;
  const pos = [...p.place.pos].filter(([v]) => p.visible.items.has(v)).map(([v, q]) => [v, [q.x, q.y]]);
  return { pos: Object.fromEntries(pos),
           edges: p.visible.edges.map(e => [e.from, e.to]) }; }"""


def _edges_go_down(page) -> list:
    """Edges not pointing down: those drawn (by the elements' transforms), then all of them (by the placement);
    and a drawn node not where the placement puts it counts too."""
    c = page.evaluate(CENTRES)
    placed = page.evaluate(PLACED)
    drawn = [(a, b) for a, b in c["edges"] if a in c["pos"] and b in c["pos"] and not c["pos"][b][1] > c["pos"][a][1]]
    every = [(a, b) for a, b in placed["edges"] if not placed["pos"][b][1] > placed["pos"][a][1]]
    misplaced = [(v, xy) for v, xy in c["pos"].items() if [xy[0] + 75, xy[1] + 22] != placed["pos"].get(v)]
    return drawn + every + misplaced


def test_expanding_a_big_graph_lays_out_the_output_section_below_the_blocks(page, server):
    # defect 2: after "expand all" the final layer_norm, head and loss stayed on top of block 0
    post_events(server, "gpt", gpt_graph())
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('g.vnode.kind-fold')")
    assert _edges_go_down(page) == []
    page.click("#expand-btn")
    page.wait_for_function("+document.querySelector('#counts').dataset.visible > 2000")
    assert _edges_go_down(page) == []
    c = page.evaluate(PLACED)
    ys = [p[1] for p in c["pos"].values()]
    loss = c["pos"]["|cross_entropy|1"][1]
    assert loss == max(ys)


def test_budget_change_and_unfolding_keep_edges_pointing_down(page, server):
    post_events(server, "gpt", gpt_graph(n_blocks=6, ops_per_block=120))
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('g.vnode.kind-fold')")
    page.locator("g.vnode.kind-fold").dispatch_event("dblclick")
    page.wait_for_function("document.querySelectorAll('g.vnode.kind-group').length >= 6")
    assert _edges_go_down(page) == []
    page.select_option("#budget", "1000")
    page.wait_for_function("+document.querySelector('#counts').dataset.visible > 300")
    assert _edges_go_down(page) == []


def _luminance(rgb: list[float]) -> float:
    def ch(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    return 0.2126 * ch(rgb[0]) + 0.7152 * ch(rgb[1]) + 0.0722 * ch(rgb[2])


def contrast(a: list[float], b: list[float]) -> float:
    """WCAG 2 contrast ratio of two sRGB colours."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_gradient_badges_are_readable_at_every_norm(page, server):
    # defect 3: badges for norms 1e-7 .. 1e-3 were black on dark purple
    norms = [10 ** (k / 2) for k in range(-14, 7)] + [0.0, 1e-9, 5e3]
    post_events(server, "ladder", norm_ladder(norms))
    page.goto(server + "/")
    page.wait_for_selector(f'#counts[data-total="{2 * len(norms)}"]')
    # the row is wider than the canvas at a readable zoom, and nodes out of view get their badges when they come
    # into it: build every node's badge now, as an export does
    page.evaluate("window.__rtxviz.view.ensureDetail()")
    pairs = page.evaluate("""() => [...document.querySelectorAll('g.vnode')]
      .filter(n => (n.dataset.key || '').startsWith('|tanh|'))
      .filter(n => n.querySelector('rect.badge'))
      .map(n => { const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
        return [n.dataset.key, rgb(getComputedStyle(n.querySelector('rect.badge')).fill),
                rgb(getComputedStyle(n.querySelector('text.badge-text')).fill)]; })""")
    assert len(pairs) == len(norms)
    bad = [(k, round(contrast(bg, fg), 2)) for k, bg, fg in pairs if contrast(bg, fg) < 4.5]
    assert bad == []


def _open_real(page, server, run_id: str, events: list[dict]) -> None:
    post_events(server, run_id, events)
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('#counts') && document.querySelector('#counts').dataset.total")


def test_backward_error_marks_the_node_and_ends_backward(page, server):
    # defect 8 and issue 13: an in-place write to a tensor exp saved makes exp's backward raise; the page marks exp
    # (as an error, not as NaN/Inf), lists the message, and the header no longer says backward is running
    events = inplace_error_run()
    kinds = [e["kind"] for e in events]
    assert "anomaly" in kinds and kinds.index("backward_end") > kinds.index("anomaly")
    err = next(e for e in events if e["kind"] == "anomaly")
    assert err["reason"] == "error" and err["op"] == "exp"
    _open_real(page, server, "inplace", events)
    page.wait_for_function("document.querySelector('#counts').textContent.includes('backward:')")
    counts = page.locator("#counts").text_content()
    assert "running" not in counts and "backward: failed" in counts
    exp = page.locator("g.vnode[data-key='|exp|1']")
    assert "error" in exp.get_attribute("class").split()
    assert "anomaly" not in exp.get_attribute("class").split()  # the NaN/Inf marking is another thing
    assert exp.get_attribute("data-grad-class") != "nonfinite"
    assert exp.locator("text.badge-text").text_content() == "error"
    alert = page.locator("#alerts li.error")
    assert alert.count() == 1
    assert "InplaceError: backward of exp" in alert.text_content() and "version" in alert.text_content()
    alert.click()
    assert "exp" in page.locator("#inspector-body h3").text_content()
    assert "error in backward" in page.locator("#inspector-body").text_content()


def test_anomaly_error_ends_backward(page, server):
    # defect 8: detect_anomaly raising AnomalyError in backward left "backward: running" forever
    events = anomaly_error_run()
    _open_real(page, server, "anomaly", events)
    page.wait_for_function("document.querySelector('#counts').textContent.includes('backward:')")
    assert "running" not in page.locator("#counts").text_content()
    # the NaN/Inf it sent is marked on sqrt (the hook saw it before detect_anomaly raised)
    assert "anomaly" in page.locator("g.vnode[data-key='|sqrt|1']").get_attribute("class").split()


def _box(page, sel: str) -> list:
    return page.evaluate("s => { const b = document.querySelector(s).getBoundingClientRect();"
                         " return [b.left, b.top, b.right, b.bottom]; }", sel)


def test_a_cache_hit_step_shows_the_replayed_graph_and_the_banner_covers_nothing(page, server):
    # defect 4: picking the hit step (it records no nodes: the replay builds none) showed an empty canvas
    events = known_graph()
    hit = next(e for e in events if e["kind"] == "graph_cache" and e["action"] == "hit")
    hit["key"] = "Trainer.step.<locals>.mlp([2, 3] float32)"
    post_events(server, "cache", events)
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="10"]')
    banner = page.locator("#graph-badge")
    assert "mlp([2, 3] float32) replayed" in banner.text_content()  # not cut at "("
    page.select_option("#step-select", "1")
    page.wait_for_function("document.querySelectorAll('g.vnode.replayed').length === 10")
    assert "step 1 replayed the graph recorded in step 0" in banner.text_content()
    assert "replayed" in page.locator("#counts").text_content()
    bb = _box(page, "#graph-badge")
    badges = page.evaluate("() => [...document.querySelectorAll('rect.badge')].map(r => { const b ="
                           " r.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })")
    assert badges
    assert [b for b in badges if b[0] < bb[2] and bb[0] < b[2] and b[1] < bb[3] and bb[1] < b[3]] == []


def vanishing_bias_graph(n_ok: int = 8, n_vanishing: int = 6) -> list[dict]:
    """A module `model.k` whose ops mostly get healthy gradients but whose bias adds get vanishing ones."""
    out = [ev("run_start", None, name="vanishing-bias"), ev("step_begin", 0),
           ev("leaf", 0, id=1, name="x", shape=[4], dtype="float32", device="cpu", requires_grad=False)]
    prev = {"leaf": 1}
    grads = []
    for i in range(1, n_ok + n_vanishing + 1):
        vanish = i > n_ok
        out.append(ev("node", 0, id=i, op="add" if vanish else "tanh", inputs=[prev], shape=[4], dtype="float32",
                      device="cpu", module=f"model.k.{i}", rule="r", saved_bytes=16))
        grads.append(ev("grad", 0, node=i, output={"shape": [4], "norm": 1e-9 if vanish else 2.0, "min": 0.0,
                                                        "max": 0.0}, inputs=[None]))
        prev = {"node": i}
    out.append(ev("node", 0, id=99, op="sum", inputs=[prev], shape=[], dtype="float32", device="cpu", module=None,
                  rule="r", saved_bytes=0))
    out.append(ev("backward_begin", 0, roots=[{"node": 99}]))
    out += reversed(grads)
    out += [ev("backward_end", 0), ev("step_end", 0)]
    return out


def test_a_collapsed_group_shows_its_vanishing_gradients_and_alerts_list_them(page, server):
    # defect 5: a group showed its largest gradient, hiding its vanishing ones; Alerts only listed NaN/Inf
    post_events(server, "vb", vanishing_bias_graph())
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="16"]')
    page.click("#collapse-btn")
    group = page.locator("g.vnode[data-vid='G:model']")
    group.wait_for()
    assert group.get_attribute("data-grad-class") == "vanishing"
    assert group.locator("text.badge-text").text_content() == "6 vanishing"
    alerts = page.locator("#alerts").text_content()
    assert "6 vanishing gradients" in alerts and "model.k.9" in alerts


def test_the_edge_out_of_a_checkpoint_leaves_beside_its_recomputed_column(page, server):
    # defect 6: the checkpoint node's edge to the next op ran under the recomputed column, as if the last
    # recomputed node fed the next layer: it goes straight down, left of the column, to below the segment
    post_events(server, "known", known_graph())
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="10"]')
    page.wait_for_function("document.body.dataset.layoutItems === '10'")
    r = page.evaluate("""() => {
      const pos = {};
      for (const n of document.querySelectorAll('g.vnode')) {
        const m = /translate\\(([-\\d.e]+),([-\\d.e]+)\\)/.exec(n.getAttribute('transform'));
        pos[n.dataset.vid] = [+m[1], +m[2]];
      }
      const e = [...document.querySelectorAll('path.edge')].find(e => e.dataset.from === 'model.block|checkpoint|1');
      const pts = [];
      for (let i = 0; i <= 60; i++) { const p = e.getPointAtLength(e.getTotalLength() * i / 60); pts.push([p.x, p.y]); }
      return { pos, pts };
    }""")
    ck_x = r["pos"]["model.block|checkpoint|1"][0] + 75
    mul_bottom = r["pos"]["rc1:model.block|mul|1"][1] + 44
    column_left = r["pos"]["rc1:model.block|mul|1"][0]
    assert [p for p in r["pts"] if p[1] <= mul_bottom and abs(p[0] - ck_x) > 1] == []
    assert all(p[0] < column_left for p in r["pts"])


def test_unsampled_steps_are_marked_in_the_picker_and_an_empty_step_says_why(page, server):
    # defect 7: with sample_every=3 the picker listed steps 1 and 2 like the others; picking one drew nothing
    from .engine_runs import recorded, var

    def body(run):
        w = var([0.5, -0.5], "w")
        for i in range(4):
            with run.step(i):
                (w * w).sum().backward()

    post_events(server, "sampled", recorded("sampled", body, sample_every=3))
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="3"]')
    opts = page.evaluate("() => [...document.querySelectorAll('#step-select option')].map(o => [o.value,"
                         " o.textContent, o.disabled])")
    by = {v: (t, d) for v, t, d in opts}
    assert by["1"] == ("step 1 · not sampled", True) and by["2"] == ("step 2 · not sampled", True)
    assert by["3"] == ("step 3", False) and by["0"] == ("step 0", False)
    page.evaluate("() => { const s = document.querySelector('#step-select'); s.value = '2';"
                  " s.dispatchEvent(new Event('change')); }")
    note = page.locator("#graph-note")
    note.wait_for()
    assert note.text_content() == "step 2 was not sampled: the run records the graph of every 3rd step"
    assert page.evaluate("document.querySelectorAll('g.vnode').length") == 0


def _key_attr(page, key: str, attr: str):
    return page.evaluate("([k, a]) => { const e = [...document.querySelectorAll('g.vnode')]"
                         ".find(n => n.dataset.key === k); return e ? e.getAttribute(a) : null; }", [key, attr])


def test_smaller_defects_labels_legend_and_picker(page, server):
    # defect 9: "layers[2]" read like an index; "gradient grad: not computed yet"; "newest (live)" while
    # scrubbing; no legend entry for the origin fill or the recomputing state
    events = known_graph()
    for e in events:
        if e["kind"] == "checkpoint" and e.get("phase") == "begin":
            e["name"] = "layers[2]"
    post_events(server, "known", events)
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="10"]')
    assert page.locator("text.segment-label").text_content().startswith("checkpoint #1 · 2 layers · ")
    page.evaluate("k => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === k)"
                  ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", "model.aux|exp|1")
    body = page.locator("#inspector-body").text_content()
    assert "gradient: not computed yet" in body and "grad: not computed" not in body
    legend = page.locator("#legend").text_content()
    assert "first NaN/Inf" in legend and "segment recomputing" in legend and "backward raised here" in legend
    page.evaluate("() => { const s = document.querySelector('#scrub'); s.value = '8';"
                  " s.dispatchEvent(new Event('input')); }")
    assert page.evaluate("() => { const s = document.querySelector('#step-select');"
                         " return s.options[s.selectedIndex].textContent; }") == "step 0"


def test_a_leaf_shows_its_arrived_gradient_while_stepping_through_backward(page, server):
    # defect 9: during step-through a leaf stayed "not computed" while its incoming edge was already coloured
    post_events(server, "known", known_graph())
    page.goto(server + "/")
    page.wait_for_selector('#counts[data-total="10"]')
    page.click("#teach-btn")
    for _ in range(4):
        page.click("#teach-next")
    assert page.locator(".teach-op").text_content() == "add (2, 2)"  # its backward sent 3.5 to the bias
    assert _key_attr(page, "L:model.fc.bias", "data-grad-class") == "ok"
    page.click("#teach-prev")  # one node earlier the bias has received nothing
    assert _key_attr(page, "L:model.fc.bias", "data-grad-class") == "none"


def test_token_prompt_names_where_the_token_comes_from_and_asks_again(browser, token_server):
    # defect 9: the prompt said the token is printed by `rtxviz serve` (it is not) and a wrong one ended it
    post_events(token_server, "secured", known_graph(), token="s3cret")
    ctx = browser.new_context(viewport={"width": 1400, "height": 860}, bypass_csp=True)
    try:
        pg = ctx.new_page()
        asked: list[str] = []
        answers = iter(["wrong", "s3cret"])
        pg.on("dialog", lambda d: (asked.append(d.message), d.accept(next(answers))))
        pg.goto(token_server + "/")
        pg.wait_for_selector('#counts[data-total="10"]', timeout=30_000)
        assert len(asked) == 2
        assert "printed" not in asked[0] and "--token" in asked[0] and "RTXVIZ_TOKEN" in asked[0]
        assert "refused" in asked[1]
    finally:
        ctx.close()


def test_a_view_that_grows_fits_its_graph_again_until_the_user_moves_it(page, server):
    # defect (CI, the notebook widget): the view was fitted at its first, small size and kept that zoom when its
    # box grew to the height the graph asked for; a resized view fits again, unless the user panned or zoomed
    page.set_viewport_size({"width": 1400, "height": 420})
    chain = [ev("run_start", None, name="grows"), ev("step_begin", 0),
             ev("leaf", 0, id=1, name="x", shape=[2], dtype="float32", device="cpu", requires_grad=True)]
    for i in range(1, 11):  # 11 rows: at 84 px a row, taller than a 420 px window shows at a readable zoom
        chain.append(ev("node", 0, id=i, op="tanh", inputs=[{"leaf": 1} if i == 1 else {"node": i - 1}], shape=[2],
                        dtype="float32", device="cpu", module=None, rule="r", saved_bytes=8))
    post_events(server, "grows", chain)
    page.goto(server + "/")
    wait_layout_of(page, 11)
    assert abs(page.evaluate("window.__rtxviz.view.k") - 0.85) < 1e-6  # too short to show it whole: readable zoom
    page.set_viewport_size({"width": 1400, "height": 1600})
    page.wait_for_function("window.__rtxviz.view.k > 0.85")
    b = page.evaluate(BOXES)
    sx0, sy0, sx1, sy1 = b["svg"]
    assert all(sx0 <= x0 and sy0 <= y0 and x1 <= sx1 and y1 <= sy1 for x0, y0, x1, y1 in b["nodes"].values())
    # the user zooms: a later resize keeps the user's view
    box = page.query_selector("svg#graph").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 400)
    page.wait_for_function("window.__rtxviz.view.k < 0.8")
    k = page.evaluate("window.__rtxviz.view.k")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.wait_for_timeout(300)
    assert page.evaluate("window.__rtxviz.view.k") == k
