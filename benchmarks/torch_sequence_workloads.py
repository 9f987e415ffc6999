"""PyTorch's side of the sequence workloads (lstm_train, mha_train, mha_weights_train), served to
bench_sequence.py through torch_workloads.py's serve loop. The definitions are in bench_sequence.py's docstring.

Runs in a Python that has torch: `python torch_sequence_workloads.py --serve`.
"""

from __future__ import annotations

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_workloads import _grads_none, serve, workload


@workload("lstm_train")
def lstm_train() -> tuple:
    torch.manual_seed(0)
    lstm = nn.LSTM(32, 128, batch_first=True)
    head = nn.Linear(128, 32)
    opt = torch.optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.01)
    x = torch.randn(32, 64, 32)
    y = torch.randn(32, 64, 32)

    def step() -> None:
        opt.zero_grad()
        out, _ = lstm(x)
        F.mse_loss(head(out), y).backward()
        opt.step()

    return step, None


def _mha(need_weights: bool) -> tuple:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(128, 8, batch_first=True)
    x = torch.randn(16, 64, 128)
    mask = nn.Transformer.generate_square_subsequent_mask(64)

    def step() -> None:
        out, _ = mha(x, x, x, attn_mask=mask, need_weights=need_weights)
        out.pow(2).mean().backward()

    return step, _grads_none(list(mha.parameters()))


@workload("mha_train")
def mha_train() -> tuple:
    return _mha(False)


@workload("mha_weights_train")
def mha_weights_train() -> tuple:
    return _mha(True)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
