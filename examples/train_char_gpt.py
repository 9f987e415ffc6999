"""A small character-level GPT learns Shakespeare's sonnets (examples/data/sonnets.txt), then writes some.

    python examples/train_char_gpt.py                  # train a few hundred steps, print the loss and a sample
    python examples/train_char_gpt.py --watch http://127.0.0.1:8000   # and stream the graph to `rtxviz serve`

The model: token and learned position embeddings, two pre-norm nn.TransformerEncoderLayer blocks (causal mask:
each position attends to itself and earlier ones), a final LayerNorm and a Linear head over the characters;
Adam on the cross-entropy of the next character. A uniform guess costs log(vocabulary) ≈ 4 nats per character.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: BLAS threads only add contention

import numpy as np

import rtxviz
from rtxviz import Tensor, nn, optim
from rtxviz.nn import functional as F

TEXT = Path(__file__).resolve().parent / "data" / "sonnets.txt"


class CharData:
    """The text as int64 ids, its vocabulary, and random [batch, block] windows with their next characters."""

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.ids = np.array([self.index[c] for c in text], dtype=np.int64)

    def batch(self, rng: np.random.Generator, batch: int, block: int) -> tuple[np.ndarray, np.ndarray]:
        starts = rng.integers(0, len(self.ids) - block - 1, batch)
        x = np.stack([self.ids[s:s + block] for s in starts])
        y = np.stack([self.ids[s + 1:s + block + 1] for s in starts])
        return x, y

    def decode(self, ids: Any) -> str:
        return "".join(self.chars[int(i)] for i in ids)


class CharGPT(nn.Module):
    """Embeddings -> `layers` pre-norm TransformerEncoderLayers with a causal mask -> LayerNorm -> Linear."""

    def __init__(self, vocab: int, block: int = 32, d_model: int = 64, nhead: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.block = block
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(Tensor(np.random.default_rng(0).normal(0, 0.02, (block, d_model))
                                       .astype(np.float32)))
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.masks: dict[int, Tensor] = {}

    def forward(self, ids: Any) -> Any:
        length = ids.shape[1]
        if length not in self.masks:
            self.masks[length] = nn.Transformer.generate_square_subsequent_mask(length)
        mask = self.masks[length]
        h = self.tok(ids) + self.pos[:length]
        for layer in self.blocks:
            h = layer(h, src_mask=mask, is_causal=True)
        return self.head(self.norm(h))


def train(steps: int = 300, seed: int = 0, batch: int = 16, block: int = 32, lr: float = 3e-3,
          watch: str | None = None, transport: Any = None,
          log_every: int = 50) -> tuple[CharGPT, CharData, list[float]]:
    """Train and return (model, data, the loss of every step). With `watch` (a server URL) or `transport`, every
    10th step streams to the live view."""
    rtxviz.manual_seed(seed)
    rng = np.random.default_rng(seed)
    data = CharData(TEXT.read_text())
    model = CharGPT(len(data.chars), block)
    opt = optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    streaming = watch is not None or transport is not None
    run_cm = rtxviz.watch(watch, run_name="char gpt", sample_every=10, transport=transport) if streaming \
        else contextlib.nullcontext()
    with run_cm as run:
        for step in range(steps):
            x, y = data.batch(rng, batch, block)
            with run.step(step) if run is not None else contextlib.nullcontext():
                opt.zero_grad()
                logits = model(Tensor(x))
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Tensor(y.reshape(-1)))
                loss.backward()
                nn.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            losses.append(loss.item())
            if log_every and (step % log_every == 0 or step == steps - 1):
                print(f"step {step:4d}  loss {losses[-1]:.4f}", flush=True)
    return model, data, losses


def sample(model: CharGPT, data: CharData, prompt: str = "Shall I ", length: int = 200, temperature: float = 0.8,
           seed: int = 0) -> str:
    """Continue `prompt` one character at a time, drawing from softmax(logits / temperature)."""
    rng = np.random.default_rng(seed)
    ids = [data.index[c] for c in prompt]
    model.eval()
    with rtxviz.no_grad():
        for _ in range(length):
            window = np.array([ids[-model.block:]], dtype=np.int64)
            logits = model(Tensor(window)).numpy()[0, -1].astype(np.float64) / temperature
            p = np.exp(logits - logits.max())
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    model.train()
    return data.decode(ids)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--watch", default=None, help="stream to this rtxviz server (e.g. http://127.0.0.1:8000)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    model, data, losses = train(args.steps, args.seed, watch=args.watch)
    print(f"loss: first {losses[0]:.3f} (log {len(data.chars)} = {np.log(len(data.chars)):.3f}), mean of the last "
          f"20 steps {np.mean(losses[-20:]):.3f} ({time.perf_counter() - start:.1f} s)")
    print("sample:\n" + sample(model, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
