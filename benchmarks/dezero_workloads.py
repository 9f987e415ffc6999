"""DeZero's side of the workloads (dezero 0.0.13, the strongest numpy peer), served to harness.py as the PyTorch
side is: `python dezero_workloads.py --serve` answers one JSON line per request.

Each workload is written as DeZero's own book writes it (`dezero.models.MLP`, `optimizers.SGD(...).setup`,
`cleargrads`, `F.mean_squared_error`), at the shapes of the rtxviz and PyTorch rows of the same name.

DeZero 0.0.13 imports two things at start-up that its training paths never use and that today's stack lacks:
`matplotlib.pyplot` (for its dataset plots) and numpy's long-removed `np.int` alias (a default argument in
`dezero.transforms`). The worker gives it an empty `matplotlib.pyplot` module and `np.int = int` so that the
package imports; no workload here reaches either.
"""

from __future__ import annotations

import json
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import serve_requests

if not hasattr(np, "int"):
    np.int = int  # type: ignore[attr-defined]  # dezero.transforms' default argument (see the docstring)
if "matplotlib" not in sys.modules:
    try:
        import matplotlib.pyplot  # noqa: F401
    except ImportError:
        _mpl = types.ModuleType("matplotlib")
        _mpl.pyplot = types.ModuleType("matplotlib.pyplot")  # type: ignore[attr-defined]
        sys.modules["matplotlib"], sys.modules["matplotlib.pyplot"] = _mpl, _mpl.pyplot  # type: ignore[attr-defined]

import dezero
import dezero.functions as F
from dezero import optimizers
from dezero.models import MLP

REGISTRY: dict[str, Callable[[], tuple]] = {}


def workload(name: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        REGISTRY[name] = fn
        return fn

    return deco


@workload("tiny_mlp_train")
def tiny_mlp_train() -> tuple:
    """16-32-32-1 tanh MLP, batch 8, MSE, SGD(0.01), float32 as the other engines."""
    rng = np.random.default_rng(0)
    model = MLP((32, 32, 1), activation=F.tanh)
    opt = optimizers.SGD(lr=0.01).setup(model)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    y = rng.standard_normal((8, 1)).astype(np.float32)
    model(x)  # DeZero's Linear sizes its weight on the first call: build it, then cast to float32
    for p in model.params():
        p.data = p.data.astype(np.float32)

    def step() -> None:
        model.cleargrads()
        loss = F.mean_squared_error(model(x), y)
        loss.backward()
        opt.update()

    return step, None


def _per_op(body: Callable[[], Any], calls: int = 2000) -> tuple:
    def fn() -> None:
        for _ in range(calls):
            body()

    return fn, None, calls


def _pair() -> tuple:
    rng = np.random.default_rng(0)
    return (dezero.Variable(rng.standard_normal(16).astype(np.float32)),
            dezero.Variable(rng.standard_normal(16).astype(np.float32)))


@workload("per_op/add_nograd")
def add_nograd() -> tuple:
    x, y = _pair()

    def fn() -> None:  # no_grad around the whole sample, not per call: DeZero's context manager is not free
        with dezero.no_grad():
            for _ in range(2000):
                x + y

    return fn, None, 2000


@workload("per_op/add_requires_grad")
def add_requires_grad() -> tuple:
    x, y = _pair()
    return _per_op(lambda: x + y)


@workload("per_op/mul_sum_backward")
def mul_sum_backward() -> tuple:
    x, y = _pair()
    return _per_op(lambda: (x * y).sum().backward(), 300)


def serve() -> None:
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or "default"
    print(json.dumps({"dezero": dezero.__version__, "threads": threads}), flush=True)
    serve_requests(lambda name: REGISTRY[name]())


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
