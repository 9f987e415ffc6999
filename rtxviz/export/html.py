"""One self-contained HTML file for a recorded run: the viewer app with every JS/CSS file inlined and the run's
events embedded, so it opens from disk (file://) with no server.

What the page gets (the contract the viewer app implements, see `CONTRACT`):

- ``<script>window.RTXVIZ_EMBEDDED = true;</script>`` before any app script;
- ``<script type="application/json" id="rtxviz-run">{"format": "rtxviz-run", "version": 1, "run": {...},
  "events": [...]}</script>``: the run's metadata and every event (with ``seq``) in order. ``<``, ``>`` and ``&``
  are written as ``\\u003c`` etc., so no ``</script>`` can end the block early; `JSON.parse` reads it back.
- ``<script type="application/json" id="rtxviz-assets">{"layout-worker.js": "<source>", ...}</script>``: every
  other .js file of the app (workers), for ``new Worker(URL.createObjectURL(new Blob([src])))``;
- the app's Content-Security-Policy meta replaced by one allowing inline/data:/blob: scripts and workers and
  ``connect-src 'none'`` (the page cannot reach any server);
- classic ``<script src>`` and stylesheets inlined; ES modules (``<script type="module" src>`` and everything they
  import with relative specifiers) turned into ``data:`` modules behind an import map, their relative import
  specifiers rewritten to ``@rtxviz/app/<path>``.

>>> text = embed_json({"events": [{"op": "</script>"}]})
>>> "</script>" in text, json.loads(text)["events"][0]["op"]
(False, '</script>')
"""

from __future__ import annotations

import base64
import json
import mimetypes
import posixpath
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..engine.errors import RtxvizError

CONTRACT = """\
Embedded mode (rtxviz.export.html): when window.RTXVIZ_EMBEDDED is true, the app must
  1. read JSON.parse(document.getElementById("rtxviz-run").textContent) -> {format, version, run, events};
  2. feed `events` (in order; each has seq) to the same handler that live WebSocket messages go to, and show
     `run` (id, name, status) as the selected run;
  3. open no WebSocket and make no fetch/XHR to /api (there is no server); hide the run picker and live controls;
  4. load no other file at run time: no fetch() of assets, no `new Worker("layout-worker.js")`: build the worker
     from the inlined source instead,
       const src = JSON.parse(document.getElementById("rtxviz-assets").textContent)["layout-worker.js"];
       new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
     (or lay out on the main thread); no import.meta.url-relative URLs. Static `import ... from "./x.js"`
     between modules is fine (the exporter rewrites and inlines it). The page's CSP has connect-src 'none'.
"""

_SCRIPT_SRC = re.compile(r"<script\b([^>]*?)\bsrc\s*=\s*[\"']([^\"']+)[\"']([^>]*)>\s*</script>", re.I)
_STYLESHEET = re.compile(r"<link\b[^>]*\brel\s*=\s*[\"']stylesheet[\"'][^>]*>", re.I)
_ICON = re.compile(r"<link\b[^>]*\brel\s*=\s*[\"'][^\"']*icon[^\"']*[\"'][^>]*>", re.I)
_HREF = re.compile(r"\bhref\s*=\s*[\"']([^\"']+)[\"']", re.I)
_MODULE_TYPE = re.compile(r"\btype\s*=\s*[\"']module[\"']", re.I)
# static and dynamic imports/exports with a relative specifier
_IMPORT = re.compile(r"""(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])(\.{1,2}/[^"']+)\2""")
_CSP = re.compile(r"<meta\b[^>]*http-equiv\s*=\s*[\"']content-security-policy[\"'][^>]*>\s*", re.I)
PREFIX = "@rtxviz/app/"
EXPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline' data: blob:; worker-src blob: data:; "
              "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'")


def _other_scripts(root: Path, done: set[str]) -> list[str]:
    """JS files of the app that the page does not load itself (workers): shipped in the assets map."""
    out = []
    for path in sorted(root.rglob("*.js")):
        rel = path.relative_to(root).as_posix()
        if rel not in done:
            out.append(rel)
    return out


class ExportError(RtxvizError, RuntimeError):
    """The viewer app is missing or cannot be inlined."""


def embed_json(obj: Any) -> str:
    """JSON safe inside a ``<script type="application/json">`` block (``<``, ``>``, ``&``, U+2028/9 escaped)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _local(ref: str) -> bool:
    return not re.match(r"^([a-z][a-z0-9+.-]*:|//)", ref, re.I)


def _read(root: Path, rel: str) -> str:
    rel = rel.split("?")[0].split("#")[0].lstrip("/")
    path = (root / rel).resolve()
    if root.resolve() not in path.parents and path != root.resolve():
        raise ExportError(f"export: {rel!r} points outside the viewer folder {root}")
    if not path.is_file():
        raise ExportError(f"export: the viewer's index.html refers to {rel!r}, which is not in {root}")
    return path.read_text(encoding="utf-8")


def _inline_script(code: str) -> str:
    return code.replace("</script", "<\\/script").replace("<!--", "<\\!--")


class _Modules:
    """Collects ES modules reachable from entry points and rewrites their relative imports to bare names."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.code: dict[str, str] = {}

    def add(self, rel: str) -> str:
        rel = posixpath.normpath(rel.split("?")[0].lstrip("/"))
        todo = [rel]
        while todo:  # iterative walk of the import graph
            cur = todo.pop()
            if cur in self.code:
                continue
            src = _read(self.root, cur)
            base = posixpath.dirname(cur)

            def rewrite(m: re.Match, base: str = base) -> str:
                target = posixpath.normpath(posixpath.join(base, m.group(3)))
                todo.append(target)
                return f"{m.group(1)}{m.group(2)}{PREFIX}{target}{m.group(2)}"

            self.code[cur] = _IMPORT.sub(rewrite, src)
        return PREFIX + rel

    def import_map(self) -> str:
        imports = {PREFIX + rel: "data:text/javascript;base64," + base64.b64encode(code.encode()).decode()
                   for rel, code in sorted(self.code.items())}
        return f'<script type="importmap">{embed_json({"imports": imports})}</script>'


