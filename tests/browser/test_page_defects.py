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
    assert len(b["nodes"]) == n and off == []


def _edges_go_down(page) -> list:
    c = page.evaluate(CENTRES)
    return [(a, b) for a, b in c["edges"] if not c["pos"][b][1] > c["pos"][a][1]]


def test_expanding_a_big_graph_lays_out_the_output_section_below_the_blocks(page, server):
    # defect 2: after "expand all" the final layer_norm, head and loss stayed on top of block 0
    post_events(server, "gpt", gpt_graph())
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('g.vnode.kind-fold')")
    assert _edges_go_down(page) == []
    page.click("#expand-btn")
    page.wait_for_function("+document.querySelector('#counts').dataset.visible > 2000")
    assert _edges_go_down(page) == []
    c = page.evaluate(CENTRES)
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
    pairs = page.evaluate("""() => [...document.querySelectorAll('g.vnode')].filter(n => n.querySelector('rect.badge'))
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
