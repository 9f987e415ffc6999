"""Issue 2's workloads: deep_chain, tiny_mlp_train, gemm_backward and per_op, beside PyTorch and DeZero; and
issue 21's rows as users write them: tiny_mlp_train through nn.Sequential, F.mse_loss and optim.SGD, eager and
replayed from the graph cache.

    python benchmarks/bench_engine.py [--rounds 3] [--threads N] [--torch-python /path/to/python-with-torch]
    RTXVIZ_BENCH_BEFORE=/tmp/before python benchmarks/bench_engine.py ...   # an older checkout, alternating

Without --threads no engine's BLAS or intra-op thread count is set (what a user gets); --threads N sets it for
all three (numpy's here before it is imported, PyTorch's and DeZero's in their workers).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import blas_threads_from_argv, compare

if __name__ == "__main__":
    blas_threads_from_argv(sys.argv[1:])  # before numpy is imported: its BLAS reads the thread count once

import numpy as np

import rtxviz
from rtxviz import Tensor, Variable, nn, no_grad, optim
from rtxviz.engine.cache import init_graph_cache, run_cached
from rtxviz.nn import functional as F


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


def _module_model() -> tuple:
    """16-32-32-1 tanh MLP as nn.Sequential, plain optim.SGD(0.01), batch 8 (the shapes of tiny_mlp_train)."""
    rtxviz.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    x = Tensor.from_numpy(rng.standard_normal((8, 16)).astype(np.float32))
    y = Tensor.from_numpy(rng.standard_normal((8, 1)).astype(np.float32))
    return model, opt, x, y


def tiny_mlp_train_modules() -> tuple:
    """tiny_mlp_train as a user writes it: zero_grad, model(x), F.mse_loss, backward, step."""
    model, opt, x, y = _module_model()

    def step() -> None:
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    return step, None


def tiny_mlp_train_modules_replay() -> tuple:
    """The same step with forward, loss and backward replayed from the graph cache (`run_cached`); zero_grad and
    the optimizer step stay eager, outside the cached function, as a user writes them."""
    model, opt, x, y = _module_model()

    def forward_backward(x: Tensor, y: Tensor) -> Variable:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    init_graph_cache()

    def step() -> None:
        opt.zero_grad()
        run_cached(forward_backward, x, y, params=params)
        opt.step()

    params = list(model.parameters())
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
    "tiny_mlp_train": {"rtxviz": tiny_mlp_train, "torch": "tiny_mlp_train", "dezero": "tiny_mlp_train"},
    "tiny_mlp_train_modules": {"rtxviz": tiny_mlp_train_modules, "torch": "tiny_mlp_train",
                               "dezero": "tiny_mlp_train", "unit": "us"},
    "tiny_mlp_train_modules_replay": {"rtxviz": tiny_mlp_train_modules_replay, "torch": "tiny_mlp_train",
                                      "dezero": "tiny_mlp_train", "unit": "us"},
    "gemm_backward": {"rtxviz": gemm_backward, "torch": "gemm_backward"},
    "per_op/add_nograd": {"rtxviz": add_nograd, "torch": "per_op/add_nograd", "dezero": "per_op/add_nograd",
                          "unit": "us"},
    "per_op/add_requires_grad": {"rtxviz": add_requires_grad, "torch": "per_op/add_requires_grad",
                                 "dezero": "per_op/add_requires_grad", "unit": "us"},
    "per_op/mul_sum_backward": {"rtxviz": mul_sum_backward, "torch": "per_op/mul_sum_backward",
                                "dezero": "per_op/mul_sum_backward", "unit": "us"},
}


def report_issue21(results: dict[str, dict[str, float]]) -> None:
    """The ratios issue 21 sets targets for, derived from the one run's medians (and, with RTXVIZ_BENCH_BEFORE,
    the same ratios of the older checkout, from its medians in the same rounds)."""
    for side, key in (("", "ours"), ("before: ", "before")):
        hand, mods = results.get("tiny_mlp_train", {}), results.get("tiny_mlp_train_modules", {})
        replay = results.get("tiny_mlp_train_modules_replay", {})
        if key not in mods and key not in hand:
            continue
        if key in hand and key in mods:  # hand is in ms, the module rows in us
            print(f"# {side}module path / hand-written: {mods[key] / (hand[key] * 1e3):.2f} (target <= 1.15)")
        if key in mods and key in replay:
            print(f"# {side}graph-cache replay through modules: {mods[key] / replay[key]:.2f}x faster than eager "
                  "(target >= 3)")
        for name, target in (("tiny_mlp_train_modules", 0.75), ("per_op/mul_sum_backward", 0.8)):
            row = results.get(name, {})
            if key in row and "dezero" in row:
                print(f"# {side}{name} / DeZero: {row[key] / row['dezero']:.2f} (target <= {target})")
        if key in mods and "torch" in mods:
            print(f"# {side}tiny_mlp_train_modules / PyTorch: {mods[key] / mods['torch']:.2f} (target <= 0.8)")


if __name__ == "__main__":
    rtxviz.manual_seed(0)
    report_issue21(compare(WORKLOADS))
