"""What a teacher needs (issue 15, points 10 and 11), on real engine runs: values and signed gradients on small
nodes, the chain rule written out with the engine's numbers, accumulation where a value fans out, forward
step-through. The expected numbers are micrograd's neuron worked by hand (engine_runs.neuron_run)."""

from __future__ import annotations

from .conftest import post_events
from .engine_runs import fan_out_run, neuron_run


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
