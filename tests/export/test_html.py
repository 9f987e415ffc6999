"""The self-contained HTML export: inlining, the embedded run, and opening it in headless Chromium (no server)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rtxviz.export import CONTRACT, ExportError, app_is_built, export_html
from rtxviz.export.html import default_static_dir
from tests.browser import shared_browser

from .conftest import record_run

WAIT_MS = 30_000  # generous limits on condition waits (a loaded 2-core CI machine); never sleeps

# A stand-in viewer that implements the embedded-mode contract: ES modules with a relative import, a stylesheet.
FAKE_INDEX = """<!doctype html><html><head><meta charset="utf-8"><title>app</title>
<link rel="stylesheet" href="style.css"><script type="module" src="js/main.js"></script></head>
<body><ul id="nodes"></ul></body></html>"""
FAKE_MAIN = """import { nodeItems } from "./graph.js";
const run = JSON.parse(document.getElementById("rtxviz-run").textContent);
document.title = run.run.name;
for (const li of nodeItems(window.RTXVIZ_EMBEDDED ? run.events : [])) document.getElementById("nodes").append(li);
document.body.dataset.ready = "1";"""
FAKE_GRAPH = """export function nodeItems(events) {
  return events.filter(e => e.kind === "node").map(e => {
    const li = document.createElement("li"); li.className = "node"; li.dataset.nodeId = e.id;
    li.textContent = e.op + " " + e.shape.join("x"); return li; });
}"""


@pytest.fixture
def fake_app(tmp_path) -> Path:
    root = tmp_path / "static"
    (root / "js").mkdir(parents=True)
    (root / "index.html").write_text(FAKE_INDEX)
    (root / "style.css").write_text(".node { color: rgb(1, 2, 3); }")
    (root / "js" / "main.js").write_text(FAKE_MAIN)
    (root / "js" / "graph.js").write_text(FAKE_GRAPH)
    return root


def test_export_inlines_everything_and_embeds_events(tmp_path, fake_app, run_events):
    run_events[3] = dict(run_events[3], name="</script><script>alert(1)</script>")
    out = export_html(run_events, str(tmp_path / "run.html"), run={"id": "r1", "name": "demo"}, static_dir=fake_app)
    html = Path(out).read_text()
    assert 'src="' not in html and 'href="style.css"' not in html
    assert "window.RTXVIZ_EMBEDDED = true" in html
    assert html.count("</script>") == html.count("<script")  # the event text cannot close a script early
    block = re.search(r'<script type="application/json" id="rtxviz-run">(.*?)</script>', html, re.S).group(1)
    payload = json.loads(block)
    assert payload["format"] == "rtxviz-run" and payload["run"]["id"] == "r1"
    assert payload["events"][3]["name"] == "</script><script>alert(1)</script>"
    assert [e["seq"] for e in payload["events"]] == list(range(1, len(run_events) + 1))
    assert "@rtxviz/app/js/graph.js" in html and '<script type="importmap">' in html
    assert "connect-src 'none'" in html


def test_real_app_is_inlined_with_its_worker(tmp_path, run_events):
    if not app_is_built():
        pytest.skip("the viewer app is not built into rtxviz/web/static yet")
    html = Path(export_html(run_events, str(tmp_path / "real.html"))).read_text()
    assert '<script src=' not in html and "script-src 'self'" not in html
    assets = json.loads(re.search(r'id="rtxviz-assets">(.*?)</script>', html, re.S).group(1))
    workers = [p.name for p in default_static_dir().glob("*worker*.js")]
    assert set(workers) <= set(assets)


def test_missing_app_is_a_clear_error(tmp_path, run_events):
    with pytest.raises(ExportError, match="not built"):
        export_html(run_events, str(tmp_path / "x.html"), static_dir=tmp_path)
    assert "RTXVIZ_EMBEDDED" in CONTRACT


@pytest.fixture
def browser():
    """The process's shared headless Chromium (tests/browser/shared_browser.py); skips when there is none."""
    reason = shared_browser.missing()
    if reason:
        pytest.skip(reason)
    b = shared_browser.acquire()
    try:
        yield b
    finally:
        shared_browser.release()


