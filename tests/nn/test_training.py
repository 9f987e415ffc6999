"""Real training on the shipped digits: small models reach a known accuracy; the spec's best practices
(zero_grad / forward / backward / step, no_grad inference, detach for a teacher's targets) hold."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, nn, no_grad, optim
from rtxviz.data import DataLoader, TensorDataset, load_digits

ROOT = Path(__file__).resolve().parents[2]


def _accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    model.eval()
    with no_grad():
        pred = model(x).numpy().argmax(axis=1)
    model.train()
    return float((pred == y.numpy()).mean())


def _fit(model: nn.Module, x: Tensor, y: Tensor, optimizer: optim.Optimizer, epochs: int, batch: int) -> list:
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True, seed=0)
    history = []
    for _ in range(epochs):
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item() * xb.shape[0]
        history.append(total / x.shape[0])
    return history


def test_small_mlp_learns_digits(device: str) -> None:
    rtxviz.manual_seed(0)
    d = load_digits(seed=0, device=device)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    history = _fit(model, d.x_train, d.y_train, opt, epochs=6, batch=32)
    assert history[-1] < 0.25 * history[0]
    assert _accuracy(model, d.x_test, d.y_test) >= 0.93


def test_small_cnn_learns_digits() -> None:
    rtxviz.manual_seed(0)
    d = load_digits(seed=0)
    n = 1000
    x = d.x_train.reshape(-1, 1, 8, 8)
    x_small, y_small = Tensor(x.numpy()[:n]), Tensor(d.y_train.numpy()[:n])
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(8 * 4 * 4, 10))
    _fit(model, x_small, y_small, optim.Adam(model.parameters(), lr=1e-2), epochs=5, batch=32)
    assert _accuracy(model, d.x_test.reshape(-1, 1, 8, 8), d.y_test) >= 0.9


def test_distillation_with_detached_teacher_targets() -> None:
    """Best practice 3: targets from a teacher are detached, so only the student gets gradients."""
    rtxviz.manual_seed(1)
    teacher = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).name_as("teacher")
    student = nn.Sequential(nn.Linear(4, 2)).name_as("student")
    opt = optim.Adam(student.parameters(), lr=0.05)
    x = Tensor.randn([64, 4])
    losses = []
    for _ in range(150):
        opt.zero_grad()
        target = teacher(x).detach()
        loss = nn.functional.mse_loss(student(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(p.grad is None for p in teacher.parameters())
    assert losses[-1] < 0.2 * losses[0]
    # the best a linear student can do is the least-squares fit of the teacher's outputs
    with no_grad():
        t = teacher(x).numpy()
    xa = np.hstack([x.numpy(), np.ones((64, 1), np.float32)])
    lstsq = np.linalg.lstsq(xa, t, rcond=None)[0]
    best = float(((xa @ lstsq - t) ** 2).mean())
    assert losses[-1] < best + 0.02


def test_regression_with_lr_schedule_and_clipping_reaches_closed_form() -> None:
    """A linear model fitted by SGD + StepLR + clip_grad_norm_ converges to the least-squares weights."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((128, 3))
    ys = xs @ np.array([[1.5], [-2.0], [0.5]]) + 0.3 + 0.01 * rng.standard_normal((128, 1))
    x, y = Tensor(xs, dtype="float64"), Tensor(ys, dtype="float64")
    model = nn.Linear(3, 1).double()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    sched = optim.StepLR(opt, step_size=100, gamma=0.5)
    for _ in range(300):
        opt.zero_grad()
        nn.MSELoss()(model(x), y).backward()
        nn.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()
    xa = np.hstack([xs, np.ones((128, 1))])
    w = np.linalg.lstsq(xa, ys, rcond=None)[0].ravel()
    np.testing.assert_allclose(model.weight.numpy().ravel(), w[:3], atol=1e-6)
    np.testing.assert_allclose(model.bias.numpy(), w[3:], atol=1e-6)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**3)


def test_mlp_example_prints_its_accuracy_last() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "train_digits.py"), "--epochs", "8"],
                         capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    lines = out.strip().splitlines()
    assert re.fullmatch(r"test accuracy: 0\.\d{3}", lines[-1])
    assert float(lines[-1].split(": ")[1]) >= 0.93
    assert sum(1 for ln in lines if re.search(r"epoch +\d+/8 \[#+\] \d+/\d+ loss \d", ln)) == 8
