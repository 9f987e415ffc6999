"""Issue 4 item 5: tiny_mlp_train eager vs replayed through the graph cache, alternating in one run; and a digits
classifier step (MLP 64-32-10 with relu, batch 32, cross_entropy against int64 targets passed as an input).

The step is the workload of benchmarks/WORKLOADS.md: MLP 16-32-32-1 with tanh, batch 8, MSE against random
targets, plain SGD lr 0.01 applied by hand (``p.data -= lr * p.grad.data``) outside the cached function, so
both variants do the same work per step: zero grads, forward, loss, backward, SGD. Target: replay >= 1.5x faster.

    PYTHONPATH=. python3 benchmarks/bench_graph_cache.py [--rounds 7] [--min-time 0.3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import time_samples

from rtxviz import Tensor, Variable
from rtxviz.engine.cache import cache_graph, init_graph_cache
from rtxviz.engine.ops.nn import cross_entropy

LR = 0.01


def make_model(seed: int = 0) -> tuple[list[tuple[Variable, Variable]], list[Variable]]:
    rng = np.random.default_rng(seed)

    def linear(n_in: int, n_out: int) -> tuple[Variable, Variable]:
        bound = 1.0 / np.sqrt(n_in)
        w = rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32)
        b = rng.uniform(-bound, bound, (n_out,)).astype(np.float32)
        return Variable(w, requires_grad=True), Variable(b, requires_grad=True)

    layers = [linear(16, 32), linear(32, 32), linear(32, 1)]
    return layers, [p for layer in layers for p in layer]


def make_step(layers: list) -> object:
    def step(x: Tensor, y: Tensor) -> Variable:
        h = x
        for i, (w, b) in enumerate(layers):
            h = h @ w + b
            if i < len(layers) - 1:
                h = h.tanh()
        loss = ((h - y) ** 2).mean()
        loss.backward()
        return loss

    return step


def sgd(params: list[Variable]) -> None:
    for p in params:
        p.data -= LR * p.grad.data


def make_ce_step(layers: list) -> object:
    def step(x: Tensor, t: Tensor) -> Variable:
        (w1, b1), (w2, b2) = layers
        loss = cross_entropy((x @ w1 + b1).relu() @ w2 + b2, t)
        loss.backward()
        return loss

    return step


def make_ce_model(seed: int = 0) -> tuple[list, list[Variable]]:
    rng = np.random.default_rng(seed)
    layers = [tuple(Variable(rng.uniform(-0.1, 0.1, shape).astype(np.float32), requires_grad=True)
                    for shape in ((n_in, n_out), (n_out,))) for n_in, n_out in ((64, 32), (32, 10))]
    return layers, [p for layer in layers for p in layer]


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(1)
    x = Tensor(rng.standard_normal((8, 16)).astype(np.float32))
    y = Tensor(rng.standard_normal((8, 1)).astype(np.float32))
    out = run("tiny_mlp_train", make_model, make_step, x, y, args)
    xd = Tensor(rng.standard_normal((32, 64)).astype(np.float32))
    td = Tensor(rng.integers(0, 10, 32).astype(np.int64))
    ce = run("digits_mlp_cross_entropy", make_ce_model, make_ce_step, xd, td, args)
    out.update({f"ce_{k}": v for k, v in ce.items()})
    return out


def run(name: str, make_model: object, make_step: object, x: Tensor, y: Tensor, args: object) -> dict[str, float]:
    layers_e, params_e = make_model()
    layers_r, params_r = make_model()
    step_e, step_r = make_step(layers_e), make_step(layers_r)
    init_graph_cache()
    graph = cache_graph(step_r, x, y)  # the capture is one real step: keep the eager twin in lockstep
    step_e(x, y)
    sgd(params_e)
    sgd(params_r)

    def eager() -> None:
        for p in params_e:
            p.grad = None
        step_e(x, y)
        sgd(params_e)

    def replay() -> None:
        for p in params_r:
            p.grad = None
        graph.execute(x, y)
        sgd(params_r)

    for _ in range(3):  # same ops, same order: the two trainings stay equal bit for bit
        eager()
        replay()
    same = all(np.array_equal(p.data, q.data) for p, q in zip(params_e, params_r, strict=True))
    ours: dict[str, list[float]] = {"eager": [], "replay": []}
    for _ in range(args.rounds):  # alternate, so the shared machine's noise hits both alike
        ours["eager"].append(statistics.median(time_samples(eager, min_time=args.min_time)))
        ours["replay"].append(statistics.median(time_samples(replay, min_time=args.min_time)))
    e, r = statistics.median(ours["eager"]) * 1e6, statistics.median(ours["replay"]) * 1e6
    print(f"{name} ({graph.ops} ops replayed), medians of {args.rounds} alternating rounds:")
    for name, med in (("eager", e), ("replay", r)):
        lo, hi = min(ours[name]) * 1e6, max(ours[name]) * 1e6
        print(f"  {name:7s} {med:8.1f} us/step   (round medians {lo:.1f}..{hi:.1f})")
    print(f"  speed-up {e / r:.2f}x (target >= 1.5x); parameters equal after training: {same}")
    return {"eager_us": e, "replay_us": r, "speedup": e / r}


if __name__ == "__main__":
    main()
