"""Writes the PyTorch cases of floor_divide, remainder and fmod to tests/engine/data/rounding_reference.json, a file
in the rtx-reference/1 format (rtxviz/reference/FORMAT.md) that the conformance tests run beside the shipped ones.
The shipped files stay the shared references as they were given; these ops are rtxviz's additions to vocabulary v2.

Run with a Python that has torch 2.13 (CPU): ``python tests/engine/make_rounding_reference.py``. The quotients
a / b sit 0.2 or more away from every integer, so each case is away from the jumps of floor and trunc, and |b| is
above 0.4. torch.floor_divide has no derivative (its backward raises); its cases carry the gradients of
torch.div(a, b, rounding_mode="floor"), the same values, whose gradients are zeros.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

FILE = Path(__file__).resolve().parent / "data" / "rounding_reference.json"
OPS = {"floor_divide": lambda a, b: torch.div(a, b, rounding_mode="floor"), "remainder": torch.remainder,
       "fmod": torch.fmod}


def _tensor(t: torch.Tensor) -> dict:
    return {"shape": list(t.shape), "data": [float(v) for v in t.detach().reshape(-1).tolist()]}


def _quotients(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values k + f with k an integer in [-3, 2] and f in [0.2, 0.8]: never within 0.2 of an integer."""
    return rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape)


def _divisors(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)


def _inputs(rng: np.random.Generator, layout: str) -> tuple[np.ndarray, np.ndarray]:
    if layout == "same_shape":
        b = _divisors(rng, (2, 3))
        return b * _quotients(rng, (2, 3)), b
    if layout == "broadcast_row":  # a [2, 3], b [3]
        b = _divisors(rng, (3,))
        return b * _quotients(rng, (2, 3)), b
    # broadcast_lhs: a [3], b [2, 3]
    a = _divisors(rng, (3,))
    return a, a / _quotients(rng, (2, 3))


def cases() -> list[dict]:
    out = []
    for op, fn in OPS.items():
        for k, layout in enumerate(("same_shape", "broadcast_row", "broadcast_lhs")):
            rng = np.random.default_rng(1900 + 10 * list(OPS).index(op) + k)
            a_np, b_np = _inputs(rng, layout)
            a = torch.tensor(a_np, dtype=torch.float64, requires_grad=True)
            b = torch.tensor(b_np, dtype=torch.float64, requires_grad=True)
            y = fn(a, b)
            g = torch.tensor(rng.standard_normal(tuple(y.shape)), dtype=torch.float64)
            ga, gb = torch.autograd.grad(y, (a, b), g)
            out.append({"name": f"{op}/{layout}/0", "inputs": {"a": _tensor(a), "b": _tensor(b)},
                        "program": [{"out": "y", "op": op, "args": ["a", "b"], "attrs": {}}], "output": "y",
                        "expect": {"value": _tensor(y), "grad_output": _tensor(g),
                                   "grads": {"a": _tensor(ga), "b": _tensor(gb)}},
                        "tol": {"rtol": 1e-7, "atol": 1e-9}})
    return out


def main() -> None:
    body = ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases())
    FILE.write_text(f'{{"format":"rtx-reference/1","generator":"PyTorch {torch.__version__}, float64","cases":[\n'
                    f"{body}\n]}}\n", encoding="utf-8")
    print(f"{FILE}: {len(cases())} cases of {', '.join(OPS)}")


if __name__ == "__main__":
    main()
