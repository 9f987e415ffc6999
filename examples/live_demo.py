"""The live demo: a small MLP learns the shipped 8x8 digits while the viewer draws its graph.

    python examples/live_demo.py --serve          # start a viewer server, print its URL, train, keep serving
    python examples/live_demo.py --url http://127.0.0.1:8000   # stream to a server you already run

What streams: every sampled step's forward graph (module groups, parameters, ops), the gradients flowing back,
the checkpointed hidden blocks (shaded segments and their recomputation during backward), the optimizer step,
and each epoch's evaluation, which runs through the graph cache (a miss, then hits). Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: BLAS threads only add contention

import numpy as np

import rtxviz
from rtxviz import CheckpointStrategy, Tensor, nn, optim
from rtxviz.data import DataLoader, TensorDataset, load_digits
from rtxviz.store import default_db_path


class DigitsMLP(nn.Module):
    """input -> 3 hidden blocks (Linear + ReLU), checkpointed with SQRT_N -> classifier."""

    def __init__(self, hidden: int = 32, blocks: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(64, hidden), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU()) for _ in range(blocks)])
        self.head = nn.Linear(hidden, 10)
        self.checkpointing = rtxviz.CheckpointManager(CheckpointStrategy.SQRT_N)

    def forward(self, x: Tensor) -> rtxviz.Variable:
        h = self.stem(x)
        if self.training:
            h = self.checkpointing.checkpoint_sequential(list(self.blocks), h)
        else:
            for block in self.blocks:
                h = block(h)
        return self.head(h)


def start_server(port: int, db: str) -> subprocess.Popen:
    """`rtxviz serve` in a child process; returns once it answers."""
    cmd = [sys.executable, "-m", "rtxviz.cli", "serve", "--port", str(port), "--db", db]
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"live_demo: the server exited (code {proc.returncode}): see its message above "
                             f"(port {port} taken? then `make demo PORT=8001` or --port 8001)")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("live_demo: the server did not answer within 30 s")


def train(url: str, epochs: int, sample_every: int, delay: float, seed: int) -> float:
    rtxviz.manual_seed(seed)
    data = load_digits(test_fraction=0.2, seed=seed)
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size=64, shuffle=True, seed=seed)
    model = DigitsMLP()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    rtxviz.init_graph_cache(8)

    def evaluate(x: Tensor) -> Tensor:
        return model(x)

    accuracy = 0.0
    with rtxviz.watch(url, run_name="digits live demo", sample_every=sample_every) as run:
        step = 0
        for epoch in range(1, epochs + 1):
            losses = []
            for xb, yb in loader:
                with run.step(step):
                    optimizer.zero_grad()
                    loss = loss_fn(model(xb), yb)
                    loss.backward()
                    optimizer.step()
                losses.append(loss.item())
                step += 1
                if delay:
                    time.sleep(delay)
            model.eval()
            with rtxviz.no_grad():
                logits = rtxviz.run_cached(evaluate, data.x_test, params=list(model.parameters()))
            model.train()
            accuracy = float((logits.numpy().argmax(axis=1) == data.y_test.numpy()).mean())
            stats = rtxviz.graph_cache_stats()
            print(f"epoch {epoch:2d}  loss {np.mean(losses):.4f}  test accuracy {accuracy:.3f}  "
                  f"(graph cache: {stats['hits']} hits, {stats['misses']} misses)", flush=True)
    sent = run.stats()  # after the `with`: the sender has flushed and the run is closed
    print(f"streamed {sent['sent']} events ({sent['dropped']} dropped)")
    return accuracy


def _stop(*_: object) -> None:
    """`kill` (SIGTERM) stops the demo as Ctrl-C does, so the server it started goes down with it."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help="start a viewer server first (and keep it running)")
    ap.add_argument("--url", default=os.environ.get("RTXVIZ_SERVER", ""), help="stream to this server")
    ap.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000)")
    # the database every rtxviz command reads by default, so `rtxviz render latest` draws what the demo showed
    ap.add_argument("--db", default=default_db_path(), help="runs database for --serve (default $RTXVIZ_DB or "
                                                            "~/.rtxviz/runs.db, what rtxviz render/export read)")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--sample-every", type=int, default=5, help="stream every k-th training step")
    ap.add_argument("--delay", type=float, default=0.03, help="seconds between steps, to watch it live")
    ap.add_argument("--exit", action="store_true", help="with --serve: stop the server when training ends")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    server = None
    signal.signal(signal.SIGTERM, _stop)
    url = args.url
    if args.serve:
        Path(args.db).parent.mkdir(parents=True, exist_ok=True)
        server = start_server(args.port, args.db)
        url = f"http://127.0.0.1:{args.port}"
    if not url:
        ap.error("give --serve, or --url of a running `rtxviz serve` (or set RTXVIZ_SERVER)")
    print(f"\n  rtxviz viewer: open {url}/ in your browser\n", flush=True)
    try:
        accuracy = train(url, args.epochs, args.sample_every, args.delay, args.seed)
        print(f"test accuracy: {accuracy:.3f}")
        if server is not None:
            print(f"\n  draw the last step: .venv/bin/rtxviz render latest -o step.svg --db {args.db}", flush=True)
        if server is not None and not args.exit:
            print(f"\n  training done; the run stays at {url}/  (Ctrl-C stops the server)", flush=True)
            server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
