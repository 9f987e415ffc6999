"""End to end in a real JupyterLab, in headless Chromium: a notebook runs micrograd's neuron under
`rtxviz.watch(notebook=True)`, and the widget's output area shows its graph, with the gradient colours the
closed form gives; the draw latency (kernel event to frame drawn) over the live steps is recorded in
test-artifacts/notebook-latency.json.

The neuron is the one of micrograd's lecture: o = tanh(x1*w1 + x2*w2 + b) with x1=2, x2=0, w1=-3, w2=1,
b=6.8813735870195432, so n = 0.8814, o = tanh(n) = 1/sqrt(2), do/dn = 1 - o^2 = 1/2 and
dx1 = w1/2 = -1.5, dw1 = x1/2 = 1, dx2 = w2/2 = 0.5, dw2 = x2/2 = 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtxviz.summary import grad_class, ramp_colour

from .jupyterlab_server import JupyterLab, run_notebook, write_notebook

WIDGET_JS = Path(__file__).resolve().parents[2] / "rtxviz" / "notebook" / "static" / "widget.js"
STEPS = 30  # live steps for the latency figure

NEURON = """\
import time
import rtxviz
from rtxviz import Tensor, Variable

def value(x, name):
    return Variable.from_tensor(Tensor.from_slice([x], [1]), name=name)

with rtxviz.watch(notebook=True, run_name="neuron") as run:
    time.sleep(1.0)  # the view loads (as it has when a later cell runs backward)
    for i in range(STEPS):
        with run.step(i):
            x1, x2 = value(2.0, "x1"), value(0.0, "x2")
            w1, w2 = value(-3.0, "w1"), value(1.0, "w2")
            b = value(6.8813735870195432, "b")
            o = (x1 * w1 + x2 * w2 + b).tanh()
            o.backward()
        time.sleep(0.1)  # a step a tenth of a second: each is drawn before the next
"""


def _colour(norm: float) -> str:
    """The viewer's colour for a gradient norm (the shared ramp, as the browser writes it)."""
    hexa = ramp_colour(norm)
    r, g, b = (int(hexa[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.fixture(scope="module")
def lab(jupyterlab):
    write_notebook(jupyterlab.root / "neuron.ipynb", f"STEPS = {STEPS}\n" + NEURON)
    return jupyterlab


@pytest.mark.timeout(300)
def test_the_widget_draws_the_graph_and_its_gradient_colours(lab: JupyterLab, browser) -> None:
    out = Path(__file__).resolve().parents[2] / "test-artifacts"
    out.mkdir(exist_ok=True)
    seen = run_notebook(browser, lab, "neuron.ipynb", last_step=STEPS - 1, screenshot=out / "jupyterlab-widget.png",
                        reload=True)
    by_label = {label: (kind, cls, colour) for kind, label, cls, colour in seen.nodes}
    half = 0.5  # do/dn
    expect_leaves = {"x1": 1.5, "w1": 1.0, "x2": 0.5, "b": half}
    for name, norm in expect_leaves.items():
        assert by_label[name][1:] == (grad_class(norm), _colour(norm)), (name, by_label[name])
    assert by_label["w2"][1] == "zero"  # x2 = 0: nothing flows to w2
    ops = sorted(label for kind, label, *_ in seen.nodes if kind in ("op", "output"))
    assert ops == ["add", "add", "mul", "mul", "tanh"], ops
    assert by_label["tanh"][1:] == (grad_class(1.0), _colour(1.0))  # the root: do/do = 1
    assert not seen.errors, seen.errors
    # a frame that loads again (its output moved in the page) draws the same last step: snapshot, then live events
    assert sorted(seen.nodes_after_reload) == sorted(seen.nodes)
    # every event drawn while the steps were live has a latency (kernel's time.time() to the frame that drew it);
    # the figure is recorded, not asserted (speed is for benchmarks/bench_notebook.py, not for a timed test)
    assert len(seen.latencies) > STEPS * 10
    (out / "notebook-latency.json").write_text(json.dumps(seen.latency_summary()))