def build_html(index_html: str, root: Path, payload: dict, title: str | None = None) -> str:
    """The self-contained page: `index_html` (from `root`) with assets inlined and `payload` embedded."""
    modules = _Modules(root)

    def script(m: re.Match) -> str:
        attrs, src = m.group(1) + m.group(3), m.group(2)
        if not _local(src):
            raise ExportError(f"export: the viewer loads {src!r} from the network; vendor it into the app")
        if _MODULE_TYPE.search(attrs):
            return f'<script type="module">import "{modules.add(src)}";</script>'
        return f"<script>{_inline_script(_read(root, src))}</script>"

    def stylesheet(m: re.Match) -> str:
        href = _HREF.search(m.group(0))
        if href is None or not _local(href.group(1)):
            return m.group(0)
        css = _read(root, href.group(1)).replace("</style", "<\\/style")
        return f"<style>{css}</style>"

    def icon(m: re.Match) -> str:
        href = _HREF.search(m.group(0))
        if href is None or not _local(href.group(1)):
            return m.group(0)
        path = root / href.group(1).lstrip("/")
        if not path.is_file():
            return ""
        mime = mimetypes.guess_type(path.name)[0] or "image/png"
        data = base64.b64encode(path.read_bytes()).decode()
        return m.group(0).replace(href.group(0), f'href="data:{mime};base64,{data}"')

    inlined: set[str] = set()

    def script_tracking(m: re.Match) -> str:
        inlined.add(posixpath.normpath(m.group(2).split("?")[0].lstrip("/")))
        return script(m)

    html = _SCRIPT_SRC.sub(script_tracking, index_html)
    html = _STYLESHEET.sub(stylesheet, html)
    html = _ICON.sub(icon, html)
    # the app's own CSP (script-src 'self') would block every inlined script: replace it with one that allows
    # the inlined code and nothing from the network (connect-src 'none': the page cannot talk to any server)
    html = _CSP.sub("", html)
    assets = {rel: _read(root, rel) for rel in _other_scripts(root, inlined | set(modules.code))}
    head = (f'<meta http-equiv="Content-Security-Policy" content="{EXPORT_CSP}">\n'
            "<script>window.RTXVIZ_EMBEDDED = true;</script>\n"
            f'<script type="application/json" id="rtxviz-run">{embed_json(payload)}</script>\n'
            f'<script type="application/json" id="rtxviz-assets">{embed_json(assets)}</script>\n')
    if modules.code:
        head += modules.import_map() + "\n"  # must precede every module script
    if title:
        esc = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if re.search(r"<title>.*?</title>", html, re.I | re.S):
            html = re.sub(r"<title>.*?</title>", lambda _m: f"<title>{esc}</title>", html, count=1, flags=re.I | re.S)
    m = re.search(r"<head\b[^>]*>", html, re.I)
    if m is None:
        return "<!doctype html><html><head>" + head + "</head>" + html + "</html>"
    return html[:m.end()] + "\n" + head + html[m.end():]


def default_static_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "web" / "static"


def app_is_built(static_dir: str | Path | None = None) -> bool:
    """Whether the viewer app has been built into `static_dir` (an index.html plus at least one .js file)."""
    root = Path(static_dir) if static_dir is not None else default_static_dir()
    return (root / "index.html").is_file() and any(root.rglob("*.js"))


def export_html(events: Iterable[dict], path: str, run: dict | None = None, static_dir: str | Path | None = None,
                title: str | None = None) -> str:
    """Write one HTML file holding the viewer and the run's `events`; returns `path`.

    run: the run's metadata (id, name, status...) as `GET /api/runs/{id}` gives it. static_dir: the built
    viewer (default rtxviz/web/static).
    """
    root = Path(static_dir) if static_dir is not None else default_static_dir()
    if not app_is_built(root):
        raise ExportError(f"export: the viewer app is not built in {root} (no index.html with JavaScript); "
                          "build the frontend first")
    evs = []
    for i, ev in enumerate(events, 1):
        ev = dict(ev)
        ev.setdefault("seq", i)
        evs.append(ev)
    info = dict(run or {})
    info.setdefault("id", "exported")
    info.setdefault("name", title or info["id"])
    payload = {"format": "rtxviz-run", "version": 1, "run": info, "events": evs}
    try:
        embed_json(payload)
    except ValueError:  # NaN/Inf slipped into an event: JSON has no such numbers
        from .jsonl import _safe

        payload = _safe(payload)
    html = build_html((root / "index.html").read_text(encoding="utf-8"), root, payload,
                      title or f"rtxviz · {info['name']}")
    Path(path).write_text(html, encoding="utf-8")
    return path
