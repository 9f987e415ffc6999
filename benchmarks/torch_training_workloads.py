"""PyTorch's side of the training workloads (mlp_train, conv_train, transformer_block, as benchmarks/WORKLOADS.md
defines them, and bn_conv_train, as bench_training.py defines it), served to bench_training.py
through torch_workloads.py's serve loop.

Runs in a Python that has torch: `python torch_training_workloads.py --serve`.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_workloads import _grads_none, serve, workload


@workload("mlp_train")
def mlp_train() -> tuple:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))

    def step() -> None:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step, None


@workload("conv_train")
def conv_train() -> tuple:
    torch.manual_seed(0)
    conv1 = nn.Conv2d(1, 16, 3, padding=1)
    conv2 = nn.Conv2d(16, 32, 3, padding=1)
    fc = nn.Linear(32 * 7 * 7, 10)
    params = [*conv1.parameters(), *conv2.parameters(), *fc.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))

    def step() -> None:
        opt.zero_grad()
        h = F.max_pool2d(F.relu(conv1(x)), 2)
        h = F.max_pool2d(F.relu(conv2(h)), 2)
        F.cross_entropy(fc(h.flatten(1)), y).backward()
        opt.step()

    return step, None


@workload("bn_conv_train")
def bn_conv_train() -> tuple:
    torch.manual_seed(0)
    conv = nn.Conv2d(16, 32, 3, padding=1, bias=False)
    bn = nn.BatchNorm2d(32)
    params = [*conv.parameters(), *bn.parameters()]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    x = torch.randn(32, 16, 16, 16)

    def step() -> None:
        opt.zero_grad()
        F.relu(bn(conv(x))).pow(2).mean().backward()
        opt.step()

    return step, None


@workload("transformer_block")
def transformer_block() -> tuple:
    torch.manual_seed(0)
    B, T, D, H, FF = 8, 128, 256, 4, 1024
    dh = D // H

    def lin(i: int, o: int) -> list:
        return [(torch.randn(i, o) / math.sqrt(i)).requires_grad_(), torch.zeros(o).requires_grad_()]

    Wq, bq = lin(D, D)
    Wk, bk = lin(D, D)
    Wv, bv = lin(D, D)
    Wo, bo = lin(D, D)
    W1, b1 = lin(D, FF)
    W2, b2 = lin(FF, D)
    g1, be1 = torch.ones(D, requires_grad=True), torch.zeros(D, requires_grad=True)
    g2, be2 = torch.ones(D, requires_grad=True), torch.zeros(D, requires_grad=True)
    params = [Wq, bq, Wk, bk, Wv, bv, Wo, bo, W1, b1, W2, b2, g1, be1, g2, be2]
    x = torch.randn(B, T, D)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    scale = 1.0 / math.sqrt(dh)

    def heads(t: Any) -> Any:
        return t.reshape(B, T, H, dh).transpose(1, 2)

    def block(x: Any) -> Any:
        a = F.layer_norm(x, (D,), g1, be1)
        q, k, v = heads(a @ Wq + bq), heads(a @ Wk + bk), heads(a @ Wv + bv)
        s = (q @ k.transpose(-2, -1)) * scale
        s = s.masked_fill(mask, float("-inf"))
        p = torch.softmax(s, dim=-1)
        o = (p @ v).transpose(1, 2).reshape(B, T, D)
        h = x + (o @ Wo + bo)
        m = F.layer_norm(h, (D,), g2, be2)
        f = F.gelu(m @ W1 + b1)
        return h + (f @ W2 + b2)

    return (lambda: block(x).pow(2).mean().backward()), _grads_none(params)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
