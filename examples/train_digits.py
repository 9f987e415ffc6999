"""Train an MLP on the shipped 8x8 digits and report the held-out accuracy.

    python examples/train_digits.py [--epochs 30] [--device cpu|cuda] [--seed 0]

The loop is the spec's best practice: zero_grad, forward, loss, backward, step; evaluation under no_grad
with the model in eval mode. The last line printed is `test accuracy: 0.NNN`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

# Tiny matrices gain nothing from BLAS threads, and on a busy machine OpenBLAS's spinning threads make each
# 64x128 product up to 1000x slower; one thread unless the caller says otherwise (set before numpy loads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import rtxviz
from rtxviz import Tensor, nn, no_grad, optim
from rtxviz.data import DataLoader, TensorDataset, load_digits


def bar(done: int, total: int, width: int = 24) -> str:
    filled = width * done // total
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


def progress(epoch: int, epochs: int, done: int, total: int, loss: float) -> None:
    """Redraw the epoch's progress bar in place; only on a terminal (a log gets the finished epoch lines)."""
    if sys.stdout.isatty():
        sys.stdout.write(f"\repoch {epoch:3d}/{epochs} {bar(done, total)} loss {loss:.4f}")
        sys.stdout.flush()


def accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    model.eval()
    with no_grad():
        pred = model(x).numpy().argmax(axis=1)
    model.train()
    return float((pred == y.numpy()).mean())


def fit(model: nn.Module, loss_fn: nn.Module, optimizer: optim.Optimizer, scheduler: Any, loader: DataLoader,
        epochs: int, train: tuple[Tensor, Tensor], test: tuple[Tensor, Tensor], start: float) -> float:
    """The training loop both digits examples share: zero_grad, forward, loss, backward, step per batch, the
    scheduler per epoch, a progress line per epoch; prints and returns the held-out accuracy."""
    for epoch in range(1, epochs + 1):
        losses = []
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            progress(epoch, epochs, len(losses), len(loader), float(np.mean(losses)))
        scheduler.step()
        print(f"\repoch {epoch:3d}/{epochs} {bar(len(losses), len(loader))} loss {np.mean(losses):.4f} "
              f"train acc {accuracy(model, *train):.3f}", flush=True)

    acc = accuracy(model, *test)
    print(f"time: {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {acc:.3f}")
    return acc


def main(argv: list[str] | None = None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)

    start = time.perf_counter()
    rtxviz.manual_seed(args.seed)
    data = load_digits(test_fraction=0.2, seed=args.seed, device=args.device)
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size=args.batch_size, shuffle=True,
                        seed=args.seed)
    model = nn.Sequential(
        nn.Linear(64, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, 10),
    ).to(args.device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    scheduler = optim.CosineAnnealingLR(optimizer, T_max=args.epochs)
    print(f"digits: {data.x_train.shape[0]} train / {data.x_test.shape[0]} test rows; model {model.num_parameters()} "
          f"parameters on {args.device}")

    return fit(model, loss_fn, optimizer, scheduler, loader, args.epochs, (data.x_train, data.y_train),
               (data.x_test, data.y_test), start)


if __name__ == "__main__":
    main()
