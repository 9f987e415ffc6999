"""What a teacher needs (issue 15, points 10 and 11), on real engine runs: values and signed gradients on small
nodes, the chain rule written out with the engine's numbers, accumulation where a value fans out, forward
step-through. The expected numbers are micrograd's neuron worked by hand (engine_runs.neuron_run)."""

from __future__ import annotations

from .conftest import post_events
from .engine_runs import fan_out_run, neuron_run, small_mlp_run


def node_text(page, key: str, cls: str) -> str | None:
    return page.evaluate("([k, c]) => { const n = [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key"
                         " === k); const t = n && n.querySelector(c); return t ? t.textContent : null; }", [key, cls])


def open_run(page, server, run_id, events, n_nodes, query=""):
    post_events(server, run_id, events)
    page.goto(server + "/" + query)
    page.wait_for_selector(f'#counts[data-total="{n_nodes}"]')
    page.wait_for_function("document.querySelector('#counts').textContent.includes('backward: done')")


NEURON_NODES = 5 + 6  # x1 x2 w1 w2 b; mul mul add add tanh sum


def test_small_nodes_show_their_value_and_signed_gradient(page, server):
    open_run(page, server, "neuron", neuron_run(), NEURON_NODES)
    assert node_text(page, "L:x1", "text.l2") == "data 2"
    assert node_text(page, "L:x1", "text.badge-text") == "grad -1.5"  # signed: not "‖g‖ 1.5"
    assert node_text(page, "L:w1", "text.badge-text") == "grad 1"
    assert node_text(page, "L:x2", "text.badge-text") == "grad 0.5"
    assert node_text(page, "L:w2", "text.badge-text") == "grad 0"
    assert node_text(page, "|tanh|1", "text.l2") == "data 0.7071"
    assert node_text(page, "|tanh|1", "text.badge-text") == "grad 1"
    page.select_option("#numbers", "0")  # the setting: numbers off, norms back
    page.wait_for_function("!document.querySelector('g.vnode[data-numbers]')")
    assert node_text(page, "L:x1", "text.badge-text") == "‖g‖ 1.5"
    assert node_text(page, "L:x1", "text.l2") == "(1,)"


def test_teaching_writes_the_chain_rule_with_the_engines_numbers(page, server):
    open_run(page, server, "neuron", neuron_run(), NEURON_NODES)
    page.click("#teach-btn")
    teach = page.locator("#teach-body")
    page.click("#teach-next")  # node 1 is the sum, node 2 the tanh
    assert teach.locator(".teach-op").text_content() == "tanh (1,)"
    # dL/dn = dL/do · (1 - tanh²(n)) = 1 · 0.5 = 0.5, the local derivative evaluated by the engine at n
    assert teach.locator("pre.teach-chain").text_content() == "dX = dY · (1 - tanh²(X))\n  = 1 · 0.5\n  = 0.5"
    for _ in range(3):  # add, add, then the first mul to backward: x2 * w2 or x1 * w1
        page.click("#teach-next")
    chains = []
    for _ in range(2):
        assert teach.locator(".teach-op").text_content() == "mul (1,)"
        chains.append(teach.locator("pre.teach-chain").all_text_contents())
        page.click("#teach-next")
    want = {("dA = dC · B\n  = 0.5 · -3\n  = -1.5", "dB = dC · A\n  = 0.5 · 2\n  = 1"),
            ("dA = dC · B\n  = 0.5 · 1\n  = 0.5", "dB = dC · A\n  = 0.5 · 0\n  = 0")}
    assert {tuple(c) for c in chains} == want


def test_fan_out_shows_the_gradient_as_the_sum_of_its_arrivals(page, server):
    open_run(page, server, "fan", fan_out_run(), 3)  # a, add, sum
    page.click("#teach-btn")
    page.click("#teach-next")
    teach = page.locator("#teach-body")
    assert teach.locator(".teach-op").text_content() == "add (1,)"
    assert teach.locator("pre.teach-sum").text_content() == (
        "a has 2 uses, so its gradient is the sum of their arrivals:\n  1 (from add, input 0)\n+ 1 (from add, input 1)"
        "\n= 2")


def test_forward_step_through_shows_values_appearing_op_by_op(page, server):
    open_run(page, server, "neuron", neuron_run(), NEURON_NODES)
    page.click("#teach-fwd-btn")
    teach = page.locator("#teach-body")
    assert teach.locator(".teach-pos").text_content() == "forward op 1 of 6"
    assert teach.locator(".teach-fwd-in").text_content() == "input 0: x1 = 2\ninput 1: w1 = -3"
    assert teach.locator(".teach-fwd-out").text_content() == "mul(…) = -6"
    # the graph is drawn as it was then: the ops after it are not there yet
    assert page.evaluate("document.querySelectorAll('g.vnode').length") == 3
    for _ in range(4):
        page.click("#teach-next")
    assert teach.locator(".teach-fwd-out").text_content() == "tanh(…) = 0.7071"


# Every node label's size on screen: its computed font size times the scale the SVG draws it at (getScreenCTM),
# and whether it is drawn at all (the far view hides labels).
LABEL_PX = """() => [...document.querySelectorAll('g.vnode text.l1, g.vnode text.l2')].map(t => {
  const px = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;
  return [t.closest('g.vnode').dataset.vid, t.getAttribute('class'), px, getComputedStyle(t).display];
})"""
NODE_BOXES = """() => {
  const r = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const out = {};
  for (const n of document.querySelectorAll('g.vnode')) out[n.dataset.key] = r(n.querySelector('rect.body'));
  return [out, r(document.querySelector('svg#graph'))];
}"""


def test_fit_keeps_the_labels_of_a_26_node_graph_readable(page, server):
    # defect 9's last part: fitted whole, this MLP's 26 nodes had 7 px labels; the fit stops at a readable zoom
    # and the rest of the graph is a pan away
    open_run(page, server, "small-mlp", small_mlp_run(), 26)
    page.wait_for_function("document.body.dataset.layoutItems === '26'")  # the full layout landed and was fitted
    labels = page.evaluate(LABEL_PX)
    assert len(labels) == 2 * 26
    assert all(display != "none" for *_, display in labels)
    small = [(vid, cls, round(px, 1)) for vid, cls, px, _ in labels if px < (10.5 if cls == "l1" else 9)]
    assert small == []
    boxes, (sx0, sy0, sx1, sy1) = page.evaluate(NODE_BOXES)
    inside = lambda b: b[0] >= sx0 and b[1] >= sy0 and b[2] <= sx1 and b[3] <= sy1  # noqa: E731
    top = min(boxes.values(), key=lambda b: b[1])
    assert inside(top)  # the fit starts at the graph's top
    loss = boxes["|sum|1"]
    if not inside(loss):  # not all of it fits at a readable size: a drag brings the loss into view
        dx = min(0.0, sx1 - 20 - loss[2]) + max(0.0, sx0 + 20 - loss[0])
        dy = min(0.0, sy1 - 20 - loss[3])
        x, y = sx1 - 5, sy1 - 5  # a corner of the canvas: pressing on a node would select it, not pan
        assert not any(b[0] <= x <= b[2] and b[1] <= y <= b[3] for b in boxes.values())
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + dx, y + dy, steps=4)
        page.mouse.up()
        assert inside(page.evaluate(NODE_BOXES)[0]["|sum|1"])
