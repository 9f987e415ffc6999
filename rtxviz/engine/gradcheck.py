"""Gradient checking: analytical gradients against central differences in float64.

`GradientChecker(epsilon).check(f, x, analytical_grad)` is the spec's checker for a scalar function;
`gradcheck(f, inputs)` compares the whole Jacobian of f (any number of inputs and outputs) computed by
backward with the numerical one, and `gradgradcheck` does the same for the gradient itself (second order).
Each returns a `GradCheckResult`: truthy when every element agrees within `atol + rtol·|numerical|`, and
naming the worst element (where it is, both values, the error) either way.

>>> from rtxviz import Tensor
>>> x = Tensor.from_slice([1.0, -2.0, 0.5], [3], dtype="float64")
>>> checker = GradientChecker(1e-6)
>>> bool(checker.check(lambda t: t.pow(3).sum(), x, 3 * x.numpy() ** 2))
True
>>> bad = checker.check(lambda t: t.pow(3).sum(), x, 2 * x.numpy() ** 2)
>>> bool(bad), bad.index
(False, (1,))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backward import grad
from .errors import DTypeError, ShapeError
from .grad_mode import enable_grad, no_grad
from .tensor import Tensor
from .variable import Variable


@dataclass
class GradCheckResult:
    """The outcome of a check. `bool(result)` is whether it passed; the worst element is always named.

    `index` is the worst element's position (for `check`: in x; for `gradcheck`: (output k, its element,
    input i, its element)), `analytical`/`numerical` its two values, `error` = |analytical - numerical|.
    """

    ok: bool
    where: str
    index: tuple
    analytical_value: float
    numerical_value: float
    error: float
    atol: float
    rtol: float
    analytical: list[np.ndarray] = field(default_factory=list, repr=False)
    numerical: list[np.ndarray] = field(default_factory=list, repr=False)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        verdict = "gradients match" if self.ok else "gradient mismatch"
        return (f"{verdict}; worst element {self.where}: analytical {self.analytical_value:.10g}, "
                f"numerical {self.numerical_value:.10g}, error {self.error:.3g} "
                f"(allowed {self.atol:g} + {self.rtol:g}·|numerical|)")


class GradCheckError(AssertionError):
    """Raised by gradcheck(..., raise_exception=True) when a gradient is wrong; carries the result."""

    def __init__(self, result: GradCheckResult) -> None:
        super().__init__(str(result))
        self.result = result


def _require_float64(t: Any, where: str, what: str) -> None:
    if t.dtype != np.float64:
        raise DTypeError(
            f"{where}: {what} is {t.dtype}; central differences need float64 (with eps around 1e-6, float32 "
            "rounding swamps the difference). Convert it with .to(dtype='float64')"
        )


def _host(a: Any) -> np.ndarray:
    a = a.data if isinstance(a, Tensor) else a
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def _worst(pairs: list[tuple[np.ndarray, np.ndarray]], atol: float, rtol: float) -> tuple[int, int, float]:
    """(which pair, flat index, ratio) of the element with the largest |a - n| / (atol + rtol·|n|)."""
    best = (0, 0, -1.0)
    for k, (a, n) in enumerate(pairs):
        if a.size == 0:
            continue
        ratio = np.abs(a - n) / (atol + rtol * np.abs(n))
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
        j = int(np.argmax(ratio))
        if ratio.flat[j] > best[2]:
            best = (k, j, float(ratio.flat[j]))
    return best


class GradientChecker:
    """The spec's checker: `GradientChecker(epsilon).check(f, x, analytical_grad)`.

    f maps a Tensor to a Tensor (a one-element one, or its sum is used); x must be float64.
    """

    def __init__(self, epsilon: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3) -> None:
        self.epsilon, self.atol, self.rtol = float(epsilon), float(atol), float(rtol)

    def numerical_grad(self, f: Callable[[Tensor], Tensor], x: Any) -> np.ndarray:
        """d sum(f(x)) / dx by central differences, one element at a time."""
        base = np.array(_host(x), dtype=np.float64)
        _require_float64(base, "GradientChecker", "x")
        out = np.empty_like(base)
        flat, gflat, eps = base.reshape(-1), out.reshape(-1), self.epsilon
        with no_grad():
            for i in range(flat.size):
                orig = flat[i]
                flat[i] = orig + eps
                hi = float(_host(f(Tensor(base.copy()))).sum())
                flat[i] = orig - eps
                lo = float(_host(f(Tensor(base.copy()))).sum())
                flat[i] = orig
                gflat[i] = (hi - lo) / (2 * eps)
        return out

    def check(self, f: Callable[[Tensor], Tensor], x: Any, analytical_grad: Any = None) -> GradCheckResult:
        """Compare `analytical_grad` (or, when None, the engine's own backward) with central differences.

        >>> from rtxviz import Tensor
        >>> x = Tensor.from_slice([0.3, 0.7], [2], dtype="float64")
        >>> bool(GradientChecker().check(lambda t: (t.sin() * t).sum(), x))
        True
        """
        xt = x if isinstance(x, Tensor) else Tensor(np.asarray(x))
        _require_float64(xt, "GradientChecker.check", "x")
        if analytical_grad is None:
            leaf = Variable.from_tensor(xt.tensor)
            with enable_grad():
                y = f(leaf)
                (g,) = grad(y.sum(), leaf, allow_unused=True)
            ana = np.zeros(xt.shape) if g is None else _host(g)
        else:
            ana = np.asarray(_host(analytical_grad), dtype=np.float64)
        if ana.shape != xt.shape:
            raise ShapeError(f"GradientChecker.check: analytical_grad has shape {ana.shape}, x has {xt.shape}")
        num = self.numerical_grad(f, xt)
        _, j, ratio = _worst([(ana, num)], self.atol, self.rtol)
        where = np.unravel_index(j, ana.shape) if ana.shape else ()
        idx = tuple(int(i) for i in where)
        a, n = float(ana.reshape(-1)[j]), float(num.reshape(-1)[j])
        return GradCheckResult(ok=ratio <= 1.0, where=f"x{list(idx)}", index=idx, analytical_value=a,
                               numerical_value=n, error=abs(a - n), atol=self.atol, rtol=self.rtol,
                               analytical=[ana], numerical=[num])


# -- gradcheck / gradgradcheck over several inputs and outputs ------------------------------------------------
def _as_outputs(y: Any) -> list[Any]:
    return [y] if isinstance(y, Tensor) or y is None else list(y)


def _prepare(inputs: Any, where: str) -> tuple[list[Any], list[int]]:
    items = [inputs] if isinstance(inputs, Tensor | np.ndarray) else list(inputs)
    values, diff = [], []
    for i, v in enumerate(items):
        arr = np.array(_host(v))
        if arr.dtype.kind == "f":
            _require_float64(arr, where, f"input {i}")
            diff.append(i)
        values.append(arr)
    if not diff:
        raise DTypeError(f"{where}: no floating-point input to differentiate")
    return values, diff


def _leaves(values: list[np.ndarray], diff: list[int]) -> list[Any]:
    return [Variable.from_tensor(Tensor(v.copy())) if i in diff else Tensor(v) for i, v in enumerate(values)]


def _flat_outputs(f: Callable[..., Any], values: list[np.ndarray], diff: list[int]) -> list[np.ndarray]:
    with enable_grad():  # f may itself differentiate (gradgradcheck), so inputs stay Variables
        outs = _as_outputs(f(*_leaves(values, diff)))
    return [np.zeros(0) if o is None else np.array(_host(o), dtype=np.float64).reshape(-1) for o in outs]


def _jacobians(f: Callable[..., Any], values: list[np.ndarray], diff: list[int], eps: float) -> tuple:
    """Analytical (one backward per output element) and numerical Jacobians, per (output, input) pair,
    and the output shapes."""
    leaves = _leaves(values, diff)
    dleaves = [leaves[i] for i in diff]
    with enable_grad():
        outs = _as_outputs(f(*leaves))
        analytical = []
        for o in outs:
            size = 0 if o is None else int(o.data.size)
            per_in = [np.zeros((size, values[i].size)) for i in diff]
            if o is not None and o.requires_grad:
                seed = np.zeros(o.shape, dtype=o.dtype)
                for j in range(size):
                    seed.reshape(-1)[j] = 1.0
                    gs = grad(o, dleaves, grad_outputs=Tensor(seed.copy()), retain_graph=True, allow_unused=True)
                    seed.reshape(-1)[j] = 0.0
                    for k, g in enumerate(gs):
                        if g is not None:
                            per_in[k][j] = _host(g).reshape(-1)
            analytical.append(per_in)
    numerical = [[np.zeros_like(a) for a in per_in] for per_in in analytical]
    for k, i in enumerate(diff):
        flat = values[i].reshape(-1)
        for e in range(flat.size):
            orig = flat[e]
            flat[e] = orig + eps
            hi = _flat_outputs(f, values, diff)
            flat[e] = orig - eps
            lo = _flat_outputs(f, values, diff)
            flat[e] = orig
            for oi in range(len(outs)):
                numerical[oi][k][:, e] = (hi[oi] - lo[oi]) / (2 * eps)
    return analytical, numerical, [(0,) if o is None else tuple(o.shape) for o in outs]


def gradcheck(
    f: Callable[..., Any],
    inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = False,
) -> GradCheckResult:
    """Check d f(*inputs) / d inputs from backward against central differences, element by element.

    `inputs`: one tensor or a sequence; float ones (float64 required) are differentiated, integer ones
    (indices) are passed through. f returns a Variable or a tuple of them. With `raise_exception`, a
    mismatch raises GradCheckError instead of returning a falsy result.

    >>> from rtxviz import Tensor
    >>> a = Tensor.from_slice([1.0, 2.0], [2], dtype="float64")
    >>> b = Tensor.from_slice([0.5, -1.0], [2], dtype="float64")
    >>> bool(gradcheck(lambda x, y: x * y.exp(), [a, b]))
    True
    """
    values, diff = _prepare(inputs, "gradcheck")
    analytical, numerical, out_shapes = _jacobians(f, values, diff, eps)
    pairs, names = [], []
    for oi, (a_row, n_row) in enumerate(zip(analytical, numerical, strict=True)):
        for k, (a, n) in enumerate(zip(a_row, n_row, strict=True)):
            pairs.append((a, n))
            names.append((oi, diff[k]))
    p, j, ratio = _worst(pairs, atol, rtol) if pairs else (0, 0, 0.0)
    if not pairs or pairs[p][0].size == 0:
        return GradCheckResult(True, "(no elements)", (), 0.0, 0.0, 0.0, atol, rtol)
    a, n = pairs[p]
    oi, ii = names[p]
    row, col = np.unravel_index(j, a.shape)
    out_shape = out_shapes[oi]
    o_idx = tuple(int(v) for v in np.unravel_index(int(row), out_shape)) if out_shape else ()
    i_idx = tuple(int(v) for v in np.unravel_index(int(col), values[ii].shape)) if values[ii].shape else ()
    av, nv = float(a[row, col]), float(n[row, col])
    result = GradCheckResult(
        ok=ratio <= 1.0, where=f"d output{oi}{list(o_idx)} / d input{ii}{list(i_idx)}",
        index=(oi, o_idx, ii, i_idx), analytical_value=av, numerical_value=nv, error=abs(av - nv),
        atol=atol, rtol=rtol, analytical=[a for a, _ in pairs], numerical=[n for _, n in pairs])
    if raise_exception and not result:
        raise GradCheckError(result)
    return result


def gradgradcheck(
    f: Callable[..., Any],
    inputs: Any,
    grad_outputs: Sequence[Any] | None = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = False,
    seed: int = 0,
) -> GradCheckResult:
    """Second order: gradcheck of (inputs, v) -> grad(f(inputs), inputs, v, create_graph=True).

    The cotangents v (random, seeded, unless `grad_outputs` is given) are differentiated too, as in
    PyTorch, so the check covers both d²f/dx² · v and the gradient's linearity in v.

    >>> from rtxviz import Tensor
    >>> x = Tensor.from_slice([0.2, -0.4], [2], dtype="float64")
    >>> bool(gradgradcheck(lambda t: (t.tanh() * t).sum(), [x]))
    True
    """
    values, diff = _prepare(inputs, "gradgradcheck")
    with enable_grad():
        outs = _as_outputs(f(*_leaves(values, diff)))
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        vs = [rng.standard_normal(o.shape) for o in outs]
    else:
        vs = [np.array(_host(v), dtype=np.float64) for v in grad_outputs]
    n_in = len(values)

    def first_order(*args: Any) -> tuple:
        xs, cot = args[:n_in], args[n_in:]
        ys = _as_outputs(f(*xs))
        pairs = [(y, c) for y, c in zip(ys, cot, strict=True) if isinstance(y, Variable) and y.requires_grad]
        wrt = [xs[i] for i in diff]
        if not pairs:
            return tuple(None for _ in wrt)
        gs = grad([y for y, _ in pairs], wrt, grad_outputs=[c for _, c in pairs], create_graph=True,
                  allow_unused=True)
        return tuple(gs)

    return gradcheck(first_order, [*values, *vs], eps, atol, rtol, raise_exception)


__all__ = ["GradCheckError", "GradCheckResult", "GradientChecker", "gradcheck", "gradgradcheck"]
