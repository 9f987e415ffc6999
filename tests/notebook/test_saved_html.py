"""A notebook saved with its widget state shows its last graph without a kernel: executed by nbclient (which
stores the widget state, as JupyterLab's *Save Widget State Automatically* does), converted by nbconvert's HTML
exporter, and opened from disk in headless Chromium, which draws the snapshot: nodes and gradient classes.

nbconvert's page loads require.js, the widgets HTML manager and anywidget's front end from CDNs; here those
addresses are answered with the same files from tests/notebook/cdn (npm ci there: `make test` does it) and
anywidget's own package, and every other request is refused, so nothing is fetched from the network.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import anywidget
import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from rtxviz.summary import grad_class

from ..browser.shared_browser import acquire, missing, release
from .test_jupyterlab import NEURON, _colour

ROOT = Path(__file__).resolve().parents[2]
WIDGET_JS = ROOT / "rtxviz" / "notebook" / "static" / "widget.js"
CDN = Path(__file__).resolve().parent / "cdn" / "node_modules"
HTML_MANAGER = CDN / "@jupyter-widgets" / "html-manager" / "dist" / "embed-amd.js"
REQUIRE_JS = CDN / "requirejs" / "require.js"
ANYWIDGET_AMD = Path(anywidget.__file__).resolve().parent / "nbextension" / "index.js"


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> str:
    reason = (missing() or (None if WIDGET_JS.is_file() else f"{WIDGET_JS} not built: run `make setup`")
              or (None if HTML_MANAGER.is_file() and REQUIRE_JS.is_file()
                  else "tests/notebook/cdn not installed: `cd tests/notebook/cdn && npm ci` (make test does it)"))
    if reason:
        pytest.skip(reason)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("STEPS = 3\n" + NEURON)]
    NotebookClient(nb, timeout=240, kernel_name="python3").execute()
    body, _ = HTMLExporter().from_notebook_node(nb)
    return body


def test_the_html_carries_the_widget_state_with_the_last_graph(html: str) -> None:
    m = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', html, re.S)
    assert m, "nbconvert embedded no widget state"
    state = json.loads(m.group(1))["state"]
    ours = [s["state"] for s in state.values() if s["model_name"] == "AnyModel"]
    assert len(ours) == 1 and ours[0]["run_name"] == "neuron" and "rtxviz-frame" in ours[0]["_esm"]
    snap = json.loads(ours[0]["snapshot"])
    events = [json.loads(line) for line in snap["ndjson"].split("\n")]
    assert {e["step"] for e in events if e["kind"] == "node"} == {2}  # the last of the 3 steps


@pytest.mark.timeout(180)
def test_the_converted_page_draws_the_graph_without_a_kernel(html: str, tmp_path: Path) -> None:
    page_file = tmp_path / "neuron.html"
    page_file.write_text(html, encoding="utf-8")
    refused: list[str] = []

    def answer(route) -> None:  # the CDN, offline
        url = route.request.url
        if url.endswith("/dist/embed-amd.js") and "@jupyter-widgets/html-manager" in url:
            return route.fulfill(path=str(HTML_MANAGER), content_type="text/javascript")
        if re.search(r"/require(\.min)?\.js$", url):
            return route.fulfill(path=str(REQUIRE_JS), content_type="text/javascript")
        if "anywidget@" in url:
            return route.fulfill(path=str(ANYWIDGET_AMD), content_type="text/javascript")
        refused.append(url)
        return route.abort()

    browser = acquire()
    try:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
        ctx.set_default_timeout(60_000)
        ctx.route(re.compile(r"^https?://"), answer)
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        frame = page.wait_for_selector("iframe.rtxviz-frame").content_frame()
        assert frame is not None
        frame.wait_for_function("document.querySelectorAll('g.vnode').length === 10"
                                " && [...document.querySelectorAll('g.vnode')].every(n => n.dataset.gradClass"
                                " !== 'none')")
        nodes = frame.evaluate("[...document.querySelectorAll('g.vnode')].map(n => [n.dataset.kind,"
                               " n.querySelector('text.l1').textContent, n.dataset.gradClass, n.dataset.gradColor])")
        status = frame.evaluate("document.querySelector('#conn').textContent")
        ctx.close()
    finally:
        release()
    by_label = {label: (cls, colour) for _, label, cls, colour in nodes}
    for name, norm in {"x1": 1.5, "w1": 1.0, "x2": 0.5, "b": 0.5, "tanh": 1.0}.items():
        assert by_label[name] == (grad_class(norm), _colour(norm)), (name, by_label[name])
    assert by_label["w2"][0] == "zero"
    assert status == "notebook view (no server)"
    assert not errors, errors
    assert all("mathjax" in u or "mermaid" in u for u in refused), refused  # only what the neuron does not use
