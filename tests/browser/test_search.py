"""Node search and filter on the page, in a real Chromium: matches by op, module path and name are highlighted
and the rest dimmed; Enter and the arrows walk through the matches, selecting and centring each; the filter hides
what does not match; a match inside a collapsed group marks the group."""

from __future__ import annotations

from .conftest import post_events
from .graphs import big_graph, known_graph
from .test_viewer import ADD, MATMUL, RELU, open_known

FC_BIAS = "L:model.fc.bias"


def classes(page) -> dict[str, list[str]]:
    """The class list of every drawn node, by its key (groups by their visible id)."""
    return page.evaluate("() => Object.fromEntries([...document.querySelectorAll('g.vnode')]"
                         ".map(n => [n.dataset.key ?? n.dataset.vid, [...n.classList]]))")


# Whether the search's overlay dims a node: the overlay shows, and the node's centre lies inside the filled area of
# its dimming path (the browser's own hit test of the even-odd fill: a match is a hole in it)
_COVERED = """() => {
  const dim = document.querySelector('#search-dim'), marks = document.querySelector('svg#marks');
  const on = getComputedStyle(marks).display !== 'none' && +getComputedStyle(dim).fillOpacity > 0.5;
  return [...document.querySelectorAll('g.vnode')].map(n => {
    const m = /translate\\(([-\\d.e]+),([-\\d.e]+)\\)/.exec(n.getAttribute('transform'));
    const r = n.querySelector('rect.body');
    const p = new DOMPoint(+m[1] + +r.getAttribute('width') / 2, +m[2] + +r.getAttribute('height') / 2);
    return [n.dataset.key ?? n.dataset.vid, on && dim.isPointInFill(p), n.dataset.kind, n.dataset.vid];
  });
}"""


def dimmed(page) -> set[str]:
    """The drawn nodes (by key) that show faded: covered by the search's dimming overlay."""
    return {k for k, covered, _, _ in page.evaluate(_COVERED) if covered}


def matched(page) -> set[str]:
    """The drawn nodes (by key) the search shows as matches: while it dims, the ones left clear of the dimming."""
    rows = page.evaluate(_COVERED)
    return {k for k, covered, _, _ in rows if not covered} if any(c for _, c, _, _ in rows) or page.evaluate(
        "document.querySelector('svg#graph').classList.contains('searching')") else set()


def expected_fc(events: list[dict]) -> int:
    """How many nodes of the known graph mention "fc" in their op, module or name, read from the events."""
    ops = [e for e in events if e["kind"] == "node" and "fc" in f"{e['op']} {e.get('module') or ''}"]
    leaves = [e for e in events if e["kind"] == "leaf" and "fc" in (e.get("name") or "")]
    return len(ops) + len(leaves)


def centre_offset(page, vid: str) -> float:
    """How far (px) the node's box centre is from the graph canvas's centre."""
    return page.evaluate("""v => {
      const n = [...document.querySelectorAll('g.vnode')].find(e => e.dataset.vid === v).querySelector('rect.body');
      const b = n.getBoundingClientRect(), s = document.querySelector('svg#graph').getBoundingClientRect();
      const dx = (b.left + b.right) / 2 - (s.left + s.right) / 2, dy = (b.top + b.bottom) / 2 - (s.top + s.bottom) / 2;
      return Math.hypot(dx, dy);
    }""", vid)


