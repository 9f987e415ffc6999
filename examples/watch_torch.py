"""Watch an ordinary PyTorch training loop on the live page: torchvision's resnet18 (random weights, nothing
downloaded) learns the shipped 8x8 digits, scaled up to 32x32, with its third stage checkpointed.

    pip install 'rtxviz[torch]'
    python examples/watch_torch.py --serve        # start a viewer server, print its URL, train
    python examples/watch_torch.py --url http://127.0.0.1:8000 [--steps 50] [--sample-every 5]

The loop below is plain PyTorch: the only rtxviz lines are the `with rtxviz.torch.watch(...)` around it and the
SVG at the end. Steps are inferred from `optimizer.step()`. The page shows resnet18's module groups, gradient
norms coloured as backward runs, the checkpointed `layer3` recomputed during backward, and each parameter's
update ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

import rtxviz
import rtxviz.torch
from rtxviz.data import read_digits_csv
from rtxviz.store import default_db_path


def resnet18() -> torch.nn.Module:
    # torchvision 0.28's compiled ops do not load beside the CPU torch 2.13 wheel ("operator torchvision::nms
    # does not exist"); the models are pure Python and need none of them: skip the module that registers them
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision

    return torchvision.models.resnet18(num_classes=10)


class CheckpointedResNet(torch.nn.Module):
    """resnet18 whose layer3 runs under torch.utils.checkpoint (its activations recomputed in backward)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = resnet18()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.net
        x = n.maxpool(n.relu(n.bn1(n.conv1(x))))
        x = n.layer2(n.layer1(x))
        x = checkpoint(n.layer3, x, use_reentrant=True)
        x = n.avgpool(n.layer4(x)).flatten(1)
        return n.fc(x)


DIGITS = read_digits_csv()  # 1797 8x8 images as rows of 64 values 0..16, and their labels


def digits(batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = DIGITS
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(y), (batch,), generator=g)
    images = torch.as_tensor(x[idx.numpy()], dtype=torch.float32).reshape(batch, 1, 8, 8) / 16.0
    images = torch.nn.functional.interpolate(images, size=32).expand(batch, 3, 32, 32).contiguous()
    return images, torch.as_tensor(y[idx.numpy()], dtype=torch.long)


def start_server(port: int, db: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "rtxviz.cli", "serve", "--port", str(port), "--db", db])
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"watch_torch: the server exited; is port {port} in use?") from None
            time.sleep(0.1)
    raise SystemExit("watch_torch: the server did not answer within 30 s")


def train(url: str | None, steps: int, sample_every: int, batch: int, seed: int,
          transport: Any = None, svg: str | None = "resnet18_step.svg") -> list[float]:
    """Train, streaming to the server at `url` (or to `transport`, as the tests do), and draw the last step's
    graph to `svg` (None: no drawing); returns each step's loss."""
    torch.manual_seed(seed)
    model = CheckpointedResNet()
    # Adam at its default lr: SGD at lr 0.05 with momentum 0.9 diverged on these batches of 16 (the loss went
    # from 2.9 to 7-11 in 30 steps); Adam goes from ~1.7 to ~0.6 (tests/examples/test_watch_torch.py)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    loss = torch.tensor(0.0)
    losses: list[float] = []
    with rtxviz.torch.watch(model, url, run_name="resnet18-digits", sample_every=sample_every,
                            transport=transport) as run:
        for i in range(steps):
            x, y = digits(batch, seed + i)
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if i % 10 == 0:
                print(f"step {i:3d}  loss {loss.item():.3f}")
    print(f"run {run.id}: {run.stats()['sent']} events sent, {run.stats()['dropped']} dropped")
    if svg is not None:
        try:
            print("the last step's graph:", rtxviz.render(loss, svg, max_nodes=120))
        except rtxviz.render.GraphvizNotFound:
            print("(graphviz's dot is not installed: no SVG)")
    return losses


def build_parser() -> argparse.ArgumentParser:
    """The command line; --db defaults to the database every rtxviz command reads (`rtxviz render latest`)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", action="store_true", help="start a viewer server first (stopped at the end)")
    ap.add_argument("--url", default=os.environ.get("RTXVIZ_SERVER", ""), help="stream to this server")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--db", default=default_db_path(), help="runs database for --serve (default $RTXVIZ_DB or "
                                                            "~/.rtxviz/runs.db, what rtxviz render/export read)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--sample-every", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    server = None
    url = args.url
    if args.serve:
        Path(args.db).parent.mkdir(parents=True, exist_ok=True)
        server = start_server(args.port, args.db)
        url = f"http://127.0.0.1:{args.port}"
        print(f"viewer: {url}")
    if not url:
        raise SystemExit("watch_torch: pass --serve or --url (or set RTXVIZ_SERVER)")
    try:
        train(url, args.steps, args.sample_every, args.batch, args.seed)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    if server is not None:  # the server is gone, the run is in the database: open it again with rtxviz serve
        print(f"the run is in {args.db}: rtxviz serve --db {args.db} shows it again, "
              f"rtxviz render latest --db {args.db} draws its last step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
