"""Level of detail (issue 15's speed point): an "expand all" that lands at an overview zoom draws each node as
its outline only; its labels are built when the view comes near, and the SVG export carries every label."""

from __future__ import annotations

from .conftest import post_events
from .graphs import gpt_graph

LABELLED_NODES = "[...document.querySelectorAll('g.vnode')].filter(n => n.querySelector('text.l1'))"
LABELLED = LABELLED_NODES + ".length"
LABELLED_IDS = LABELLED_NODES + ".map(n => n.dataset.vid)"
# nodes whose box is inside the canvas, [key, title] ([key, null] when drawn as an outline only)
IN_VIEW_NODES = """[...document.querySelectorAll('g.vnode')].filter(n => {
  const b = n.querySelector('rect.body').getBoundingClientRect();
  const s = document.querySelector('svg#graph').getBoundingClientRect();
  return b.left >= s.left && b.right <= s.right && b.top >= s.top && b.bottom <= s.bottom; })"""
IN_VIEW = "() => " + IN_VIEW_NODES + ".map(n => [n.dataset.key, n.querySelector('text.l1')?.textContent ?? null])"
IN_VIEW_UNLABELLED = IN_VIEW_NODES + ".filter(n => !n.querySelector('text.l1'))"


def test_far_nodes_get_their_labels_when_the_view_comes_near(page, server):
    post_events(server, "gpt", gpt_graph(n_blocks=6, ops_per_block=120))
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('g.vnode.kind-fold')")
    before = set(page.evaluate(LABELLED_IDS))
    assert len(before) == page.locator("g.vnode").count()  # near: every node labelled
    page.click("#expand-btn")
    page.wait_for_function("+document.querySelector('#counts').dataset.visible > 700")
    n = page.locator("g.vnode").count()
    # far: the new nodes are outlines; those drawn before keep their labels (hidden by the far style)
    assert page.evaluate("window.__rtxviz.view.k") < 0.35 and set(page.evaluate(LABELLED_IDS)) <= before
    # zoomed in over the canvas' centre (the wheel, as a person does): the next frame labels every node in view
    # (and half a screen around it), not the thousand beyond
    box = page.locator("svg#graph").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    while page.evaluate("window.__rtxviz.view.k") < 0.35:
        page.mouse.wheel(0, -400)
    page.wait_for_function(IN_VIEW_UNLABELLED + ".length === 0")
    in_view = page.evaluate(IN_VIEW)
    assert len(in_view) >= 5 and page.evaluate(LABELLED) < n
    for key, label in in_view:  # an op's title is its op (the key is module|op|ordinal)
        if key and key.count("|") == 2:
            assert label == key.split("|")[1]
    # panned down a screen: the nodes that come into view get theirs
    page.mouse.move(box["x"] + box["width"] - 5, box["y"] + box["height"] - 5)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 5, box["y"] + 5, steps=5)
    page.mouse.up()
    page.wait_for_function(IN_VIEW_UNLABELLED + ".length === 0")


def test_the_svg_export_of_a_far_view_has_every_label(page, server):
    post_events(server, "gpt", gpt_graph(n_blocks=6, ops_per_block=120))
    page.goto(server + "/")
    page.wait_for_function("document.querySelector('g.vnode.kind-fold')")
    page.click("#expand-btn")
    page.wait_for_function("+document.querySelector('#counts').dataset.visible > 700")
    n = page.locator("g.vnode").count()
    assert page.evaluate(LABELLED) < 10
    with page.expect_download() as dl:
        page.click("#svg-btn")
    text = open(dl.value.path(), encoding="utf-8").read()
    assert text.count('class="l1"') == n
