"""Train a small BatchNorm ResNet on the shipped 8x8 digits (rows reshaped to [N, 1, 8, 8]).

    python examples/train_digits_resnet.py [--epochs 6] [--watch http://127.0.0.1:8000] [--device cpu|cuda]

stem: conv 1→16 3x3 (no bias) + BatchNorm2d + ReLU; a basic block at 16 channels (conv-BN-ReLU-conv-BN plus the
input, ReLU); a basic block 16→32 with stride 2 (its shortcut a 1x1 conv + BatchNorm, as ResNet's); global
average pooling (AdaptiveAvgPool2d(1)), flatten, dropout, linear 32→10. AdamW with a one-cycle-like cosine
schedule. Evaluation switches the model to eval mode, so BatchNorm uses its running statistics.

With --watch URL (a running `rtxviz serve`), every --sample-every-th training step streams to the live view:
the module groups (model.stem, model.block1.bn1, ...), the BatchNorm and convolution ops, the gradients and the
optimizer step. The last line printed is `test accuracy: 0.NNN`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see train_digits.py: tiny products, busy machines

import numpy as np

import rtxviz
from rtxviz import Tensor, nn, optim
from rtxviz.data import DataLoader, TensorDataset, load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_digits import accuracy, bar, progress


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the input (or its 1x1-conv+BN projection when the shape changes), ReLU."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        if stride != 1 or cin != cout:
            self.shortcut: nn.Module = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                     nn.BatchNorm2d(cout))
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        h = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class DigitsResNet(nn.Module):
    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.block1 = BasicBlock(width, width)
        self.block2 = BasicBlock(width, 2 * width, stride=2)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1),
                                  nn.Linear(2 * width, classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.block2(self.block1(self.stem(x))))


def images(x: Tensor) -> Tensor:
    return x.reshape(x.shape[0], 1, 8, 8)


def train(args: argparse.Namespace, run: Any = None) -> float:
    start = time.perf_counter()
    rtxviz.manual_seed(args.seed)
    data = load_digits(test_fraction=0.2, seed=args.seed, device=args.device)
    x_train, x_test = images(data.x_train), images(data.x_test)
    loader = DataLoader(TensorDataset(x_train, data.y_train), batch_size=args.batch_size, shuffle=True,
                        seed=args.seed)
    model = DigitsResNet(args.width).to(args.device)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    scheduler = optim.CosineAnnealingLR(optimizer, T_max=args.epochs)
    print(f"digits: {x_train.shape[0]} train / {x_test.shape[0]} test images 1x8x8; model "
          f"{model.num_parameters()} parameters on {args.device}")
    step = 0
    for epoch in range(1, args.epochs + 1):
        losses: list[float] = []
        for xb, yb in loader:
            if args.max_steps is not None and step >= args.max_steps:
                break
            with run.step(step) if run is not None else contextlib.nullcontext():
                optimizer.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()
            losses.append(loss.item())
            step += 1
            progress(epoch, args.epochs, len(losses), len(loader), float(np.mean(losses)))
        scheduler.step()
        print(f"\repoch {epoch:3d}/{args.epochs} {bar(len(losses), len(loader))} loss {np.mean(losses):.4f} "
              f"train acc {accuracy(model, x_train, data.y_train):.3f}", flush=True)
    acc = accuracy(model, x_test, data.y_test)
    print(f"time: {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {acc:.3f}")
    return acc


def main(argv: list[str] | None = None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many training steps (a smoke run)")
    ap.add_argument("--watch", default="", metavar="URL", help="stream to the live view of `rtxviz serve` at URL")
    ap.add_argument("--sample-every", type=int, default=10, help="with --watch: stream every k-th step")
    args = ap.parse_args(argv)
    if not args.watch:
        return train(args)
    print(f"\n  rtxviz viewer: open {args.watch}/ in your browser\n", flush=True)
    with rtxviz.watch(args.watch, run_name="digits resnet", sample_every=args.sample_every) as run:
        acc = train(args, run)
    sent = run.stats()  # after the `with`: the sender has flushed and the run is closed
    print(f"streamed {sent['sent']} events ({sent['dropped']} dropped)")
    print(f"test accuracy: {acc:.3f}")
    return acc


if __name__ == "__main__":
    main()
