"""History across steps and the step diff in a real Chromium, on a real engine training run (tests/web's
`training_run`: a small MLP under SGD whose learning rate is 500x at step 5, so step 6's gradients jump; step 6 also
trains on 12 rows instead of 16 and adds a weight penalty to the loss).

The sparkline's numbers are read the way a person reads them (hovering over each step) and compared with the
engine's own `.grad` norms; the diff's lists with the jumps computed from those norms."""

from __future__ import annotations

import math

import pytest

from ..web.test_history import SPIKE_STEP, training_run
from .conftest import post_events
from .test_viewer import click_key

PAD = 3  # sparkline.ts's padding: step s sits at PAD + (s - first) * (width - 2 PAD) / (last - first)


@pytest.fixture(scope="module")
def run():
    return training_run()


def open_run(page, server, events, key: str = "|mean|1"):
    post_events(server, "train", events)
    page.goto(server + "/")
    page.wait_for_function(f"[...document.querySelectorAll('g.vnode')].some(n => n.dataset.key === {key!r})")


def hover_values(page, sel: str, steps: list[int]) -> dict[int, str]:
    """Hover over each step of the sparkline `sel`; the tip's text per step."""
    box = page.locator(sel).bounding_box()
    width = float(page.locator(sel).get_attribute("width"))
    out = {}
    for st in steps:
        x = box["x"] + (PAD + (st - steps[0]) * (width - 2 * PAD) / (steps[-1] - steps[0])) * box["width"] / width
        page.mouse.move(x, box["y"] + 10)
        page.wait_for_function(f"document.querySelector({sel!r}).dataset.hover === '{st}'")
        out[st] = page.locator(f"{sel} text.spark-tip").text_content()
    return out


def number(tip: str) -> float:
    return float(tip.rsplit(" ", 1)[1])


def test_parameter_sparkline_shows_the_engines_gradient_norms(page, server, run):
    events, truth = run
    open_run(page, server, events)
    click_key(page, "L:model.fc1.weight")
    page.wait_for_selector('.norm-history[data-n="8"] svg.spark-grad')
    norms = truth["params"]["fc1.weight"]
    tips = hover_values(page, "svg.spark-grad", list(range(8)))
    for st, tip in tips.items():
        assert tip.startswith(f"step {st} · ‖grad‖ ")
        assert math.isclose(number(tip), norms[st], rel_tol=1e-3), (st, tip, norms[st])
    # the spike spans decades: log scale (max/min >= 100, from the engine's numbers)
    assert max(norms) / min(norms) >= 100
    assert page.get_attribute("svg.spark-grad", "data-scale") == "log"
    # the shown step (the newest, 7) is marked
    assert page.get_attribute("svg.spark-grad line.spark-current", "data-step") == "7"
    # the update/weight ratio, a second sparkline
    ratios = truth["ratio"]["fc1.weight"]
    for st, tip in hover_values(page, "svg.spark-ratio", list(range(8))).items():
        assert math.isclose(number(tip), ratios[st], rel_tol=1e-3), (st, tip, ratios[st])
    # an op's history: the tanh's dL/d(output), against retain_grad's
    click_key(page, truth["tanh_key"])
    page.wait_for_selector(f'.norm-history[data-key="{truth["tanh_key"]}"][data-n="8"] svg.spark-grad')
    for st, tip in hover_values(page, "svg.spark-grad", list(range(8))).items():
        assert math.isclose(number(tip), truth["tanh"][st], rel_tol=1e-3), (st, tip)
    assert page.locator("svg.spark-ratio").count() == 0  # an op has no update
    # another step shown: the marker follows it
    page.select_option("#step-select", "3")
    page.wait_for_selector('svg.spark-grad line.spark-current[data-step="3"]', state="attached")
    assert page.errors == []