def test_search_highlights_matches_and_dims_the_rest(page, server):
    open_known(page, server)
    page.fill("#search", "fc")
    assert expected_fc(known_graph()) == 3
    page.wait_for_selector('#search-count[data-count="3"]')
    c = classes(page)
    assert matched(page) == {MATMUL, ADD, FC_BIAS}  # module model.fc (matmul, add) and the leaf named model.fc.bias
    assert dimmed(page) == set(c) - {MATMUL, ADD, FC_BIAS}
    # the drawing itself is untouched by a plain search (its look is the overlay's): no element got a class
    assert not any("match" in cl for cl in c.values())
    assert page.locator("#search-count").text_content() == "3 matches"
    # several words: all must match (op "add" in module model.fc)
    page.fill("#search", "FC add")
    page.wait_for_selector('#search-count[data-count="1"]')
    assert matched(page) == {ADD}
    # a recomputed node is found by its op
    page.fill("#search", "relu")
    page.wait_for_selector('#search-count[data-count="1"]')
    assert matched(page) == {RELU}
    page.fill("#search", "no-such-node")
    page.wait_for_selector('#search-count[data-count="0"]')
    assert page.locator("#search-count").text_content() == "no match"
    assert dimmed(page) == set(classes(page))
    page.press("#search", "Escape")  # clears: nothing dimmed any more
    page.wait_for_function("!document.querySelector('svg#graph').classList.contains('searching')")
    assert matched(page) == set() and dimmed(page) == set()
    assert page.errors == []


def test_when_most_drawn_nodes_match_only_the_others_are_covered(page, server):
    # "model" is in the module of 6 ops and the name of one leaf: 7 of the 10 drawn nodes, so the overlay covers the
    # 3 others with a box each instead of dimming everything around 7 holes (fewer subpaths for the browser to fill)
    open_known(page, server)
    events = known_graph()
    n = sum("model" in (e.get("module") or "") for e in events if e["kind"] == "node") + \
        sum("model" in (e.get("name") or "") for e in events if e["kind"] == "leaf")
    assert n == 7
    page.fill("#search", "model")
    page.wait_for_selector(f'#search-count[data-count="{n}"]')
    assert page.locator("svg#marks").get_attribute("data-dim") == "misses"
    hit, covered = matched(page), dimmed(page)
    assert len(hit) == n and covered == set(classes(page)) - hit and len(covered) == 3
    assert {MATMUL, ADD, FC_BIAS, RELU} <= hit
    # the dim is one box per non-match: the page's background between the nodes is left clear
    assert page.evaluate("""() => { const d = document.querySelector('#search-dim');
      return [d.getAttribute('d').split('M').length - 1, d.isPointInFill(new DOMPoint(-1e5, -1e5))]; }""") == [3, False]
    # a narrower query matches fewer than half: everything is dimmed again around the holes
    page.fill("#search", "fc")
    page.wait_for_selector('#search-count[data-count="3"]')
    assert page.locator("svg#marks").get_attribute("data-dim") == "all"
    assert matched(page) == {MATMUL, ADD, FC_BIAS} and len(dimmed(page)) == 7
    assert page.errors == []


def test_the_overlay_covers_the_nodes_near_the_view_and_follows_a_pan(page, server):
    # boxes only for nodes within a screen of the view: with the graph panned far away, the dim has no hole; panned
    # back, the matches get theirs in the next frame
    open_known(page, server)
    page.wait_for_selector("body[data-layouts]")
    page.evaluate("() => { const v = window.__rtxviz.view; window.__back = [v.tx, v.ty, v.k];"
                  " v.setTransform(v.tx - 1e5, v.ty, v.k); }")
    page.fill("#search", "fc")
    page.wait_for_selector('#search-count[data-count="3"]')
    subpaths = "() => document.querySelector('#search-dim').getAttribute('d').split('M').length - 1"
    assert page.evaluate(subpaths) == 1  # the full-area rect alone
    assert page.locator("svg#marks").get_attribute("data-matches") == "3"
    page.evaluate("() => window.__rtxviz.view.setTransform(...window.__back)")
    page.wait_for_function(f"({subpaths})() === 4")
    assert matched(page) == {MATMUL, ADD, FC_BIAS} and len(dimmed(page)) == 7
    assert page.errors == []


