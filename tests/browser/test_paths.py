"""The selection's path to the loss and its inputs' cone, toggled in the inspector, in a real Chromium.

The known graph (graphs.py): x, W -> matmul -> add (+ bias) -> checkpoint -> sum (the loss); add -> exp on a side
branch that never reaches the loss; the checkpoint's recomputation (relu, mul) starts from add and ends inside the
segment. So, by hand: matmul's path to the loss is add, checkpoint, sum (not exp, not the recomputation); the
loss's inputs' cone is checkpoint, add, matmul and the three leaves.
"""

from __future__ import annotations

from .graphs import XSS
from .test_search import classes
from .test_viewer import ADD, CKPT, MATMUL, SUM, click_key, open_known

LEAVES = {"L:x", f"L:{XSS}", "L:model.fc.bias"}


def marked(page, cls: str) -> set[str]:
    return {k for k, cl in classes(page).items() if cls in cl}


def marked_edges(page, cls: str) -> set[tuple[str, str]]:
    return {tuple(e) for e in page.evaluate(
        "c => [...document.querySelectorAll('path.edge.' + c)].map(e => [e.dataset.from, e.dataset.to])", cls)}


def test_path_to_the_loss_and_inputs_cone(page, server):
    open_known(page, server)
    click_key(page, MATMUL)
    assert not marked(page, "path-down") and not marked(page, "path-up")  # off until toggled
    page.check("#path-down")
    assert marked(page, "path-down") == {ADD, CKPT, SUM}
    assert marked_edges(page, "path-down") == {(MATMUL, ADD), (ADD, CKPT), (CKPT, SUM)}
    assert marked(page, "path-src") == {MATMUL}
    # off the path: dimmed (the side branch exp among them)
    opacity = page.evaluate("k => getComputedStyle([...document.querySelectorAll('g.vnode')]"
                            ".find(n => n.dataset.key === k)).opacity", "model.aux|exp|1")
    assert float(opacity) < 0.5
    page.check("#path-up")
    assert marked(page, "path-up") == {"L:x", f"L:{XSS}"}
    # another selection: the paths follow it
    click_key(page, SUM)
    assert marked(page, "path-down") == set()  # the loss feeds nothing
    assert marked(page, "path-up") == {CKPT, ADD, MATMUL} | LEAVES
    assert (CKPT, SUM) in marked_edges(page, "path-up") and (f"L:{XSS}", MATMUL) in marked_edges(page, "path-up")
    page.uncheck("#path-up")
    page.uncheck("#path-down")
    assert not any(c in cl for cl in classes(page).values() for c in ("path-down", "path-up", "path-src"))
    assert not page.evaluate("document.querySelector('svg#graph').classList.contains('pathing')")
    assert page.errors == []
