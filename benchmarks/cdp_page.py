"""A headless Chromium page driven over the DevTools protocol with nothing watching its network, for timing what a
user's browser does (not a benchmark itself: bench_frontend.py's burst uses it).

Playwright enables the Network domain on every page it drives and relays every WebSocket frame the page receives,
payload and all, to its Python client, whether or not anything listens (its PageDispatcher makes a
WebSocketDispatcher for every socket, which forwards each `frameReceived`: seen here, ten frames of up to 580 KB
for a 13,000-event burst). That is the burst's 3 MB serialised by the browser process, parsed and re-sent by the
Node driver, parsed again by the client, on the same 2 cores as the server and the page, inside the window being
timed. A user's browser has no such observer. This page speaks the protocol itself and enables only the Page
domain (a few navigation events per load, for its init scripts to run): it evaluates scripts (`Runtime.evaluate`,
which the page's CSP does not govern) and installs one before the page's own
(`Page.addScriptToEvaluateOnNewDocument`).

    with CdpBrowser(CHROMIUM, LAUNCH_ARGS, 1400, 860) as page:
        page.init_script("window.x = 1")
        page.goto(url)
        page.wait_for("window.__rtxviz && window.__rtxviz.metrics.frames > 0")
        page.evaluate("window.x")
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import tempfile
import time
import urllib.request
from typing import Any

from websockets.sync.client import connect


class CdpError(RuntimeError):
    pass


class CdpBrowser:
    """One Chromium process with one page, driven over the protocol: `evaluate`, `wait_for`, `goto`,
    `init_script`. A context manager: the process and its profile directory go at exit."""

    def __init__(self, chromium: str, args: list[str], width: int, height: int) -> None:
        # Chromium's helper processes may still write to the profile for a moment after the browser exits
        self._tmp = tempfile.TemporaryDirectory(ignore_cleanup_errors=True)
        self._proc = subprocess.Popen(
            [chromium, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={self._tmp.name}",
             f"--window-size={width},{height}", *args, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._ids = itertools.count(1)
        self._ws: Any = None
        self._port = 0
        self._target: str | None = None
        self._init: list[str] = []

    def __enter__(self) -> CdpBrowser:
        try:
            self._port = self._devtools_port()
            with urllib.request.urlopen(f"http://127.0.0.1:{self._port}/json/list", timeout=10) as r:
                pages = [t for t in json.loads(r.read()) if t.get("type") == "page"]
            if not pages:
                raise CdpError("chromium opened no page")
            self._attach(pages[0])
        except BaseException:
            self.__exit__()
            raise
        return self

    def _attach(self, target: dict) -> None:
        self._ws = connect(target["webSocketDebuggerUrl"], max_size=None, compression=None)
        self._target = target["id"]
        self.send("Page.enable")  # for init scripts to run; its few events are skipped in `send`
        for source in self._init:
            self.send("Page.addScriptToEvaluateOnNewDocument", {"source": source})

    def new_page(self) -> None:
        """Close the page and drive a new one (a renderer process of its own, as a new tab gets), with the same
        init scripts."""
        old = self._target
        self._ws.close()
        req = urllib.request.Request(f"http://127.0.0.1:{self._port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=10) as r:
            target = json.loads(r.read())
        if old is not None:
            urllib.request.urlopen(f"http://127.0.0.1:{self._port}/json/close/{old}", timeout=10).read()
        self._attach(target)

    def _devtools_port(self) -> int:
        assert self._proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                return int(m.group(1))
            if not line and self._proc.poll() is not None:
                break
        raise CdpError("chromium did not print its DevTools address")

    def __exit__(self, *exc: object) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        self._tmp.cleanup()

    def send(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        """One protocol call and its result (the Page domain's events in between are skipped)."""
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self._ws.recv(timeout=max(0.001, deadline - time.monotonic())))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression: str, timeout: float = 60) -> Any:
        """The value of a script expression (a promise is awaited), as JSON."""
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CdpError(f"evaluate {expression[:80]!r}: {details.get('text')} "
                           f"{details.get('exception', {}).get('description', '')}")
        return result.get("result", {}).get("value")

    def wait_for(self, condition: str, timeout: float = 60) -> None:
        """Until the expression `condition` is true, checked in the page at every animation frame (one call, no
        polling over the protocol)."""
        ms = int(timeout * 1000)
        ok = self.evaluate(f"""new Promise((done) => {{ const t0 = performance.now();
          const check = () => {{ let v = false; try {{ v = !!({condition}); }} catch (e) {{}}
            if (v) done(true); else if (performance.now() - t0 > {ms}) done(false);
            else requestAnimationFrame(check); }};
          check(); }})""", timeout=timeout + 10)
        if not ok:
            raise CdpError(f"timed out after {timeout} s waiting for {condition!r}")

    def init_script(self, source: str) -> None:
        """Run `source` in every document loaded from now on, before the document's own scripts."""
        self._init.append(source)
        self.send("Page.addScriptToEvaluateOnNewDocument", {"source": source})

    def goto(self, url: str) -> None:
        """Load `url` and wait until the document has loaded."""
        self.send("Page.navigate", {"url": url})
        self.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")
