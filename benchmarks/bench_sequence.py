"""Issue 14's sequence workloads beside PyTorch, alternating rounds (PyTorch's side in torch_sequence_workloads.py):

- lstm_train: one training step (zero_grad, forward, MSE loss, backward, SGD step) of nn.LSTM(32, 128,
  batch_first=True), one layer, then nn.Linear(128, 32) on every output; input [32, 64, 32] (batch 32, sequence 64,
  32 features), target [32, 64, 32]; SGD lr 0.01; float32.
- mha_train: nn.MultiheadAttention(128, 8, batch_first=True) self-attention, forward and backward of
  out.pow(2).mean(); input [16, 64, 128] (batch 16, sequence 64, embed 128, 8 heads), the causal float mask
  (generate_square_subsequent_mask(64)), need_weights=False (as the Transformer layers call it); float32.
- mha_weights_train: the same with need_weights=True (PyTorch's default: the attention weights are computed and
  averaged over heads, so both engines take the matmul + softmax path).

    python benchmarks/bench_sequence.py [--rounds 3] [--min-time 0.5] [--only lstm_train] [--threads 2]
                                        [--torch-python /tmp/torchvenv/bin/python] [--json out.json]

--threads N sets the BLAS/OpenMP threads of both engines; without it none is set (each engine's default, what a
user gets). Targets (ours / PyTorch): lstm_train <= 2.0,
mha_train <= 2.0.
"""

from __future__ import annotations

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


def lstm_train() -> tuple:
    rtxviz.manual_seed(0)
    rng = np.random.default_rng(0)
    lstm = nn.LSTM(32, 128, batch_first=True)
    head = nn.Linear(128, 32)
    opt = optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.01)
    x = Tensor(rng.standard_normal((32, 64, 32)).astype(np.float32))
    y = Tensor(rng.standard_normal((32, 64, 32)).astype(np.float32))
    loss_fn = nn.MSELoss()

    def step() -> None:
        opt.zero_grad()
        out, _ = lstm(x)
        loss_fn(head(out), y).backward()
        opt.step()

    return step, None


def _mha(need_weights: bool) -> tuple:
    rtxviz.manual_seed(0)
    rng = np.random.default_rng(1)
    mha = nn.MultiheadAttention(128, 8, batch_first=True)
    x = Tensor(rng.standard_normal((16, 64, 128)).astype(np.float32))
    mask = nn.Transformer.generate_square_subsequent_mask(64)
    params: list[Variable] = list(mha.parameters())

    def setup() -> None:
        for p in params:
            p.grad = None

    def step() -> None:
        out, _ = mha(x, x, x, attn_mask=mask, need_weights=need_weights)
        out.pow(2).mean().backward()

    return step, setup


def mha_train() -> tuple:
    return _mha(False)


def mha_weights_train() -> tuple:
    return _mha(True)


WORKLOADS = {
    "lstm_train": {"rtxviz": lstm_train, "torch": "lstm_train"},
    "mha_train": {"rtxviz": mha_train, "torch": "mha_train"},
    "mha_weights_train": {"rtxviz": mha_weights_train, "torch": "mha_weights_train"},
}
TARGETS = {"lstm_train": 2.0, "mha_train": 2.0}


class _SequenceTorchWorker(harness.TorchWorker):
    """harness.TorchWorker, serving torch_sequence_workloads.py (which adds these workloads to the registry)."""

    script = "torch_sequence_workloads.py"


def main(argv: list[str] | None = None) -> dict:
    harness.TorchWorker = _SequenceTorchWorker  # the harness starts its PyTorch side through this name
    results = harness.compare(WORKLOADS, argv)
    for name, row in results.items():
        if "ratio" in row and name in TARGETS:
            verdict = "ok" if row["ratio"] <= TARGETS[name] else "over target"
            print(f"# {name}: ratio {row['ratio']:.2f} (target <= {TARGETS[name]}) {verdict}")
    return results


if __name__ == "__main__":
    main()
