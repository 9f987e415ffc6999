"""Train a small conv net on the shipped 8x8 digits (rows reshaped to [N, 1, 8, 8]).

    python examples/train_digits_cnn.py [--epochs 15] [--device cpu|cuda] [--seed 0]

conv 1→16 3x3 pad 1, ReLU, max-pool 2 → conv 16→32 3x3 pad 1, ReLU, max-pool 2 → flatten 128 → linear 10.
The last line printed is `test accuracy: 0.NNN`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see train_digits.py: tiny products, busy machines


import rtxviz
from rtxviz import Tensor, nn, optim
from rtxviz.data import DataLoader, TensorDataset, load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_digits import fit


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.flatten(self.features(x)))


def images(x: Tensor) -> Tensor:
    return x.reshape(x.shape[0], 1, 8, 8)


def main(argv: list[str] | None = None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)

    start = time.perf_counter()
    rtxviz.manual_seed(args.seed)
    data = load_digits(test_fraction=0.2, seed=args.seed, device=args.device)
    x_train, x_test = images(data.x_train), images(data.x_test)
    loader = DataLoader(TensorDataset(x_train, data.y_train), batch_size=args.batch_size, shuffle=True,
                        seed=args.seed)
    model = DigitsCNN().to(args.device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    scheduler = optim.CosineAnnealingLR(optimizer, T_max=args.epochs)
    print(f"digits: {x_train.shape[0]} train / {x_test.shape[0]} test images 1x8x8; model "
          f"{model.num_parameters()} parameters on {args.device}")

    return fit(model, loss_fn, optimizer, scheduler, loader, args.epochs, (x_train, data.y_train),
               (x_test, data.y_test), start)


if __name__ == "__main__":
    main()
