"""End to end in a real Jupyter Notebook 7 (the `notebook` package, built from JupyterLab's parts but its own app
and page), in headless Chromium: the same micrograd neuron as the JupyterLab test, and the widget's output area
shows its graph with the gradient colours the closed form gives (see test_jupyterlab.py for the numbers)."""

from __future__ import annotations

import pytest

from rtxviz.summary import grad_class

from ..browser.shared_browser import missing
from .jupyterlab_server import JupyterLab, run_notebook, write_notebook
from .test_jupyterlab import NEURON, WIDGET_JS, _colour

STEPS = 3


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory):
    pytest.importorskip("notebook", minversion="7")
    reason = missing() or (None if WIDGET_JS.is_file() else f"{WIDGET_JS} not built: run `make setup`")
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("nb7") / "notebooks"
    root.mkdir()
    write_notebook(root / "neuron.ipynb", f"STEPS = {STEPS}\n" + NEURON)
    server = JupyterLab(root, app="notebook").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.timeout(300)
def test_notebook7_widget_draws_the_graph_and_its_gradient_colours(notebook7: JupyterLab, browser) -> None:
    seen = run_notebook(browser, notebook7, "neuron.ipynb", last_step=STEPS - 1)
    by_label = {label: (kind, cls, colour) for kind, label, cls, colour in seen.nodes}
    for name, norm in {"x1": 1.5, "w1": 1.0, "x2": 0.5, "b": 0.5}.items():
        assert by_label[name][1:] == (grad_class(norm), _colour(norm)), (name, by_label[name])
    assert by_label["w2"][1] == "zero"
    ops = sorted(label for kind, label, *_ in seen.nodes if kind in ("op", "output"))
    assert ops == ["add", "add", "mul", "mul", "tanh"], ops
    # Notebook 7.6 itself throws one error on every notebook page, a plain `1 + 1` one too ("Cannot read
    # properties of undefined (reading 'schema')", from a settings load in its own bundle): not the widget's
    ours = [e for e in seen.errors if "/static/notebook/notebook_core." not in e]
    assert not ours, ours