@pytest.fixture
def file_page(browser):
    """A page with the page's own CSP in force (as a user opening the file gets), recording requests and errors."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 860})
    ctx.set_default_timeout(WAIT_MS)
    page = ctx.new_page()
    page.requests, page.errors = [], []  # type: ignore[attr-defined]
    page.on("request", lambda r: page.requests.append(r.url))  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: page.errors.append(str(e)))  # type: ignore[attr-defined]
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)  # type: ignore
    yield page
    ctx.close()


def test_exported_page_opens_from_disk_in_chromium(tmp_path, fake_app, run_events, file_page):
    out = export_html(run_events, str(tmp_path / "run.html"), run={"name": "demo"}, static_dir=fake_app)
    page = file_page
    page.goto(Path(out).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    items = page.locator("li.node").all_text_contents()
    colour = page.locator("li.node").first.evaluate("e => getComputedStyle(e).color")
    requests, errors = page.requests, page.errors
    nodes = [e for e in run_events if e["kind"] == "node"]
    assert items == [f"{e['op']} {'x'.join(map(str, e['shape']))}" for e in nodes]
    assert colour == "rgb(1, 2, 3)" and errors == []
    assert all(not u.startswith(("http:", "https:", "ws:")) for u in requests)


def _app_supports_embedding() -> bool:
    return app_is_built() and any("RTXVIZ_EMBEDDED" in p.read_text(errors="replace")
                                  for p in default_static_dir().rglob("*.js"))


@pytest.mark.skipif(not app_is_built(), reason="the viewer app is not built into rtxviz/web/static yet")
@pytest.mark.skipif(not _app_supports_embedding(), reason="the built viewer does not implement embedded mode "
                                                          "(window.RTXVIZ_EMBEDDED, see rtxviz.export.CONTRACT) yet")
def test_real_app_export_shows_the_runs_nodes(tmp_path, run_events, file_page):
    out = export_html(run_events, str(tmp_path / "real.html"), run={"id": "r1", "name": "demo"})
    page = file_page
    page.goto(Path(out).as_uri())
    # selectors poll without eval (the page's CSP forbids it, so no wait_for_function)
    page.wait_for_selector("g.vnode[data-key='model.2|linear|1']")
    text = page.inner_text("body")
    assert "linear" in text and "relu" in text


def _ops(events: list[dict], step: int) -> int:
    return sum(1 for e in events if e["kind"] == "node" and e["step"] == step)


@pytest.mark.skipif(not _app_supports_embedding(), reason="the viewer app is not built (cd frontend && npm run build)")
def test_real_app_embedded_mode_one_run_no_server_recompute_drawn(tmp_path, file_page):
    events = record_run(steps=2, with_checkpoint=True)
    out = export_html(events, str(tmp_path / "ckpt.html"), run={"id": "r1", "name": "ckpt demo", "status": "ok"})
    page = file_page
    page.goto(Path(out).as_uri())
    # the layout worker, built from the inlined source (a blob: URL), lays the graph out under the page's CSP
    page.wait_for_selector("body[data-layouts]")
    runs = page.locator("#runs li.run")
    assert runs.count() == 1 and runs.locator(".run-name").text_content() == "ckpt demo"
    assert "current" in runs.get_attribute("class")
    assert page.locator("#run-title").text_content() == "exported-demo"  # the run_start event names it
    assert page.locator("body.embedded").count() == 1
    assert "no server" in page.locator("#conn").text_content()
    # every node of the newest step is drawn: the forward ops, the checkpoint node, the recomputed ops, leaves
    total = int(page.locator("#counts").get_attribute("data-total"))
    assert page.locator("g.vnode").count() == total
    recomputed = page.locator("g.vnode.recomputed")
    inner = [e for e in events if e["kind"] == "checkpoint" and e["step"] == 1 and e["phase"] == "recompute_begin"]
    assert inner and recomputed.count() == inner[0]["ops"]  # each recomputed op once, none elsewhere
    assert all(t.startswith("↻ ") for t in recomputed.locator("text.l1").all_text_contents())
    assert page.locator("g.segment").get_attribute("data-state") == "recomputed"
    assert page.locator("g.vnode.recomputed rect.rc-ring").count() == recomputed.count()
    # an older step comes from the page itself (no server to ask)
    page.select_option("#step-select", "0")
    page.wait_for_selector("#counts[data-total]")
    assert page.locator("#scrub-label").text_content().endswith("last: step_end")
    artifacts = Path(__file__).resolve().parents[2] / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    page.screenshot(path=str(artifacts / "export-embedded.png"))
    allowed = ("file:", "data:", "blob:")
    assert [u for u in page.requests if not u.startswith(allowed)] == []
    assert page.errors == []