def test_enter_and_arrows_cycle_through_matches_selecting_and_centring(page, server):
    open_known(page, server)
    page.wait_for_selector("body[data-layouts]")  # the full layout landed: positions no longer move
    page.fill("#search", "fc")
    page.wait_for_selector('#search-count[data-count="3"]')
    seen = []
    for i in range(3):
        page.press("#search", "Enter")
        page.wait_for_selector(f'#search-count:text("{i + 1}/3 matches")')
        vid = page.evaluate("window.__rtxviz.inspector.selected")
        seen.append(vid)
        assert "selected" in classes(page)[vid]
        assert centre_offset(page, vid) < 3
    assert set(seen) == {MATMUL, ADD, FC_BIAS}  # each match once
    page.press("#search", "Enter")  # wraps around to the first
    assert page.evaluate("window.__rtxviz.inspector.selected") == seen[0]
    page.press("#search", "ArrowUp")  # and back, to the last
    assert page.evaluate("window.__rtxviz.inspector.selected") == seen[2]
    page.press("#search", "ArrowDown")
    assert page.evaluate("window.__rtxviz.inspector.selected") == seen[0]
    page.press("#search", "Shift+Enter")
    assert page.evaluate("window.__rtxviz.inspector.selected") == seen[2]
    assert centre_offset(page, seen[2]) < 3
    # the inspector shows the selected node
    key = seen[2]
    assert (key.split("|")[1] if "|" in key else "model.fc.bias") in page.locator("#inspector-body h3").text_content()
    assert page.errors == []


def test_filter_hides_what_does_not_match(page, server):
    open_known(page, server)
    page.fill("#search", "fc")
    page.wait_for_selector('#search-count[data-count="3"]')
    shown = "() => [...document.querySelectorAll('g.vnode')].filter(n => getComputedStyle(n).display !== 'none')" \
            ".map(n => n.dataset.key)"
    edges = "() => [...document.querySelectorAll('path.edge')].filter(e => getComputedStyle(e).display !== 'none')" \
            ".map(e => [e.dataset.from, e.dataset.to])"
    assert len(page.evaluate(shown)) == 10  # dimmed, not hidden
    page.check("#search-filter")
    assert set(page.evaluate(shown)) == {MATMUL, ADD, FC_BIAS}
    # only the edges between two matches stay: matmul -> add and bias -> add
    assert sorted(map(tuple, page.evaluate(edges))) == sorted([(MATMUL, ADD), (FC_BIAS, ADD)])
    page.uncheck("#search-filter")
    assert len(page.evaluate(shown)) == 10
    assert page.errors == []


def test_a_match_inside_a_collapsed_group_marks_the_group(page, server):
    events = big_graph(4, 40)
    post_events(server, "big", events)
    page.goto(server + "/?budget=100")
    total = sum(e["kind"] in ("node", "leaf") for e in events)
    page.wait_for_selector(f'#counts[data-total="{total}"]')
    # the ops of module model.layers.2.mlp, read from the events
    want = [e for e in events if e["kind"] == "node" and e.get("module") == "model.layers.2.mlp"]
    assert want
    page.fill("#search", "layers.2.mlp")
    page.wait_for_selector("#search-count[data-count]:not([data-count=''])")
    assert page.locator("#search-count").get_attribute("data-nodes") == str(
        len(want) + sum(e["kind"] == "leaf" and "layers.2.mlp" in (e.get("name") or "") for e in events))
    marked = [(vid, kind) for _, covered, kind, vid in page.evaluate(_COVERED) if not covered]
    assert marked  # the module is collapsed within the budget of 100: its group (or the fold holding it) is marked
    assert all(kind in ("group", "fold") for _, kind in marked)
    rep = page.evaluate("k => window.__rtxviz.pane.vidOf(k)", f"model.layers.2.mlp|{want[0]['op']}|1")
    assert rep in [vid for vid, _ in marked]
    page.press("#search", "Enter")
    assert page.evaluate("window.__rtxviz.inspector.selected") == marked[0][0]
    assert page.errors == []
