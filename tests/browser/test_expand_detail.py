"""Level of detail (issue 15's speed point): an "expand all" that lands at an overview zoom draws each node as
its outline only; its labels are built when the view comes near, and the SVG export carries every label."""

from __future__ import annotations

from .conftest import post_events
from .graphs import gpt_graph

LABELLED_NODES = "[...document.querySelectorAll('g.vnode')].filter(n => n.querySelector('text.l1'))"
LABELLED = LABELLED_NODES + ".length"
LABELLED_IDS = LABELLED_NODES + ".map(n => n.dataset.vid)"


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
    # zoomed in over the canvas' centre (the wheel, as a person does): the next frame labels every node
    box = page.locator("svg#graph").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    while page.evaluate("window.__rtxviz.view.k") < 0.35:
        page.mouse.wheel(0, -400)
    page.wait_for_function(f"{LABELLED} === {n}")
    ops = page.evaluate("[...document.querySelectorAll('g.vnode')].map(g => g.querySelector('text.l1').textContent)")
    assert "layer_norm" in ops and "cross_entropy" in ops


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
