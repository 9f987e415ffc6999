"""An LSTM learns to continue sine waves: at every step it sees the wave so far and predicts the next value.

    python examples/train_lstm.py                     # train, print the loss as it falls
    python examples/train_lstm.py --watch http://127.0.0.1:8000   # and stream the graph to `rtxviz serve`

Each sequence is sin(ω·t + φ) with its own frequency ω and phase φ (40 steps); the model is nn.LSTM (one layer,
batch_first) and a Linear head on every output, trained with Adam on the mean squared error of the next value.
Repeating the input as the prediction scores 1 - E[cos ω] ≈ 0.048 here; the LSTM gets far below, by inferring
ω and φ from the history. At the end it continues a wave it has never seen, feeding its own predictions back
(closed loop).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: BLAS threads only add contention

import numpy as np

import rtxviz
from rtxviz import Tensor, nn, optim

SEQ_LEN = 40


def sine_batch(rng: np.random.Generator, batch: int, length: int = SEQ_LEN) -> tuple[np.ndarray, np.ndarray]:
    """(inputs [batch, length, 1], next values [batch, length, 1]) of random sine waves."""
    omega = rng.uniform(0.15, 0.45, (batch, 1))
    phase = rng.uniform(0, 2 * np.pi, (batch, 1))
    t = np.arange(length + 1)[None, :]
    wave = np.sin(omega * t + phase).astype(np.float32)
    return wave[:, :-1, None], wave[:, 1:, None]


class SineLSTM(nn.Module):
    """nn.LSTM(1, hidden, batch_first=True), then Linear(hidden, 1) on every step's output."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: Any, state: Any = None) -> tuple[Any, Any]:
        out, state = self.lstm(x, state)
        return self.head(out), state


def train(steps: int = 300, seed: int = 0, batch: int = 32, hidden: int = 32, lr: float = 1e-2,
          watch: str | None = None, transport: Any = None, log_every: int = 50) -> tuple[SineLSTM, list[float]]:
    """Train and return (model, the loss of every step). With `watch` (a server URL) or `transport`, every 10th
    step streams to the live view."""
    rtxviz.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = SineLSTM(hidden)
    opt = optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    losses: list[float] = []
    streaming = watch is not None or transport is not None
    run_cm = rtxviz.watch(watch, run_name="lstm sine", sample_every=10, transport=transport) if streaming \
        else contextlib.nullcontext()
    with run_cm as run:
        for step in range(steps):
            x, y = sine_batch(rng, batch)
            with run.step(step) if run is not None else contextlib.nullcontext():
                opt.zero_grad()
                pred, _ = model(Tensor(x))
                loss = loss_fn(pred, Tensor(y))
                loss.backward()
                nn.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            losses.append(loss.item())
            if log_every and (step % log_every == 0 or step == steps - 1):
                print(f"step {step:4d}  loss {losses[-1]:.5f}", flush=True)
    return model, losses


def continue_wave(model: SineLSTM, omega: float, phase: float, seen: int = 30, ahead: int = 20) -> np.ndarray:
    """Feed `seen` true values, then `ahead` of the model's own predictions: the predicted continuation."""
    t = np.arange(seen)
    x = np.sin(omega * t + phase).astype(np.float32)[None, :, None]
    preds = []
    with rtxviz.no_grad():
        out, state = model(Tensor(x))
        value = out.numpy()[:, -1:, :]
        for _ in range(ahead):
            preds.append(float(value[0, 0, 0]))
            out, state = model(Tensor(value), state)
            value = out.numpy()
    return np.array(preds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--watch", default=None, help="stream to this rtxviz server (e.g. http://127.0.0.1:8000)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    model, losses = train(args.steps, args.seed, watch=args.watch)
    print(f"loss: first {losses[0]:.4f}, mean of the last 20 steps {np.mean(losses[-20:]):.5f} "
          f"({time.perf_counter() - start:.1f} s)")
    omega, phase = 0.3, 1.0
    preds = continue_wave(model, omega, phase)
    truth = np.sin(omega * np.arange(30, 50) + phase)
    print("closed-loop continuation, 20 steps ahead:")
    print("  model:", " ".join(f"{v:+.2f}" for v in preds))
    print("  truth:", " ".join(f"{v:+.2f}" for v in truth))
    print(f"  mean absolute error {np.abs(preds - truth).mean():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
