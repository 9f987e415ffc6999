"""Run `rtx-reference/1` conformance files (values, gradients, Hessians, Jacobians computed by PyTorch)
against rtxviz, case by case.

Each case is a small program over named tensors. Every step is dispatched by its op name to the engine's
public functional API (the table `OP_TABLE`), the output is differentiated with the case's `grad_output`,
and value, gradients and (where given) Hessian / Jacobian are compared elementwise with
``|got - want| <= atol + rtol * |want|``. The file format is described in ``rtxviz/reference/FORMAT.md``.

Command line::

    python -m rtxviz.conformance rtxviz/reference/ops.json [--dtype float32] [--verbose]

prints one line per failing case and ends with ``N passed, N failed``; exit status 0 (all pass), 1 (a case
failed) or 2 (a file is malformed).

>>> from rtxviz.conformance import run_file, reference_path
>>> results = run_file(reference_path("ops.json"))       # doctest: +SKIP
>>> sum(r.passed for r in results), len(results)        # doctest: +SKIP
(187, 187)
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "rtx-reference/1"

#: float32 runs compare with this rtol and at least this atol (float32 carries ~7 significant digits).
FLOAT32_RTOL = 1e-4
FLOAT32_ATOL = 1e-5


class MalformedFileError(ValueError):
    """A reference file that does not follow the `rtx-reference/1` format; the message names file and problem."""


class UnsupportedOp(Exception):
    """The engine has no function for an op name (the case fails with 'unsupported op NAME')."""


# -- results ----------------------------------------------------------------------------------------------------
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


# -- loading and validating a file ---------------------------------------------------------------------------
def reference_path(name: str) -> Path:
    """The path of a reference file shipped with rtxviz (``ops.json``, ``higher_order.json``)."""
    return Path(__file__).resolve().parent / "reference" / name


def load_file(path: str | Path) -> dict:
    """Read and validate a reference file; raise MalformedFileError naming the file and the problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedFileError(f"{p}: cannot read the file ({exc.strerror or exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedFileError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    try:
        _validate_doc(doc)
    except MalformedFileError as exc:
        raise MalformedFileError(f"{p}: {exc}") from None
    return doc


def _bad(where: str, problem: str) -> MalformedFileError:
    return MalformedFileError(f"{where}: {problem}")


def _validate_tensor(t: Any, where: str, integer: bool = False) -> None:
    if not isinstance(t, dict) or "shape" not in t or "data" not in t:
        raise _bad(where, "a TENSOR must be an object with 'shape' and 'data'")
    shape, data = t["shape"], t["data"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise _bad(where, f"'shape' must be a list of non-negative integers, got {shape!r}")
    if not isinstance(data, list):
        raise _bad(where, f"'data' must be a flat list of numbers, got {type(data).__name__}")
    numel = math.prod(shape)
    if len(data) != numel:
        raise _bad(where, f"'data' has {len(data)} values but shape {shape} needs {numel}")
    for v in data:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _bad(where, f"'data' holds a non-number {v!r}")
        if integer and not isinstance(v, int) and not float(v).is_integer():
            raise _bad(where, f"an index tensor holds a non-integer {v!r}")


def _validate_doc(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise MalformedFileError(f"the top level must be a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise MalformedFileError(f"'format' must be {FORMAT!r}, got {doc.get('format')!r}")
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise MalformedFileError("'cases' must be a list")
    seen: set[str] = set()
    for i, case in enumerate(cases):
        _validate_case(case, i, seen)


def _validate_case(case: Any, i: int, seen: set[str]) -> None:
    if not isinstance(case, dict):
        raise MalformedFileError(f"case #{i} is not an object")
    name = case.get("name")
    if not isinstance(name, str) or not name:
        raise MalformedFileError(f"case #{i} has no 'name'")
    where = f"case {name!r}"
    if name in seen:
        raise _bad(where, "the name is used by an earlier case")
    seen.add(name)
    for key in ("inputs", "program", "output", "expect", "tol"):
        if key not in case:
            raise _bad(where, f"missing {key!r}")
    inputs, indices = case["inputs"], case.get("indices", {})
    if not isinstance(inputs, dict) or not isinstance(indices, dict):
        raise _bad(where, "'inputs' and 'indices' must be objects")
    for k, t in inputs.items():
        _validate_tensor(t, f"{where} inputs[{k!r}]")
    for k, t in indices.items():
        _validate_tensor(t, f"{where} indices[{k!r}]", integer=True)
    defined = set(inputs) | set(indices)
    if len(defined) != len(inputs) + len(indices):
        raise _bad(where, "a name is both an input and an index")
    program = case["program"]
    if not isinstance(program, list):
        raise _bad(where, "'program' must be a list of steps")
    for j, step in enumerate(program):
        sw = f"{where} program step {j}"
        if not isinstance(step, dict):
            raise _bad(sw, "a step must be an object")
        for key in ("out", "op", "args", "attrs"):
            if key not in step:
                raise _bad(sw, f"missing {key!r}")
        if not isinstance(step["out"], str) or not isinstance(step["op"], str):
            raise _bad(sw, "'out' and 'op' must be strings")
        if not isinstance(step["args"], list) or not isinstance(step["attrs"], dict):
            raise _bad(sw, "'args' must be a list and 'attrs' an object")
        for a in step["args"]:
            if a not in defined:
                raise _bad(sw, f"argument {a!r} is not an input, an index or an earlier step's output")
        defined.add(step["out"])
    if case["output"] not in defined:
        raise _bad(where, f"'output' {case['output']!r} is never defined")
    expect = case["expect"]
    if not isinstance(expect, dict):
        raise _bad(where, "'expect' must be an object")
    for key in ("value", "grad_output", "grads"):
        if key not in expect:
            raise _bad(where, f"'expect' is missing {key!r}")
    _validate_tensor(expect["value"], f"{where} expect.value")
    _validate_tensor(expect["grad_output"], f"{where} expect.grad_output")
    if expect["grad_output"]["shape"] != expect["value"]["shape"]:
        raise _bad(where, f"grad_output shape {expect['grad_output']['shape']} differs from the value's "
                          f"shape {expect['value']['shape']}")
    if not isinstance(expect["grads"], dict):
        raise _bad(where, "'expect.grads' must be an object")
    for k, t in expect["grads"].items():
        if k not in inputs:
            raise _bad(where, f"expect.grads names {k!r}, which is not a float input")
        _validate_tensor(t, f"{where} expect.grads[{k!r}]")
    for kind in ("hessian", "jacobian"):
        if kind in expect:
            entry = expect[kind]
            if not isinstance(entry, dict) or entry.get("wrt") not in inputs:
                raise _bad(where, f"expect.{kind} must name an input in 'wrt'")
            _validate_tensor(entry, f"{where} expect.{kind}")
            if len(entry["shape"]) != 2:
                raise _bad(where, f"expect.{kind} must be a matrix, got shape {entry['shape']}")
    tol = case["tol"]
    if not isinstance(tol, dict) or not all(isinstance(tol.get(k), int | float) and not isinstance(tol.get(k), bool)
                                            and tol[k] >= 0 for k in ("rtol", "atol")):
        raise _bad(where, "'tol' must hold non-negative numbers 'rtol' and 'atol'")


# -- the op table: FORMAT.md op name -> a call of the engine's public API ------------------------------------
def _method(x: Any, name: str) -> Callable[..., Any]:
    """`x.name`, or UnsupportedOp when the engine does not define it."""
    fn = getattr(x, name, None)
    if fn is None or not callable(fn):
        raise UnsupportedOp(name)
    return fn


def _function(name: str) -> Callable[..., Any]:
    """A module-level function of the engine's public API: rtxviz, rtxviz.nn.functional, the op modules."""
    import importlib

    import rtxviz
    from rtxviz.engine import ops

    candidates: list[Any] = [rtxviz]
    for mod in ("rtxviz.nn.functional", "rtxviz.nn", "rtxviz.functional"):
        try:
            candidates.append(importlib.import_module(mod))
        except ImportError:
            pass
    candidates.append(ops)
    for modname in sorted(n for n in vars(ops) if not n.startswith("_")):
        sub = getattr(ops, modname)
        if inspect.ismodule(sub):
            candidates.append(sub)
    for mod in candidates:
        fn = getattr(mod, name, None)
        if fn is not None and callable(fn) and not inspect.isclass(fn) and not inspect.ismodule(fn):
            return fn
    from rtxviz import Tensor

    fn = getattr(Tensor, name, None)
    if fn is not None and callable(fn):
        return fn
    raise UnsupportedOp(name)


def _binary(name: str) -> Callable[[list, dict], Any]:
    return lambda a, at: _method(a[0], name)(a[1])


def _unary(name: str) -> Callable[[list, dict], Any]:
    return lambda a, at: _method(a[0], name)()


def _reduce(name: str) -> Callable[[list, dict], Any]:
    return lambda a, at: _method(a[0], name)(dim=at.get("dims"), keepdim=bool(at.get("keepdim", False)))


def _values(result: Any) -> Any:
    """max/min with a dim return (values, indices) in PyTorch: keep the values."""
    if isinstance(result, tuple):
        return result[0]
    return getattr(result, "values", result) if not hasattr(result, "data") else result


def _extremum(name: str) -> Callable[[list, dict], Any]:
    def call(a: list, at: dict) -> Any:
        fn = _method(a[0], name)
        if at.get("dim") is None:
            return _values(fn())
        return _values(fn(dim=at["dim"], keepdim=bool(at.get("keepdim", False))))

    return call


def _embedding(a: list, at: dict) -> Any:
    """F.embedding is (input, weight) in PyTorch, the format's args are (weight, indices): bind by name."""
    weight, ids = a
    fn = _function("embedding")
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    if params and params[0] in ("weight", "table", "w", "self"):
        return fn(weight, ids)
    return fn(ids, weight)


def _index_select(a: list, at: dict) -> Any:
    return _method(a[0], "index_select")(at["dim"], a[1])


def _layer_norm(a: list, at: dict) -> Any:
    x, weight, bias = (list(a) + [None, None])[:3]
    return _function("layer_norm")(x, list(at["normalized_shape"]), weight=weight, bias=bias,
                                   eps=at.get("eps", 1e-5))


def _conv2d(a: list, at: dict) -> Any:
    x, weight = a[0], a[1]
    bias = a[2] if len(a) > 2 else None
    return _function("conv2d")(x, weight, bias, stride=at.get("stride", 1), padding=at.get("padding", 0))


def _pool(name: str) -> Callable[[list, dict], Any]:
    def call(a: list, at: dict) -> Any:
        return _function(name)(a[0], at["kernel_size"], stride=at.get("stride"))

    return call


def _loss(name: str) -> Callable[[list, dict], Any]:
    return lambda a, at: _function(name)(a[0], a[1], reduction=at.get("reduction", "mean"))


#: Every op of FORMAT.md: (args as engine values in order, attrs) -> the engine's result.
OP_TABLE: dict[str, Callable[[list, dict], Any]] = {
    **{n: _binary(n) for n in ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "matmul")},
    **{n: _unary(n) for n in ("neg", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "silu", "softplus",
                              "sin", "cos", "square", "reciprocal")},
    "gelu": lambda a, at: _method(a[0], "gelu")(approximate=at.get("approximate", "none")),
    "leaky_relu": lambda a, at: _method(a[0], "leaky_relu")(negative_slope=at.get("negative_slope", 0.01)),
    "elu": lambda a, at: _method(a[0], "elu")(alpha=at.get("alpha", 1.0)),
    "clamp": lambda a, at: _method(a[0], "clamp")(min=at.get("min"), max=at.get("max")),
    "add_scalar": lambda a, at: _method(a[0], "add_scalar")(at["value"]),
    "mul_scalar": lambda a, at: _method(a[0], "mul_scalar")(at["value"]),
    "pow_scalar": lambda a, at: _method(a[0], "pow_scalar")(at["exponent"]),
    **{n: _reduce(n) for n in ("sum", "mean", "logsumexp")},
    "var": lambda a, at: _method(a[0], "var")(dim=at.get("dims"), keepdim=bool(at.get("keepdim", False)),
                                              correction=at.get("correction", 1)),
    "max": _extremum("max"),
    "min": _extremum("min"),
    "reshape": lambda a, at: _method(a[0], "reshape")(tuple(at["shape"])),
    "transpose": lambda a, at: _method(a[0], "transpose")(at["dim0"], at["dim1"]),
    "permute": lambda a, at: _method(a[0], "permute")(*at["dims"]),
    "narrow": lambda a, at: _method(a[0], "narrow")(at["dim"], at["start"], at["length"]),
    "expand": lambda a, at: _method(a[0], "expand")(tuple(at["shape"])),
    "squeeze": lambda a, at: (_method(a[0], "squeeze")() if at.get("dim") is None
                              else _method(a[0], "squeeze")(at["dim"])),
    "unsqueeze": lambda a, at: _method(a[0], "unsqueeze")(at["dim"]),
    "cat": lambda a, at: _function("cat")(list(a), dim=at.get("dim", 0)),
    "stack": lambda a, at: _function("stack")(list(a), dim=at.get("dim", 0)),
    "index_select": _index_select,
    "softmax": lambda a, at: _method(a[0], "softmax")(at["dim"]),
    "log_softmax": lambda a, at: _method(a[0], "log_softmax")(at["dim"]),
    "layer_norm": _layer_norm,
    "mse_loss": _loss("mse_loss"),
    "cross_entropy": _loss("cross_entropy"),
    "embedding": _embedding,
    "conv2d": _conv2d,
    "max_pool2d": _pool("max_pool2d"),
    "avg_pool2d": _pool("avg_pool2d"),
}


def dispatch(op: str, args: Sequence[Any], attrs: dict) -> Any:
    """Run one program step. Ops outside the table are tried as a method of the first argument, then as a
    function of the engine (tensor args positional, attrs as keywords), so a newer file's op works when the
    engine spells it the PyTorch way; otherwise UnsupportedOp."""
    entry = OP_TABLE.get(op)
    if entry is not None:
        return entry(list(args), attrs)
    if args and callable(getattr(args[0], op, None)):
        return getattr(args[0], op)(*args[1:], **attrs)
    return _function(op)(*args, **attrs)


# -- running one case -----------------------------------------------------------------------------------------
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


class _Case:
    """One case bound to a dtype and device: builds inputs, runs the program, differentiates."""

    def __init__(self, case: dict, dtype: str, device: Any) -> None:
        self.case = case
        self.dtype = np.dtype(dtype)
        self.device = device

    def _tensor(self, t: dict, dtype: Any) -> Any:
        from rtxviz import Tensor

        return Tensor.from_slice(np.asarray(t["data"], dtype=dtype).reshape(-1), t["shape"], self.device, dtype=dtype)

    def leaves(self) -> dict[str, Any]:
        from rtxviz import Variable

        return {k: Variable.from_tensor(self._tensor(t, self.dtype), requires_grad=True, name=k)
                for k, t in self.case["inputs"].items()}

    def indices(self) -> dict[str, Any]:
        return {k: self._tensor(t, np.int64) for k, t in self.case.get("indices", {}).items()}

    def run(self, env: dict[str, Any]) -> Any:
        for step in self.case["program"]:
            args = [env[a] for a in step["args"]]
            try:
                env[step["out"]] = dispatch(step["op"], args, step["attrs"])
            except UnsupportedOp:
                raise UnsupportedOp(step["op"]) from None
        return env[self.case["output"]]

    def function_of(self, wrt: str) -> Callable[[Any], Any]:
        """The program as a function of one input (the others fixed): what Hessians and Jacobians take."""
        leaves, idx = self.leaves(), self.indices()

        def f(x: Any) -> Any:
            env = {**leaves, **idx, wrt: x}
            return self.run(env)

        return f


def _own_hessian(f: Callable[[Any], Any], x: Any) -> np.ndarray:
    """Rows of d(df/dx)/dx by vector-Jacobian products of the first gradient (create_graph=True)."""
    import rtxviz

    out = f(x)
    if out.data.size != 1:
        raise ValueError(f"hessian: the output must have one element, got shape {tuple(out.shape)}")
    (g,) = rtxviz.grad(out, x, create_graph=True)
    return _rows(g, x)


def _rows(y: Any, x: Any) -> np.ndarray:
    """The Jacobian dy/dx as a (y.numel, x.numel) matrix, one backward per row."""
    import rtxviz
    from rtxviz import Tensor

    m, n = int(y.data.size), int(x.data.size)
    jac = np.zeros((m, n))
    if not getattr(y, "requires_grad", False):
        return jac  # y does not depend on x at all
    xp = y.xp
    for i in range(m):
        seed = xp.zeros(m, dtype=y.data.dtype)
        seed[i] = 1
        (row,) = rtxviz.grad(y, x, grad_outputs=Tensor._wrap(seed.reshape(y.shape)), retain_graph=True,
                             allow_unused=True)
        if row is not None:
            jac[i] = _numpy(row).reshape(-1)
    return jac


def _own_jacobian(f: Callable[[Any], Any], x: Any) -> np.ndarray:
    return _rows(f(x), x)


def _higher_order(kind: str, f: Callable[[Any], Any], x: Any) -> Any:
    """Use rtxviz.engine.functional's HessianComputer / JacobianComputer when it exists, else our own rows."""
    try:
        from rtxviz.engine import functional
    except ImportError:
        functional = None
    computer = getattr(functional, "HessianComputer" if kind == "hessian" else "JacobianComputer", None)
    if computer is not None:
        return computer.compute(f, x)
    return _own_hessian(f, x) if kind == "hessian" else _own_jacobian(f, x)


def run_case(case: dict, dtype: str = "float64", device: Any = None) -> CaseResult:
    """Run one case; never raises for engine errors (they become a failing result with the error text)."""
    from rtxviz import Tensor

    name = case["name"]
    tol = case["tol"]
    rtol, atol = float(tol["rtol"]), float(tol["atol"])
    if np.dtype(dtype) == np.float32:
        rtol, atol = max(rtol, FLOAT32_RTOL), max(atol, FLOAT32_ATOL)
    expect = case["expect"]
    runner = _Case(case, dtype, device)
    checks: list[Mismatch] = []
    stage = "forward"
    try:
        leaves = runner.leaves()
        out = runner.run({**leaves, **runner.indices()})
        checks.append(_compare("value", out, _array(expect["value"], np.float64), rtol, atol))
        stage = "backward"
        g_out = Tensor.from_slice(np.asarray(expect["grad_output"]["data"], dtype=runner.dtype),
                                  expect["grad_output"]["shape"], device, dtype=runner.dtype)
        out.backward(g_out)
        for k, t in expect["grads"].items():
            got = leaves[k].grad
            want = _array(t, np.float64)
            if got is None:  # an input the output does not depend on has gradient zero
                got = np.zeros_like(want)
            checks.append(_compare(f"grads[{k}]", got, want, rtol, atol))
        for kind in ("hessian", "jacobian"):
            if kind not in expect:
                continue
            stage = kind
            entry = expect[kind]
            wrt = entry["wrt"]
            x = runner.leaves()[wrt]
            try:
                got = _higher_order(kind, runner.function_of(wrt), x)
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


# -- command line -------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """`python -m rtxviz.conformance FILE... [--dtype float32|float64] [--device cpu|cuda] [--verbose]`."""
    parser = argparse.ArgumentParser(prog="python -m rtxviz.conformance",
                                     description="Check rtxviz against rtx-reference/1 files computed by PyTorch.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="reference files (rtx-reference/1 JSON)")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                        help="dtype of the inputs (float32 compares with rtol 1e-4, atol >= 1e-5)")
    parser.add_argument("--device", default=None, help="cpu (default) or cuda / cuda:N")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="also print passing cases with their worst error")
    args = parser.parse_args(argv)

    docs = []
    for f in args.files:  # validate every file before running anything: a malformed file is a usage error
        try:
            docs.append((f, load_file(f)))
        except MalformedFileError as exc:
            print(f"error: malformed reference file {exc}", file=sys.stderr)
            return 2
    device = None
    if args.device is not None:
        from rtxviz import Device

        device = Device.cpu() if args.device == "cpu" else Device.cuda(int(args.device.partition(":")[2] or 0))
    passed = failed = 0
    for f, doc in docs:
        for case in doc["cases"]:
            r = run_case(case, args.dtype, device)
            label = f"{case['name']}" if len(docs) == 1 else f"{Path(f).name}:{case['name']}"
            if r.passed:
                passed += 1
                if args.verbose:
                    w = r.worst
                    print(f"ok   {label}" + (f": {w.describe()}" if w is not None else ""))
            else:
                failed += 1
                print(f"FAIL {label}: {r.message}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
