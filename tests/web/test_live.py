"""Against a real uvicorn server on loopback: watch() -> server -> WebSockets; a stalled viewer; a killed server."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest
from websockets.sync.client import connect

import rtxviz.events as events
from rtxviz import Tensor, Variable
from rtxviz.web import create_app

from .server import ThreadServer

pytestmark = pytest.mark.timeout(120)


def mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    w1 = Variable.from_tensor(Tensor(rng.standard_normal((8, 16)).astype(np.float32) * 0.3), name="fc1.weight")
    w2 = Variable.from_tensor(Tensor(rng.standard_normal((16, 1)).astype(np.float32) * 0.3), name="fc2.weight")
    x = Tensor(rng.standard_normal((4, 8)).astype(np.float32))
    return w1, w2, x


def train(run, steps, delay=0.0):
    w1, w2, x = mlp_params()
    for i in range(steps):
        with run.step(i):
            loss = (x.matmul(w1).tanh().matmul(w2) ** 2).mean()
            loss.backward()
            with events.optimizer_step([w1, w2]):
                for p in (w1, w2):
                    p.data -= 0.01 * p.grad.data
                    p.grad = None
        if delay:
            time.sleep(delay)


class Viewer(threading.Thread):
    """A WebSocket client that collects a run's events until run_end."""

    def __init__(self, url, run_id):
        super().__init__(daemon=True)
        self.url = url.replace("http://", "ws://") + f"/api/runs/{run_id}/ws"
        self.events, self.ready, self.error = [], threading.Event(), None

    def run(self):
        try:
            with connect(self.url, open_timeout=10) as ws:
                self.ready.set()
                while True:
                    msg = json.loads(ws.recv(timeout=20))
                    if msg["type"] == "events":
                        self.events.extend(msg["events"])
                        if msg["events"][-1]["kind"] == "run_end":
                            return
        except Exception as exc:  # reported by the test
            self.error = exc
            self.ready.set()


def test_training_streams_in_order_to_three_viewers(tmp_path):
    with ThreadServer(create_app(db=str(tmp_path / "live.db"))) as url:
        viewers = [Viewer(url, "mlp-live") for _ in range(3)]
        for v in viewers:
            v.start()
            v.ready.wait(10)
        with events.watch(url, run_name="mlp", run_id="mlp-live", flush_interval=0.01) as run:
            train(run, 5)
        for v in viewers:
            v.join(30)
            assert v.error is None and not v.is_alive()
        assert run.dropped == 0
        n = run.stats()["sent"]
        for v in viewers:
            assert [e["seq"] for e in v.events] == list(range(1, n + 1))
        kinds = {e["kind"] for e in viewers[0].events}
        assert {"run_start", "leaf", "node", "grad", "leaf_grad", "optimizer_step", "run_end"} <= kinds
        with urllib.request.urlopen(url + "/api/runs/mlp-live") as r:
            info = json.loads(r.read())
        assert info["name"] == "mlp" and info["n_events"] == n and info["status"] == "ok"


def stalled_socket(url, run_id):
    """Complete a WebSocket handshake by hand, then never read: the server's sends to it back up."""
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /api/runs/{run_id}/ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    assert b"101" in s.recv(200)
    return s


def test_a_stalled_viewer_stalls_neither_ingest_nor_other_viewers(tmp_path):
    app = create_app(db=str(tmp_path / "stall.db"))
    app.state.hub.queue_batches = 4
    pad = "x" * 1000
    batch = "\n".join(json.dumps({"v": 1, "kind": "note", "t": 0.0, "step": None, "i": i, "pad": pad})
                      for i in range(500))
    with ThreadServer(app) as url:
        req = urllib.request.Request(url + "/api/runs/stall/events", data=batch.encode(),
                                     headers={"Content-Type": "application/x-ndjson"})
        urllib.request.urlopen(req).read()  # the run exists
        stuck = stalled_socket(url, "stall")
        fast = Viewer(url, "stall")
        fast.start()
        fast.ready.wait(10)
        t0 = time.monotonic()
        for _ in range(40):  # 20,000 events, about 20 MB: far past what the stuck socket's buffers hold
            urllib.request.urlopen(urllib.request.Request(url + "/api/runs/stall/events", data=batch.encode(),
                                                          headers={"Content-Type": "application/x-ndjson"})).read()
        ingest_s = time.monotonic() - t0
        end = json.dumps({"v": 1, "kind": "run_end", "t": 0.0, "step": None})
        urllib.request.urlopen(urllib.request.Request(url + "/api/runs/stall/events", data=end.encode(),
                                                      headers={"Content-Type": "application/x-ndjson"})).read()
        fast.join(60)
        # the stuck viewer is still connected, its queue overflowed (oldest batches dropped), nothing waited on it
        lagging = [c for c in app.state.hub._runs["stall"] if c.next_seq <= 41 * 500]
        assert len(lagging) == 1 and lagging[0].dropped_batches > 0
        stuck.close()
    assert fast.error is None and not fast.is_alive()
    assert [e["seq"] for e in fast.events] == list(range(1, 41 * 500 + 2))
    assert ingest_s < 30


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(db, port, *extra):
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "rtxviz.cli", "serve", "--port", str(port), "--db", db, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    line = proc.stdout.readline()
    assert "serving on" in line, line
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/api/health", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not answer")


def test_server_killed_mid_run_the_loop_finishes_and_drops_are_counted(tmp_path):
    db = str(tmp_path / "killed.db")
    port = _free_port()
    proc, url = _start_server(db, port)
    killer = threading.Timer(0.6, lambda: os.kill(proc.pid, signal.SIGKILL))
    try:
        t0 = time.monotonic()
        with events.watch(url, run_name="doomed", run_id="doomed", flush_interval=0.01,
                          close_timeout=1.0) as run:
            killer.start()
            train(run, 60, delay=0.02)  # about 1.5 s of training; the server dies 0.6 s in
        elapsed = time.monotonic() - t0
    finally:
        killer.cancel()
        proc.kill()
        proc.wait()
    st = run.stats()
    assert st["sent"] > 0 and st["dropped"] > 0 and st["failed_batches"] >= 1
    assert elapsed < 15
    proc, url = _start_server(db, port)  # what was acknowledged before the kill is still there
    try:
        with urllib.request.urlopen(url + "/api/runs/doomed") as r:
            assert json.loads(r.read())["n_events"] >= st["sent"]
    finally:
        proc.terminate()
        proc.wait(10)


def _niceness(pid):
    # field 19 of /proc/PID/stat, counted after the parenthesised command name (which may hold spaces)
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads niceness from /proc (Linux)")
@pytest.mark.parametrize("extra, increment", [((), 10), (("--nice", "3"), 3), (("--nice", "0"), 0)])
def test_serve_lowers_its_own_priority(tmp_path, extra, increment):
    proc, _ = _start_server(str(tmp_path / "nice.db"), _free_port(), *extra)
    try:
        assert _niceness(proc.pid) == min(19, os.nice(0) + increment)
    finally:
        proc.terminate()
        proc.wait(10)


def test_serve_refuses_a_negative_nice(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rtxviz.cli", "serve", "--nice", "-5", "--db", str(tmp_path / "n.db")],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert out.returncode == 2 and "--nice must be >= 0" in out.stderr
