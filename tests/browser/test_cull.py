"""A large drawing builds only what is near the view (frontend/src/cull.ts; issue 15's "expand all" speed): what
is on screen is always drawn, where the placement puts it; what comes near (a pan, a zoom, a search's or a link's
centring) is built then; an export carries everything; and "expand all" in place lays the graph out as a fresh
page does."""

from __future__ import annotations

from .conftest import post_events
from .graphs import gpt_graph

# visible items whose box is on the canvas (from the placement and the view's transform), and those of them that
# have no element, or one elsewhere than the placement says
ON_SCREEN = """() => {
  const p = window.__rtxviz.pane, v = window.__rtxviz.view;
  const s = document.querySelector('svg#graph').getBoundingClientRect();
  const els = new Map([...document.querySelectorAll('g.vnode')].map(n => [n.dataset.vid, n]));
  const on = [], missing = [], misplaced = [];
  for (const vid of p.visible.items.keys()) {
    const q = p.place.pos.get(vid);
    const x0 = (q.x - 75) * v.k + v.tx, y0 = (q.y - 22) * v.k + v.ty;
    const x1 = (q.x + 75) * v.k + v.tx, y1 = (q.y + 22) * v.k + v.ty;
    if (x1 < 0 || y1 < 0 || x0 > s.width || y0 > s.height) continue;
    on.push(vid);
    const el = els.get(vid);
    if (!el) { missing.push(vid); continue; }
    if (el.getAttribute('transform') !== `translate(${q.x - 75},${q.y - 22})`) misplaced.push(vid);
  }
  return { on: on.length, missing, misplaced, drawn: els.size, visible: p.visible.items.size };
}"""
FRAMES = "() => new Promise(r => { let n = 0; const f = () => (++n < 3 ? requestAnimationFrame(f) : r()); f(); })"


def expand_all(page, server) -> int:
    post_events(server, "gpt", gpt_graph(n_blocks=12, ops_per_block=165))
    page.goto(server + "/?run=gpt")
    page.wait_for_function("document.querySelector('g.vnode.kind-fold')")
    page.click("#expand-btn")
    page.wait_for_function("+document.querySelector('#counts').dataset.visible > 2000")
    return int(page.locator("#counts").get_attribute("data-visible"))


def test_expand_all_draws_what_is_on_screen_and_the_rest_as_the_view_comes_near(page, server):
    visible = expand_all(page, server)
    s = page.evaluate(ON_SCREEN)
    # the overview of a graph 13 screens tall: a screen's worth of it on screen, elements within a screen of it
    assert s["visible"] == visible and 20 < s["on"] < visible / 4
    assert s["missing"] == [] and s["misplaced"] == []
    assert s["on"] <= s["drawn"] < visible / 2
    # panned (a drag, as a person does) down the graph, screen by screen: whatever comes on screen is drawn
    box = page.locator("svg#graph").bounding_box()
    for _ in range(4):
        page.mouse.move(box["x"] + box["width"] - 5, box["y"] + box["height"] - 5)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] - 5, box["y"] + 5, steps=4)
        page.mouse.up()
        page.evaluate(FRAMES)
        s = page.evaluate(ON_SCREEN)
        assert s["on"] > 20 and s["missing"] == [] and s["misplaced"] == []
    # the loss, at the very bottom, centred on (the search's and the deep link's jump): drawn at once, selectable
    page.evaluate("window.__rtxviz.pane.centreOn('|cross_entropy|1')")
    assert page.evaluate("!!document.querySelector('g.vnode[data-vid=\"|cross_entropy|1\"]')")
    page.evaluate(FRAMES)
    s = page.evaluate(ON_SCREEN)
    assert s["missing"] == [] and s["misplaced"] == []
    page.locator('g.vnode[data-vid="|cross_entropy|1"]').dispatch_event("click")
    assert page.locator('g.vnode[data-vid="|cross_entropy|1"]').get_attribute("class").split().count("selected") == 1



def test_a_larger_window_draws_what_it_now_shows(page, server):
    expand_all(page, server)
    page.evaluate("window.__rtxviz.pane.centreOn('model.layers.5.mlp|mul|1')")  # the middle of the graph, zoom 0.6
    page.evaluate(FRAMES)
    small = page.evaluate(ON_SCREEN)
    assert small["missing"] == []
    page.set_viewport_size({"width": 3800, "height": 2600})  # more than a screen more in every direction
    page.wait_for_function("document.querySelector('svg#graph').getBoundingClientRect().height > 2000")
    page.evaluate(FRAMES)
    s = page.evaluate(ON_SCREEN)
    assert s["on"] > 2 * small["on"] and s["missing"] == [] and s["misplaced"] == []


def test_a_search_counts_and_boxes_matches_that_are_not_drawn_yet(page, server):
    visible = expand_all(page, server)
    drawn = page.evaluate("document.querySelectorAll('g.vnode').length")
    assert drawn < visible
    page.fill("#search", "cross_entropy")  # the loss: far below the part drawn
    page.wait_for_function("+document.querySelector('#search-count').dataset.count === 1")
    assert page.evaluate("document.querySelector('#marks').dataset.matches") == "1"


def test_the_svg_export_of_a_culled_drawing_has_every_node(page, server):
    visible = expand_all(page, server)
    assert page.evaluate("document.querySelectorAll('g.vnode').length") < visible
    with page.expect_download() as dl:
        page.click("#svg-btn")
    text = open(dl.value.path(), encoding="utf-8").read()
    assert text.count('class="l1"') == visible


def test_expand_all_in_place_lays_out_as_a_fresh_page(page, server):
    expand_all(page, server)
    placed = ("() => { const p = window.__rtxviz.pane; "
              "return [...p.visible.items.keys()].map(v => [v, p.place.pos.get(v)]); }")
    here = page.evaluate(placed)
    # a fresh page whose budget holds the whole graph, everything expanded there from the start (no collapsed
    # view before it)
    fresh = page.context.new_page()
    try:
        fresh.goto(server + "/?run=gpt&budget=5000")
        fresh.wait_for_function("+document.querySelector('#counts')?.dataset.visible > 0")
        fresh.click("#expand-btn")
        fresh.wait_for_function(f"+document.querySelector('#counts').dataset.visible === {len(here)}")
        def xy(rows: list) -> dict:
            return {v: (p["x"], p["y"]) for v, p in rows}
        assert xy(fresh.evaluate(placed)) == xy(here)
    finally:
        fresh.close()