def test_step_diff_lists_and_marks_what_changed(page, server, run):
    events, truth = run
    open_run(page, server, events)
    page.click("#diff-btn")
    # defaults: the shown step (7) and the sampled one before it
    page.wait_for_selector(".diff-summary")
    assert page.input_value("#diff-b") == "7" and page.input_value("#diff-a") == "6"
    page.select_option("#diff-a", str(SPIKE_STEP))
    page.select_option("#diff-b", str(SPIKE_STEP + 1))
    page.wait_for_function(f"document.querySelector('.diff-summary')?.textContent.startsWith('step {SPIKE_STEP} → ')")
    jumped = page.eval_on_selector_all(".diff-list.jumped li", "els => els.map(e => e.dataset.key)")
    # from the engine's norms: which parameters' and the tanh's gradients moved by 10x or more
    series = {f"L:model.{p}": n for p, n in truth["params"].items()} | {truth["tanh_key"]: truth["tanh"]}
    moved = {k: max(n[SPIKE_STEP + 1] / n[SPIKE_STEP], n[SPIKE_STEP] / n[SPIKE_STEP + 1]) for k, n in series.items()}
    expect = {k for k, m in moved.items() if m >= 10}
    assert "L:model.fc1.weight" in expect
    assert set(jumped) & set(series) == expect
    # listed by how far the norm moved, most first
    listed = [k for k in jumped if k in expect]
    assert listed == sorted(expect, key=lambda k: -moved[k])
    # step 6 trained on 12 rows: the linear layers' outputs changed shape; the penalty added nodes
    reshaped = page.eval_on_selector_all(".diff-list.reshaped li", "els => els.map(e => e.dataset.key)")
    assert "model.fc1|linear|1" in reshaped and truth["tanh_key"] in reshaped
    added = page.eval_on_selector_all(".diff-list.added li", "els => els.map(e => e.dataset.key)")
    assert added and all(k.startswith("|") or k.startswith("L:") for k in added)  # the loss's penalty ops
    # the graph shows the later step, the same nodes marked
    marked = page.evaluate("() => Object.fromEntries([...document.querySelectorAll('g.vnode')]"
                           ".map(n => [n.dataset.key, n.getAttribute('class')]))")
    assert all("diff-jumped" in marked[k] for k in expect)
    assert "diff-reshaped" in marked["model.fc1|linear|1"]
    assert any("diff-added" in marked[k] for k in added if k in marked)
    # a listed node selects it
    page.click('.diff-list.jumped li[data-key="L:model.fc1.weight"] a')
    page.wait_for_selector('.norm-history[data-key="L:model.fc1.weight"]')
    page.click("#diff-close")
    page.wait_for_function("!document.querySelector('svg#graph').classList.contains('diffing')")
    assert not page.evaluate("document.querySelectorAll('g.vnode.diff-jumped').length")
    assert page.errors == []


def test_exported_page_draws_the_history_from_its_own_steps(tmp_path, page, run):
    """The exported HTML has no server: the sparklines come from the steps the page holds (all of them)."""
    from pathlib import Path

    from rtxviz.export import export_html

    events, truth = run
    out = export_html([{**e, "seq": i + 1} for i, e in enumerate(events)], str(tmp_path / "run.html"),
                      run={"id": "train", "name": "train"})
    page.goto(Path(out).as_uri())
    page.wait_for_selector("g.vnode[data-key='L:model.fc1.weight']")
    click_key(page, "L:model.fc1.weight")
    page.wait_for_selector('.norm-history[data-n="8"] svg.spark-grad')
    for st, tip in hover_values(page, "svg.spark-grad", list(range(8))).items():
        assert math.isclose(number(tip), truth["params"]["fc1.weight"][st], rel_tol=1e-3), (st, tip)
    for st, tip in hover_values(page, "svg.spark-ratio", list(range(8))).items():
        assert math.isclose(number(tip), truth["ratio"]["fc1.weight"][st], rel_tol=1e-3), (st, tip)
    assert page.errors == []
