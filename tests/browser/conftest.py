"""Browser tests: the real server (uvicorn on a free port, temp SQLite) and Debian's Chromium via Playwright."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ..web.server import ThreadServer as ServerThread
from .shared_browser import acquire, missing, release

STATIC = Path(__file__).resolve().parents[2] / "rtxviz" / "web" / "static"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Waits are on conditions, never sleeps; their limits are generous because a loaded 2-core CI machine can take
# seconds to start a page (a passing run never waits for a limit).
WAIT_MS = 30_000


def _skip_reason() -> str | None:
    if not (STATIC / "app.js").is_file():
        return "frontend not built: run `cd frontend && npm ci && npm run build` (make test does it)"
    return missing()


def post_events(url: str, run_id: str, events: list[dict], token: str | None = None, batch: int = 5000) -> None:
    for i in range(0, len(events), batch):
        body = json.dumps({"events": events[i:i + batch]}).encode()
        req = urllib.request.Request(f"{url}/api/runs/{run_id}/events", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200, r.read()


@pytest.fixture(scope="session")
def browser():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    b = acquire()
    try:
        yield b
    finally:
        release()


@pytest.fixture()
def server(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from rtxviz.web.app import create_app

    with ServerThread(create_app(db=str(tmp_path / "runs.db"))) as url:
        yield url


@pytest.fixture()
def token_server(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from rtxviz.web.app import create_app

    with ServerThread(create_app(db=str(tmp_path / "runs.db"), token="s3cret")) as url:
        yield url


def _page(browser, bypass_csp: bool):
    # Playwright's wait_for_function evaluates strings, which the page's CSP (no eval) forbids: tests that wait on
    # predicates bypass the CSP; the XSS test keeps it.
    ctx = browser.new_context(viewport={"width": 1400, "height": 860}, bypass_csp=bypass_csp)
    ctx.set_default_timeout(WAIT_MS)  # every wait_for_* and locator action (conditions, not sleeps)
    pg = ctx.new_page()
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))  # type: ignore[attr-defined]
    return ctx, pg


@pytest.fixture()
def page(browser):
    ctx, pg = _page(browser, True)
    yield pg
    ctx.close()


@pytest.fixture()
def strict_page(browser):
    ctx, pg = _page(browser, False)
    yield pg
    ctx.close()


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    return path
