"""The notebook view's latency (issue 19): a cell's backward to the widget drawn, p95 target <= 250 ms.

1. in JupyterLab (started like tests/notebook's fixture: loopback port, token, temporary folders) opened in
   headless Chromium: a cell runs micrograd's neuron under `rtxviz.watch(notebook=True)` for `--steps` steps, one
   every `--interval` seconds; the widget's frame records, in the animation frame that applied and drew each
   event, `Date.now()/1000 - ev.t` (`t`: the event's time.time() in the kernel, same machine clock). p50/p95/max
   over every event of the run, and per batch where its time went (`split`: the kernel's queue, the trip to
   the notebook page, the postMessage to the frame, the frame's draw).
2. the kernel's share, no browser: the same steps under the same emitter and WidgetTransport, with a channel
   that stamps the time each batch is handed to the comm: `send time - ev.t` per event.

    python benchmarks/bench_notebook.py [--steps 60] [--interval 0.1] [--json out.json]

Needs the built viewer (make setup), the dev extra (JupyterLab, anywidget) and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from tests.browser.shared_browser import acquire, release  # noqa: E402
from tests.notebook.jupyterlab_server import JupyterLab, run_notebook  # noqa: E402
from tests.notebook.test_jupyterlab import NEURON  # noqa: E402


def percentiles(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    return {"n": len(v), "p50_ms": round(v[len(v) // 2], 1), "p95_ms": round(v[math.ceil(0.95 * len(v)) - 1], 1),
            "max_ms": round(v[-1], 1)}


def split(batches: list[dict], draw_log: list[list[float]]) -> dict:
    """Where each live batch's time went, from its oldest event: `queue` (made to sent by the kernel: the
    emitter's queue and flush interval), `transit` (kernel to the host page: IOPub, the Jupyter server, its
    websocket, the widget manager), `post` (host page to the frame: postMessage), `draw` (frame receipt to the
    animation frame that drew its last event: waiting for the frame, applying, drawing)."""
    parts: dict[str, list[float]] = {"queue": [], "transit": [], "post": [], "draw": []}
    drawn = sorted(draw_log, key=lambda d: d[0])
    for b in batches:
        if b.get("sent") is None or b.get("host") is None:
            continue
        at = next((ms / 1000 for ms, seq in drawn if seq >= b["seq"] and ms / 1000 >= b["frame"] - 0.001), None)
        if at is None:
            continue
        parts["queue"].append((b["sent"] - b["t"]) * 1000)
        parts["transit"].append((b["host"] - b["sent"]) * 1000)
        parts["post"].append((b["frame"] - b["host"]) * 1000)
        parts["draw"].append((at - b["frame"]) * 1000)
    return {k: percentiles(v) for k, v in parts.items() if v}


def in_jupyterlab(steps: int, interval: float) -> dict:
    code = f"STEPS = {steps}\n" + NEURON.replace("time.sleep(0.1)", f"time.sleep({interval})")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "notebooks"
        root.mkdir()
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(code)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, root / "neuron.ipynb")
        lab = JupyterLab(root).start()
        browser = acquire()
        try:
            seen = run_notebook(browser, lab, "neuron.ipynb", last_step=steps - 1)
        finally:
            release()
            lab.stop()
    return {**percentiles(seen.latencies), "split_per_batch": split(seen.batches, seen.draw_log)}


def kernel_side(steps: int, interval: float) -> dict:
    import rtxviz
    from rtxviz import Tensor, Variable
    from rtxviz.notebook import NOTEBOOK_FLUSH_INTERVAL, WidgetTransport

    lat: list[float] = []

    def channel(content: dict, buffers: list[bytes]) -> None:
        now = time.time()
        lat.extend((now - json.loads(line)["t"]) * 1000 for line in buffers[0].split(b"\n"))

    def value(x: float, name: str) -> Variable:
        return Variable.from_tensor(Tensor.from_slice([x], [1]), name=name)

    with rtxviz.events.watch(transport=WidgetTransport(channel), flush_interval=NOTEBOOK_FLUSH_INTERVAL) as run:
        for i in range(steps):
            with run.step(i):
                x1, x2, w1, w2, b = value(2.0, "x1"), value(0.0, "x2"), value(-3.0, "w1"), value(1.0, "w2"), \
                    value(6.8813735870195432, "b")
                (x1 * w1 + x2 * w2 + b).tanh().backward()
            time.sleep(interval)
    return percentiles(lat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    out = {"load_avg_1min_at_start": round(load, 1), "cpus": os.cpu_count(),
           "kernel_side": kernel_side(args.steps, args.interval),
           "jupyterlab": in_jupyterlab(args.steps, args.interval),
           "load_avg_1min_at_end": round(os.getloadavg()[0], 1)}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
