"""The self-contained HTML export: inlining, the embedded run, and opening it in headless Chromium (no server)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from rtxviz.export import CONTRACT, ExportError, app_is_built, export_html
from rtxviz.export.html import default_static_dir

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]

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


def _open_in_chromium(path: str):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.path.exists(CHROMIUM):
        pytest.skip("no /usr/bin/chromium (apt-get install chromium)")
    return sync_api.sync_playwright, path


def test_exported_page_opens_from_disk_in_chromium(tmp_path, fake_app, run_events):
    out = export_html(run_events, str(tmp_path / "run.html"), run={"name": "demo"}, static_dir=fake_app)
    sync_playwright, _ = _open_in_chromium(out)
    requests = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(Path(out).as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=10_000)
            items = page.locator("li.node").all_text_contents()
            colour = page.locator("li.node").first.evaluate("e => getComputedStyle(e).color")
        finally:
            browser.close()
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
def test_real_app_export_shows_the_runs_nodes(tmp_path, run_events):
    out = export_html(run_events, str(tmp_path / "real.html"), run={"id": "r1", "name": "demo"})
    sync_playwright, _ = _open_in_chromium(out)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.goto(Path(out).as_uri())
            text = ""
            for _ in range(60):  # poll from Python: the page's CSP forbids eval, so no wait_for_function
                text = page.inner_text("body")
                if "relu" in text:
                    break
                page.wait_for_timeout(250)
        finally:
            browser.close()
    assert "linear" in text and "relu" in text
