"""Issue 5's training workloads beside PyTorch, alternating rounds: mlp_train, conv_train, transformer_block
(definitions in benchmarks/WORKLOADS.md), and issue 14's bn_conv_train (defined below, in `bn_conv_train`).
rtxviz runs the same models through rtxviz.nn / rtxviz.optim.

    python benchmarks/bench_training.py [--rounds 3] [--min-time 0.5] [--only mlp_train] [--threads 2]
                                        [--torch-python /tmp/torchvenv/bin/python] [--json out.json]

--threads N sets the BLAS/OpenMP threads of both engines; without it none is set (each engine's default, what a
user gets; WORKLOADS.md's definitions were measured at 2). On a machine
shared with other busy processes, --threads 1 gives steadier ratios: spinning BLAS threads that lose their
core stall both engines, unevenly.

Targets (ours / PyTorch): mlp_train <= 1.3, transformer_block <= 1.5, conv_train <= 2.5, bn_conv_train <= 2.0.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402  (standard library only: numpy is not loaded yet)

if __name__ == "__main__":
    # before numpy loads: OpenBLAS reads its thread count once, at import; without --threads nothing is set
    harness.blas_threads_from_argv(sys.argv[1:])

import numpy as np  # noqa: E402

import rtxviz  # noqa: E402
from rtxviz import Tensor, Variable, nn, optim  # noqa: E402
from rtxviz.nn import functional as F  # noqa: E402


def _labels(n: int, rng: np.random.Generator) -> Tensor:
    return Tensor(rng.integers(0, 10, n))


def mlp_train() -> tuple:
    rtxviz.manual_seed(0)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = Tensor(rng.standard_normal((128, 784)).astype(np.float32))
    y = _labels(128, rng)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step, None


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x: Tensor) -> Tensor:
        h = self.pool(self.conv1(x).relu())
        h = self.pool(self.conv2(h).relu())
        return self.fc(h.reshape(h.shape[0], -1))


def conv_train() -> tuple:
    rtxviz.manual_seed(0)
    rng = np.random.default_rng(0)
    model = ConvNet()
    opt = optim.SGD(model.parameters(), lr=0.01)
    x = Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = _labels(64, rng)

    def step() -> None:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step, None


class BNConvBlock(nn.Module):
    """conv 3x3 (16→32, padding 1, no bias) → BatchNorm2d(32) (training mode: batch statistics, running
    statistics updated) → ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(32)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.conv(x)).relu()


def bn_conv_train() -> tuple:
    """bn_conv_train: one training step of BNConvBlock on x [32, 16, 16, 16] float32 (standard normal):
    SGD(lr 0.01, momentum 0.9) zero_grad, forward, loss = mean(out²), backward, step."""
    rtxviz.manual_seed(0)
    rng = np.random.default_rng(0)
    block = BNConvBlock()
    opt = optim.SGD(block.parameters(), lr=0.01, momentum=0.9)
    x = Tensor(rng.standard_normal((32, 16, 16, 16)).astype(np.float32))

    def step() -> None:
        opt.zero_grad()
        block(x).pow(2).mean().backward()
        opt.step()

    return step, None


class TransformerBlock(nn.Module):
    """Pre-LN block from primitive ops, as the workload says (weights [in, out] as in torch_bench.py)."""

    def __init__(self, d: int = 256, heads: int = 4, ff: int = 1024) -> None:
        super().__init__()
        self.d, self.h = d, heads
        rng = np.random.default_rng(0)

        def lin(i: int, o: int) -> tuple[nn.Parameter, nn.Parameter]:
            w = (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32)
            return nn.Parameter(Tensor(w)), nn.Parameter(Tensor.zeros([o]))

        self.wq, self.bq = lin(d, d)
        self.wk, self.bk = lin(d, d)
        self.wv, self.bv = lin(d, d)
        self.wo, self.bo = lin(d, d)
        self.w1, self.b1 = lin(d, ff)
        self.w2, self.b2 = lin(ff, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        b, t, d = x.shape
        h, dh = self.h, d // self.h

        def heads(v: Tensor) -> Tensor:
            return v.reshape(b, t, h, dh).transpose(1, 2)

        a = self.ln1(x)
        q, k, v = heads(a @ self.wq + self.bq), heads(a @ self.wk + self.bk), heads(a @ self.wv + self.bv)
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
        s = s.masked_fill(mask, float("-inf"))
        p = F.softmax(s, dim=-1)
        o = (p @ v).transpose(1, 2).reshape(b, t, d)
        res = x + (o @ self.wo + self.bo)
        f = (self.ln2(res) @ self.w1 + self.b1).gelu()
        return res + (f @ self.w2 + self.b2)


def transformer_block() -> tuple:
    block = TransformerBlock()
    rng = np.random.default_rng(1)
    x = Tensor(rng.standard_normal((8, 128, 256)).astype(np.float32))
    mask = Tensor(np.triu(np.ones((128, 128), dtype=bool), 1))
    params: list[Variable] = list(block.parameters())

    def setup() -> None:
        for p in params:
            p.grad = None

    return (lambda: block(x, mask).pow(2).mean().backward()), setup


WORKLOADS = {
    "mlp_train": {"rtxviz": mlp_train, "torch": "mlp_train"},
    "transformer_block": {"rtxviz": transformer_block, "torch": "transformer_block"},
    "conv_train": {"rtxviz": conv_train, "torch": "conv_train"},
    "bn_conv_train": {"rtxviz": bn_conv_train, "torch": "bn_conv_train"},
}
TARGETS = {"mlp_train": 1.3, "transformer_block": 1.5, "conv_train": 2.5, "bn_conv_train": 2.0}


class _TrainingTorchWorker(harness.TorchWorker):
    """harness.TorchWorker, serving torch_training_workloads.py (which adds these workloads to the registry)."""

    script = "torch_training_workloads.py"


def main(argv: list[str] | None = None) -> dict:
    harness.TorchWorker = _TrainingTorchWorker  # the harness starts its PyTorch side through this name
    results = harness.compare(WORKLOADS, argv)
    for name, row in results.items():
        if "ratio" in row:
            verdict = "ok" if row["ratio"] <= TARGETS[name] else "over target"
            print(f"# {name}: ratio {row['ratio']:.2f} (target <= {TARGETS[name]}) {verdict}")
    return results


if __name__ == "__main__":
    main()
