"""Deep links to a node, in a real Chromium: the URL's fragment carries run, step and node; opening it shows that
step and selects and centres that node; selecting a node writes the fragment."""

from __future__ import annotations

from urllib.parse import parse_qs, quote

from .conftest import post_events
from .graphs import known_graph
from .test_search import centre_offset
from .test_viewer import ADD, MATMUL, N_NODES, click_key


def three_steps() -> list[dict]:
    """The known graph's step 0 recorded three times, as steps 0, 1 and 2 (no graph cache)."""
    base = known_graph()
    step0 = [e for e in base if e.get("step") == 0 and e["kind"] != "graph_cache"]
    return [base[0]] + [{**e, "step": s} for s in range(3) for e in step0]


def shown(page) -> dict:
    return page.evaluate("() => ({ step: window.__rtxviz.history.graph?.step ?? null,"
                         " selected: window.__rtxviz.inspector.selected,"
                         " picker: document.querySelector('#step-select').value })")


def test_opening_a_deep_link_shows_its_step_and_selects_and_centres_its_node(page, server):
    post_events(server, "multi", three_steps())
    page.goto(f"{server}/#run=multi&step=1&node={quote(ADD, safe='')}")
    page.wait_for_function("window.__rtxviz.inspector.selected !== null")
    assert shown(page) == {"step": 1, "selected": ADD, "picker": "1"}  # not the newest step (2), the linked one
    page.wait_for_selector("body[data-layouts]")
    page.wait_for_function(f"document.querySelectorAll('g.vnode').length === {N_NODES}")
    assert centre_offset(page, ADD) < 3  # kept centred when the full layout moved it
    assert "selected" in page.evaluate("k => [...document.querySelector('g.vnode[data-vid=\"' + k + '\"]').classList]",
                                       ADD)
    assert "add" in page.locator("#inspector-body h3").text_content()
    assert page.errors == []


def test_selecting_a_node_writes_a_link_that_opens_it_again(page, server):
    post_events(server, "multi", three_steps())
    page.goto(f"{server}/")
    page.wait_for_function(f"document.querySelectorAll('g.vnode').length === {N_NODES}"
                           " && window.__rtxviz.history.graph?.step === 2")
    entries = page.evaluate("history.length")
    click_key(page, MATMUL)
    page.wait_for_function("location.hash.includes('node=')")
    link = {k: v[0] for k, v in parse_qs(page.evaluate("location.hash")[1:]).items()}
    assert link == {"run": "multi", "step": "2", "node": MATMUL}
    click_key(page, ADD)
    page.wait_for_function("location.hash.includes('add')")
    assert page.evaluate("history.length") == entries  # replaced, not pushed: Back does not walk the selections
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_function("window.__rtxviz.inspector.selected !== null")
    assert shown(page) == {"step": 2, "selected": ADD, "picker": "live"}  # the last selection
    assert page.errors == []
