"""A reference case's program, run by the engine: the one dispatcher for ``rtx-reference/1`` programs, used by
the conformance runner and by the tests alike.

Each step's op name is looked up in the registry `REFERENCE` that the ops fill themselves (`ops.implements`
on each op's public function), and called with the step's tensors as arguments and its attrs as keywords.

>>> import numpy as np
>>> names, fn = build({"inputs": {"x": {"shape": [2], "data": [1.0, 2.0]}},
...                    "program": [{"out": "y", "op": "mul_scalar", "args": ["x"], "attrs": {"value": 3.0}}],
...                    "output": "y"})
>>> names, fn(np.array([1.0, 2.0])).tolist()
(['x'], [3.0, 6.0])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine import Tensor, Variable
from ..engine.ops import REFERENCE


class UnsupportedOp(Exception):
    """The engine has no function for an op name (the case fails with 'unsupported op NAME')."""


def dispatch(op: str, args: Sequence[Any], attrs: dict) -> Any:
    """Run one program step: the registered call of `op` on the step's values and attrs."""
    call = REFERENCE.get(op)
    if call is None:
        raise UnsupportedOp(op)
    return call(*args, **attrs)


def tensor(t: dict, dtype: Any, device: Any = None) -> Tensor:
    """A TENSOR of the format ({"shape", "data"}) as an engine Tensor of `dtype` on `device`."""
    return Tensor.from_slice(np.asarray(t["data"], dtype=dtype).reshape(-1), t["shape"], device, dtype=dtype)


def leaves(case: dict, dtype: Any = np.float64, device: Any = None) -> dict[str, Variable]:
    """The case's float inputs as leaf Variables that require grad, named after the input."""
    return {k: Variable.from_tensor(tensor(t, dtype, device), requires_grad=True, name=k)
            for k, t in case["inputs"].items()}


def indices(case: dict, device: Any = None) -> dict[str, Tensor]:
    """The case's integer tensors (class targets, index lists, masks) as int64 Tensors."""
    return {k: tensor(t, np.int64, device) for k, t in case.get("indices", {}).items()}


def run(case: dict, env: dict[str, Any]) -> Any:
    """Run the program over `env` (names of inputs and indices to values) and return the output."""
    env = dict(env)
    for step in case["program"]:
        args = [env[a] for a in step["args"]]
        try:
            env[step["out"]] = dispatch(step["op"], args, step["attrs"])
        except UnsupportedOp:
            raise UnsupportedOp(step["op"]) from None
    return env[case["output"]]


def build(case: dict, device: Any = None) -> tuple[list[str], Callable[..., Any]]:
    """(float input names, fn) where ``fn(*float_inputs)`` runs the program on those values (Variables, Tensors or
    arrays, in the order of `names`) with the case's indices, and returns the output."""
    names = list(case["inputs"])
    idx = indices(case, device)

    def fn(*xs: Any) -> Any:
        values = [x if isinstance(x, Tensor) else Tensor(x) for x in xs]
        return run(case, {**dict(zip(names, values, strict=True)), **idx})

    return names, fn


def ops_of(case: dict) -> list[str]:
    """The op names a case's program uses, in order of first use."""
    return list(dict.fromkeys(step["op"] for step in case["program"]))
