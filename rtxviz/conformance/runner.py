"""Running one reference case: the value, the gradients and (where given) the Hessian and Jacobian, each
compared elementwise with ``|got - want| <= atol + rtol * |want|``; a case's result names its worst element."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import HessianComputer, JacobianComputer
from . import program
from .format import load_file
from .program import UnsupportedOp

#: float32 runs compare with this rtol and at least this atol (float32 carries ~7 significant digits).
FLOAT32_RTOL = 1e-4
FLOAT32_ATOL = 1e-5


@dataclass
class Mismatch:
    """The worst element of one compared quantity: `excess` > 0 means it is out of tolerance."""

    quantity: str  # "value", "grads[a]", "hessian[x]", "jacobian[x]"
    index: tuple[int, ...] | None
    got: float | None
    want: float | None
    abs_err: float
    allowed: float
    note: str = ""  # "shape (2, 3) != expected (3, 2)", "not computed", ...

    @property
    def excess(self) -> float:
        if self.note:
            return math.inf
        return self.abs_err - self.allowed

    def describe(self) -> str:
        if self.note:
            return f"{self.quantity}: {self.note}"
        idx = "()" if self.index is None else str(tuple(int(i) for i in self.index))
        return (f"{self.quantity} at {idx}: got {self.got!r}, want {self.want!r} "
                f"(|diff| {self.abs_err:.3g} > allowed {self.allowed:.3g})" if self.excess > 0 else
                f"{self.quantity} at {idx}: |diff| {self.abs_err:.3g} (allowed {self.allowed:.3g})")


@dataclass
class CaseResult:
    """The outcome of one case: `passed`, and why not (`message`), with every compared quantity's worst element."""

    name: str
    passed: bool
    message: str = ""
    checks: list[Mismatch] = field(default_factory=list)

    @property
    def worst(self) -> Mismatch | None:
        """The compared element furthest out of (or closest to leaving) its tolerance."""
        if not self.checks:
            return None
        return max(self.checks, key=lambda m: m.excess)


def _array(t: dict, dtype: Any) -> np.ndarray:
    return np.asarray(t["data"], dtype=dtype).reshape(tuple(t["shape"]))


def _numpy(value: Any) -> np.ndarray:
    """Any engine result (Tensor, Variable, ndarray, cupy array) as a float64 numpy array."""
    data = getattr(value, "data", value)
    if hasattr(data, "get") and not isinstance(data, np.ndarray):
        data = data.get()
    return np.asarray(data, dtype=np.float64)


def _compare(quantity: str, got: Any, want: np.ndarray, rtol: float, atol: float) -> Mismatch:
    if got is None:
        return Mismatch(quantity, None, None, None, math.inf, atol, note="not computed (None)")
    g = _numpy(got)
    if g.shape != want.shape:
        return Mismatch(quantity, None, None, None, math.inf, atol,
                        note=f"shape {tuple(g.shape)} != expected {tuple(want.shape)}")
    if want.size == 0:
        return Mismatch(quantity, None, None, None, 0.0, atol)
    diff = np.abs(g - want)
    allowed = atol + rtol * np.abs(want)
    excess = np.where(np.isnan(diff), np.inf, diff - allowed)
    flat = int(np.argmax(excess))
    idx = np.unravel_index(flat, want.shape) if want.ndim else ()
    return Mismatch(quantity, tuple(int(i) for i in idx), float(g.reshape(-1)[flat]),
                    float(want.reshape(-1)[flat]), float(diff.reshape(-1)[flat]),
                    float(allowed.reshape(-1)[flat]))


def _function_of(case: dict, wrt: str, dtype: Any, device: Any) -> Callable[[Any], Any]:
    """The program as a function of one input (the others fixed): what Hessians and Jacobians take."""
    fixed = {**program.leaves(case, dtype, device), **program.indices(case, device)}

    def f(x: Any) -> Any:
        return program.run(case, {**fixed, wrt: x})

    return f


def _higher_order(kind: str, f: Callable[[Any], Any], x: Any) -> Any:
    return (HessianComputer if kind == "hessian" else JacobianComputer).compute(f, x)


def run_case(case: dict, dtype: str = "float64", device: Any = None) -> CaseResult:
    """Run one case; never raises for engine errors (they become a failing result with the error text)."""
    name = case["name"]
    tol = case["tol"]
    rtol, atol = float(tol["rtol"]), float(tol["atol"])
    if np.dtype(dtype) == np.float32:
        rtol, atol = max(rtol, FLOAT32_RTOL), max(atol, FLOAT32_ATOL)
    expect = case["expect"]
    dt = np.dtype(dtype)
    checks: list[Mismatch] = []
    stage = "forward"
    try:
        leaves = program.leaves(case, dt, device)
        out = program.run(case, {**leaves, **program.indices(case, device)})
        checks.append(_compare("value", out, _array(expect["value"], np.float64), rtol, atol))
        stage = "backward"
        g_out = program.tensor(expect["grad_output"], dt, device)
        out.backward(g_out)
        for k, t in expect["grads"].items():
            want = _array(t, np.float64)
            grad = leaves[k].grad  # None: an input the output does not depend on has gradient zero
            checks.append(_compare(f"grads[{k}]", np.zeros_like(want) if grad is None else grad, want, rtol, atol))
        for kind in ("hessian", "jacobian"):
            if kind not in expect:
                continue
            stage = kind
            entry = expect[kind]
            wrt = entry["wrt"]
            x = program.leaves(case, dt, device)[wrt]
            try:
                got = _higher_order(kind, _function_of(case, wrt, dt, device), x)
            except UnsupportedOp:
                raise
            except NotImplementedError as exc:
                return CaseResult(name, False, f"unsupported: {kind} ({exc})", checks)
            want = _array(entry, np.float64)
            arr = _numpy(got)
            if arr.size == want.size:
                arr = arr.reshape(want.shape)
            checks.append(_compare(f"{kind}[{wrt}]", arr, want, rtol, atol))
    except UnsupportedOp as exc:
        return CaseResult(name, False, f"unsupported op {exc.args[0]}", checks)
    except Exception as exc:  # an engine error is this case's failure, never the runner's crash
        text = str(exc).splitlines()[0] if str(exc) else ""
        return CaseResult(name, False, f"error in {stage}: {type(exc).__name__}: {text}", checks)
    failing = [c for c in checks if c.excess > 0]
    if failing:
        worst = max(failing, key=lambda c: c.excess)
        return CaseResult(name, False, worst.describe(), checks)
    return CaseResult(name, True, "", checks)


def run_file(path: str | Path, dtype: str = "float64", device: Any = None) -> list[CaseResult]:
    """Run every case of a reference file; raises MalformedFileError for a malformed file.

    >>> results = run_file(reference_path("ops.json"), dtype="float32")   # doctest: +SKIP
    >>> [r.name for r in results if not r.passed]                          # doctest: +SKIP
    []
    """
    if str(np.dtype(dtype)) not in ("float32", "float64"):
        raise ValueError(f"run_file: dtype must be float32 or float64, got {dtype!r}")
    doc = load_file(path)
    return [run_case(case, str(np.dtype(dtype)), device) for case in doc["cases"]]
