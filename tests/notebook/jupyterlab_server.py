"""A real JupyterLab, or Jupyter Notebook 7, for the end-to-end tests: `jupyter lab --no-browser` (or
`jupyter notebook`) on a free loopback port, with a token, a temporary notebook folder and its own Jupyter/IPython
config, runtime and workspace folders (nothing of the user's), the app exposed as `window.jupyterapp` so the test
can run its commands (Notebook 7 is built from JupyterLab's parts: the same app object, shell and commands)."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WAIT_MS = 90_000  # a condition wait in the page (JupyterLab takes ~30 s to start on a loaded 2-core machine)
STARTUP_S = 90  # a loaded 2-core machine takes a while to start JupyterLab (a passing run waits only as needed)


def write_notebook(path: Path, *cells: str) -> Path:
    """Write a notebook of these code cells at `path`, with the python3 kernel a server opens it in."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """app: "lab" (JupyterLab) or "notebook" (Jupyter Notebook 7, one notebook per browser page)."""

    def __init__(self, root: Path, token: str = "rtxviz-e2e", app: str = "lab") -> None:
        self.root, self.token, self.port, self.app = root, token, free_port(), app
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = root.parent / f"jupyter{app}.log"

    def page_url(self, name: str) -> str:
        """Where a notebook opens: JupyterLab's tree route in a workspace of its own (a server shared by several
        tests would otherwise reopen the notebooks earlier tests left open), or Notebook 7's own page."""
        path = f"lab/workspaces/{Path(name).stem}/tree/{name}" if self.app == "lab" else f"notebooks/{name}"
        return f"{self.url}/{path}?token={self.token}"

    def start(self) -> JupyterLab:
        home = self.root.parent / "jupyter-home"
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
               "IPYTHONDIR": str(home / "ipython"), "JUPYTER_PLATFORM_DIRS": "1", "OPENBLAS_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                           os.environ.get("PYTHONPATH")]))}
        cmd = [sys.executable, "-m", "jupyterlab" if self.app == "lab" else "notebook", "--no-browser",
               "--ip=127.0.0.1", f"--port={self.port}",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
               "--ServerApp.port_retries=0"]
        if self.app == "lab":
            cmd += ["--LabApp.expose_app_in_browser=True", f"--LabServerApp.workspaces_dir={home / 'workspaces'}",
                    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        else:
            cmd += ["--JupyterNotebookApp.expose_app_in_browser=True",
                    f"--JupyterNotebookApp.workspaces_dir={home / 'workspaces'}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI containers run as root; the server only listens on loopback
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter {self.app} exited with {self.proc.returncode}: "
                                   f"{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"jupyter {self.app} did not answer within {STARTUP_S}s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


_KERNEL = "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"


@dataclass
class Seen:
    """What the widget's frame showed once the notebook had run."""

    nodes: list[list[str]] = field(default_factory=list)  # [kind, label, grad class, grad colour] per node
    latencies: list[float] = field(default_factory=list)  # ms, every event: kernel time.time() to frame drawn
    errors: list[str] = field(default_factory=list)
    nodes_after_reload: list[list[str]] = field(default_factory=list)  # the same, once the frame loaded again
    #: per live batch (src/hosted.ts BatchTimes): its oldest event's t, kernel send, host and frame receipt (s)
    batches: list[dict[str, Any]] = field(default_factory=list)
    draw_log: list[list[float]] = field(default_factory=list)  # [Date.now() ms, last seq drawn] per drawn frame

    def latency_summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)
        return {"events": len(lat), "p50_ms": lat[len(lat) // 2], "p95_ms": lat[math.ceil(0.95 * len(lat)) - 1],
                "max_ms": lat[-1], "load_avg_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


def run_notebook(browser: Any, lab: JupyterLab, name: str, last_step: int, min_nodes: int = 2,
                 screenshot: Path | None = None, reload: bool = False) -> Seen:
    """Open notebook `name` in JupyterLab, run all its cells, wait until the widget has drawn step `last_step`
    with every node coloured and the kernel is idle; return what the frame shows. With `reload`, the frame is
    then moved in the page (an iframe moved in the DOM loads again, as when the notebook re-attaches an output)
    and what it shows once it has drawn again goes into `nodes_after_reload`."""
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000}, bypass_csp=True)
    ctx.set_default_timeout(WAIT_MS)  # every wait is on a condition; the limit only bounds a failing run
    page = ctx.new_page()
    seen = Seen()
    page.on("pageerror", lambda e: seen.errors.append(f"{e}\n{e.stack}"))
    try:
        page.goto(lab.page_url(name))
        page.wait_for_function(f"window.jupyterapp && window.jupyterapp.shell.currentWidget"
                               f" && window.jupyterapp.shell.currentWidget.sessionContext"
                               f" && window.jupyterapp.shell.currentWidget.sessionContext.session"
                               f" && {_KERNEL} && {_KERNEL}.status === 'idle'")
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        frame = page.wait_for_selector(".jp-OutputArea-output iframe.rtxviz-frame").content_frame()
        assert frame is not None, "the widget's frame has no document"
        frame.wait_for_function(f"window.__rtxviz && window.__rtxviz.history.graph"
                                f" && window.__rtxviz.history.graph.step === {last_step}"
                                f" && document.querySelectorAll('g.vnode').length >= {min_nodes}")
        page.wait_for_function(f"{_KERNEL}.status === 'idle'")
        frame.wait_for_function("[...document.querySelectorAll('g.vnode')].every(n => n.dataset.gradClass"
                                " !== 'none')")
        seen.nodes = frame.evaluate("[...document.querySelectorAll('g.vnode')].map(n => [n.dataset.kind,"
                                    " n.querySelector('text.l1').textContent, n.dataset.gradClass,"
                                    " n.dataset.gradColor])")
        seen.latencies = frame.evaluate("window.__rtxviz.metrics.latencies")
        seen.batches = frame.evaluate("window.__rtxvizHosted || []")
        seen.draw_log = frame.evaluate("window.__rtxviz.metrics.drawLog.map(([p, s]) => [performance.timeOrigin + p,"
                                       " s])")
        if screenshot is not None:
            page.screenshot(path=str(screenshot))
        if reload:
            frame.evaluate("window.__before_reload = true")
            page.evaluate("(() => { const f = document.querySelector('iframe.rtxviz-frame');"
                          " const p = f.parentElement; p.removeChild(f); p.appendChild(f); })()")
            frame = page.wait_for_selector(".jp-OutputArea-output iframe.rtxviz-frame").content_frame()
            assert frame is not None
            frame.wait_for_function(f"!window.__before_reload && window.__rtxviz && window.__rtxviz.history.graph"
                                    f" && window.__rtxviz.history.graph.step === {last_step}"
                                    " && [...document.querySelectorAll('g.vnode')].every(n => n.dataset.gradClass"
                                    " !== 'none')")
            seen.nodes_after_reload = frame.evaluate(
                "[...document.querySelectorAll('g.vnode')].map(n => [n.dataset.kind,"
                " n.querySelector('text.l1').textContent, n.dataset.gradClass, n.dataset.gradColor])")
    finally:
        ctx.close()
    return seen
