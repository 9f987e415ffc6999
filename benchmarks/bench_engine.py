"""Issue 2's workloads: deep_chain, tiny_mlp_train, gemm_backward and per_op, beside PyTorch.

    python benchmarks/bench_engine.py [--rounds 3] [--torch-python /path/to/python-with-torch]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import compare

import rtxviz
from rtxviz import Tensor, Variable, no_grad


def leaf(array: np.ndarray) -> Variable:
    return Variable.from_tensor(Tensor.from_numpy(array.astype(np.float32)))


def _grads_none(params: list[Variable]) -> Any:
    def setup() -> None:
        for p in params:
            p.grad = None

    return setup


def _chain_parts() -> tuple:
    rng = np.random.default_rng(0)
    x = Tensor.from_numpy(rng.standard_normal(64).astype(np.float32))
    ws = [leaf(1.0 + 0.1 * rng.standard_normal(64)) for _ in range(1000)]
    bs = [leaf(0.1 * rng.standard_normal(64)) for _ in range(1000)]

    def fwd() -> Variable:
        y = x
        for w, b in zip(ws, bs, strict=True):
            y = (y * w + b).tanh()
        return y.sum()

    return fwd, ws + bs


def deep_chain() -> tuple:
    fwd, params = _chain_parts()
    return (lambda: fwd().backward()), _grads_none(params)


def deep_chain_forward() -> tuple:
    fwd, _ = _chain_parts()
    return fwd, None


def tiny_mlp_train() -> tuple:
    """16-32-32-1 tanh MLP, batch 8, MSE, plain SGD(0.01): a hand-written two-layer model (issue 2 allows it)."""
    rng = np.random.default_rng(0)

    def linear(n_in: int, n_out: int) -> tuple[Variable, Variable]:
        bound = 1.0 / np.sqrt(n_in)
        return leaf(rng.uniform(-bound, bound, (n_in, n_out))), leaf(rng.uniform(-bound, bound, (n_out,)))

    layers = [linear(16, 32), linear(32, 32), linear(32, 1)]
    params = [p for layer in layers for p in layer]
    x = Tensor.from_numpy(rng.standard_normal((8, 16)).astype(np.float32))
    y = Tensor.from_numpy(rng.standard_normal((8, 1)).astype(np.float32))
    lr = 0.01

    def step() -> None:
        for p in params:
            p.grad = None
        h = x
        for i, (w, b) in enumerate(layers):
            h = h @ w + b
            if i < len(layers) - 1:
                h = h.tanh()
        diff = h - y
        loss = (diff * diff).mean()
        loss.backward()
        with no_grad():
            for p in params:
                p.data -= lr * p.grad.data

    return step, None


def gemm_backward() -> tuple:
    rng = np.random.default_rng(0)
    a = leaf(rng.standard_normal((1024, 1024)))
    b = leaf(rng.standard_normal((1024, 1024)))
    return (lambda: (a @ b).sum().backward()), _grads_none([a, b])


def _per_op(body: Any, calls: int = 2000) -> tuple:
    def fn() -> None:
        for _ in range(calls):
            body()

    return fn, None, calls


def add_nograd() -> tuple:
    x, y = Tensor.randn([16]), Tensor.randn([16])
    return _per_op(lambda: x + y)


def add_requires_grad() -> tuple:
    x, y = Variable.from_tensor(Tensor.randn([16])), Variable.from_tensor(Tensor.randn([16]))
    return _per_op(lambda: x + y)


def mul_sum_backward() -> tuple:
    x, y = Variable.from_tensor(Tensor.randn([16])), Variable.from_tensor(Tensor.randn([16]))
    return _per_op(lambda: (x * y).sum().backward(), 300)


WORKLOADS = {
    "deep_chain": {"rtxviz": deep_chain, "torch": "deep_chain"},
    "deep_chain_forward": {"rtxviz": deep_chain_forward, "torch": "deep_chain_forward"},
    "tiny_mlp_train": {"rtxviz": tiny_mlp_train, "torch": "tiny_mlp_train"},
    "gemm_backward": {"rtxviz": gemm_backward, "torch": "gemm_backward"},
    "per_op/add_nograd": {"rtxviz": add_nograd, "torch": "per_op/add_nograd", "unit": "us"},
    "per_op/add_requires_grad": {"rtxviz": add_requires_grad, "torch": "per_op/add_requires_grad", "unit": "us"},
    "per_op/mul_sum_backward": {"rtxviz": mul_sum_backward, "torch": "per_op/mul_sum_backward", "unit": "us"},
}

if __name__ == "__main__":
    rtxviz.manual_seed(0)
    compare(WORKLOADS)
