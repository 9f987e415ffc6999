"""PyTorch's side of the workloads (defined in benchmarks/WORKLOADS.md), served to harness.py.

Runs in a Python that has torch: `python torch_workloads.py --serve` answers one JSON line per request.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from harness import serve_requests

# --threads N of the benchmark scripts arrives as RTXVIZ_BENCH_THREADS; without it PyTorch keeps its own default
# (what a user gets), as numpy does in the rtxviz process.
if os.environ.get("RTXVIZ_BENCH_THREADS"):
    torch.set_num_threads(int(os.environ["RTXVIZ_BENCH_THREADS"]))
REGISTRY: dict[str, Callable[[], tuple]] = {}


def workload(name: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        REGISTRY[name] = fn
        return fn

    return deco


def _grads_none(params: list) -> Callable[[], None]:
    def setup() -> None:
        for p in params:
            p.grad = None

    return setup


def _chain() -> tuple:
    torch.manual_seed(0)
    x = torch.randn(64)
    ws = [(1.0 + 0.1 * torch.randn(64)).requires_grad_() for _ in range(1000)]
    bs = [(0.1 * torch.randn(64)).requires_grad_() for _ in range(1000)]

    def fwd() -> Any:
        y = x
        for w, b in zip(ws, bs, strict=True):
            y = torch.tanh(y * w + b)
        return y.sum()

    return fwd, ws + bs


@workload("deep_chain")
def deep_chain() -> tuple:
    fwd, params = _chain()
    return (lambda: fwd().backward()), _grads_none(params)


@workload("deep_chain_forward")
def deep_chain_forward() -> tuple:
    return _chain()[0], None


@workload("tiny_mlp_train")
def tiny_mlp_train() -> tuple:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 1)

    def step() -> None:
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    return step, None


@workload("gemm_backward")
def gemm_backward() -> tuple:
    torch.manual_seed(0)
    a = torch.randn(1024, 1024, requires_grad=True)
    b = torch.randn(1024, 1024, requires_grad=True)
    return (lambda: (a @ b).sum().backward()), _grads_none([a, b])


def _per_op(body: Callable[[], Any], calls: int = 2000) -> tuple:
    def fn() -> None:
        for _ in range(calls):
            body()

    return fn, None, calls


@workload("per_op/add_nograd")
def add_nograd() -> tuple:
    x, y = torch.randn(16), torch.randn(16)
    return _per_op(lambda: x + y)


@workload("per_op/add_requires_grad")
def add_requires_grad() -> tuple:
    x, y = torch.randn(16, requires_grad=True), torch.randn(16, requires_grad=True)
    return _per_op(lambda: x + y)


@workload("per_op/mul_sum_backward")
def mul_sum_backward() -> tuple:
    x, y = torch.randn(16, requires_grad=True), torch.randn(16, requires_grad=True)
    return _per_op(lambda: (x * y).sum().backward(), 300)


def serve() -> None:
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    serve_requests(lambda name: REGISTRY[name]())


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
