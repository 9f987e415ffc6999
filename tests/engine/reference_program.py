"""Turn a case of rtxviz/reference/*.json (format rtx-reference/1, see FORMAT.md) into a Python function.

`load_cases(file)` reads the cases; `build(case)` returns (float input names, index Tensors, fn) where
fn(*float_inputs) runs the case's program with engine ops and returns its output. Ops are called through
their public functions (Tensor methods, or functions of the `rtxviz.engine.ops` modules) with the format's
attrs mapped to their keyword names. `missing_ops(case)` lists the case's ops the engine does not have yet.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import rtxviz  # noqa: F401 - attaches the op methods
from rtxviz import Tensor
from rtxviz.engine.ops import OPS

REFERENCE = Path(__file__).resolve().parents[2] / "rtxviz" / "reference"


def load_cases(name: str) -> list[dict]:
    with open(REFERENCE / name) as fh:
        return json.load(fh)["cases"]


def array(t: dict, dtype: Any = np.float64) -> np.ndarray:
    return np.asarray(t["data"], dtype=dtype).reshape(t["shape"])


def missing_ops(case: dict) -> list[str]:
    return sorted({s["op"] for s in case["program"]} - set(OPS))


def _function(name: str) -> Any:
    fn = getattr(Tensor, name, None)
    if fn is not None:
        return fn
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("rtxviz.engine.ops.") and mod is not None:
            fn = getattr(mod, name, None)
            if callable(fn):
                return fn
    raise LookupError(f"no public function for op {name!r}")


def _values(y: Any) -> Any:
    return y[0] if isinstance(y, tuple) else y  # max/min may return (values, indices)


def _call(op: str, args: list, at: dict) -> Any:
    fn = _function(op)
    if op in ("sum", "mean", "logsumexp"):
        return fn(args[0], dim=at["dims"], keepdim=at["keepdim"])
    if op == "var":
        return fn(args[0], dim=at["dims"], keepdim=at["keepdim"], correction=at["correction"])
    if op in ("max", "min"):
        return _values(fn(args[0], dim=at["dim"], keepdim=at["keepdim"]))
    if op in ("reshape", "expand"):
        return fn(args[0], tuple(at["shape"]))
    if op == "permute":
        return fn(args[0], tuple(at["dims"]))
    if op in ("cat", "stack"):
        return fn(list(args), dim=at["dim"])
    if op == "index_select":
        return fn(args[0], at["dim"], args[1])
    if op == "layer_norm":
        return fn(args[0], at["normalized_shape"], args[1], args[2], eps=at["eps"])
    if op == "embedding":  # the format lists (weight, indices); PyTorch's function takes (indices, weight)
        first = next(iter(inspect.signature(fn).parameters), "")
        return fn(*args) if first == "weight" else fn(args[1], args[0])
    return fn(*args, **at)


def build(case: dict) -> tuple[list[str], dict[str, Tensor], Any]:
    names = list(case["inputs"])
    indices = {k: Tensor(array(v, np.int64)) for k, v in case.get("indices", {}).items()}

    def fn(*xs: Any) -> Any:
        env: dict[str, Any] = dict(zip(names, xs, strict=True))
        env.update(indices)
        for step in case["program"]:
            env[step["out"]] = _call(step["op"], [env[a] for a in step["args"]], step["attrs"])
        return env[case["output"]]

    return names, indices, fn
