"""Lesson 9: a 64-32-10 ReLU MLP on the digits, 20 Adam steps of 64 images, every step recorded."""

from __future__ import annotations

from typing import Any

from .. import manual_seed, nn, optim
from ..data import load_digits


def body(run: Any) -> None:
    manual_seed(0)
    data = load_digits(test_fraction=0.2, seed=0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(20):
        lo = (step * 64) % (data.x_train.shape[0] - 64)
        xb, yb = data.x_train[lo:lo + 64], data.y_train[lo:lo + 64]
        with run.step(step):
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
