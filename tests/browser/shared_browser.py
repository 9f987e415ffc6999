"""One headless Chromium per test process, shared by tests/browser and tests/export/test_html.py.

Playwright's sync API runs an event loop: a second `sync_playwright()` while one is running fails ("Sync API
inside the asyncio loop"), so every fixture that needs a browser borrows this one (reference-counted).
"""

from __future__ import annotations

import os
from typing import Any

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--no-first-run", "--disable-sync"]
_state: dict[str, Any] = {"cm": None, "pw": None, "browser": None, "refs": 0}


def missing() -> str | None:
    """Why no browser can be started here (None when one can)."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} missing: install Debian's chromium (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (Python) is not installed"
    return None


def acquire() -> Any:
    """The shared Browser (started on first use); pair every call with `release()`."""
    if _state["browser"] is None:
        from playwright.sync_api import sync_playwright

        cm = sync_playwright()
        pw = cm.start()
        _state.update(cm=cm, pw=pw, browser=pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS))
    _state["refs"] += 1
    return _state["browser"]


def release() -> None:
    _state["refs"] -= 1
    if _state["refs"] <= 0 and _state["browser"] is not None:
        try:
            _state["browser"].close()
        finally:
            _state["pw"].stop()
            _state.update(cm=None, pw=None, browser=None, refs=0)
