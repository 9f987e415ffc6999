"""A linear layer's bias add and a bias gradient's sum over rows through the compiled kernels
(rtxviz/_native.c `add_row`, `sum_rows`): bit for bit numpy's `x += b` and `x.sum(axis=0)` (row order for
m >= 2 columns), what they decline left to numpy (one column, where numpy sums pairwise; other layouts and
formats), and Linear / Sum giving the same values and gradients with and without them."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rtxviz import Variable, accel
from rtxviz.engine.ops import linalg, reduction
from rtxviz.nn import functional as F

REQUIRED = os.environ.get("RTXVIZ_REQUIRE_NATIVE") == "1"  # a build that must have the kernels: no skipping
needs_native = pytest.mark.skipif((accel.add_row is None or accel.sum_rows is None) and not REQUIRED,
                                  reason="rtxviz._native is not built")


@pytest.fixture(autouse=True)
def _quiet_fp() -> object:
    with np.errstate(all="ignore"):  # inf - inf on purpose
        yield


def _values(shape: tuple, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 1e3).astype(dtype)  # large, so that the order of additions shows
    flat = a.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, np.finfo(dtype).tiny / 4], dtype=dtype)
    flat[: min(flat.size, specials.size)] = specials[: flat.size]
    return a


@needs_native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 2), (8, 32), (9, 3), (33, 65), (200, 2), (5000, 7)])
def test_sum_rows_equals_numpy_bit_for_bit(dtype, shape) -> None:
    x = _values(shape, dtype, 1)
    x[-1, -1] = -0.0
    x[:, -1] = -0.0  # a column of negative zeros sums to -0.0
    out = np.empty(shape[1], dtype)
    assert accel.sum_rows(x, out) is True
    assert out.tobytes() == np.add.reduce(x, axis=0).tobytes()


@needs_native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1,), (7,), (8, 32), (3, 4, 5)])
def test_add_row_equals_numpy_bit_for_bit(dtype, shape) -> None:
    x, b = _values(shape, dtype, 2), _values(shape[-1:], dtype, 3)
    want = x.copy()
    want += b
    assert accel.add_row(x, b) is True
    assert x.tobytes() == want.tobytes()


@needs_native
def test_row_kernels_decline_what_they_cannot_take() -> None:
    x = _values((8, 4), "float32", 4)
    out = np.full(4, 7.0, np.float32)
    for args in [(x[:, :1].copy(), np.empty(1, np.float32)),  # one column: numpy sums pairwise
                 (x.T, out), (x, out.astype(np.float64)), (x, np.empty(3, np.float32)),
                 (x.astype(np.int32), out.astype(np.int32)), (np.empty((0, 4), np.float32), out), (x[0], out)]:
        assert accel.sum_rows(*args) is False
    assert out.tolist() == [7.0] * 4
    before = x.copy()
    for args in [(x, np.ones(3, np.float32)), (x, np.ones(4)), (x.T, np.ones(8, np.float32)),
                 (x, np.ones((1, 4), np.float32)), (x[0], x[0])]:
        assert accel.add_row(*args) is False
    assert x.tobytes() == before.tobytes()
    with pytest.raises(TypeError, match="sum_rows"):
        accel.sum_rows(x)
    with pytest.raises(TypeError, match="add_row"):
        accel.add_row(x)


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("shape", [(8, 16), (8, 1), (3, 2, 16), (16,)])
def test_linear_forward_and_gradients_equal_numpy_formulas(shape, native, monkeypatch) -> None:
    """F.linear's output and its bias and weight gradients equal x @ Wᵀ + b, Σ_rows dY and dYᵀ @ X computed with
    numpy, bit for bit, with the kernels and without them (a one-column output and a 1-D input included)."""
    if native and (accel.add_row is None or accel.sum_rows is None) and not REQUIRED:
        pytest.skip("rtxviz._native is not built")
    if not native:
        monkeypatch.setattr(linalg, "_add_row", None)
        monkeypatch.setattr(reduction, "_sum_rows", None)
    n_out = 1 if shape == (8, 1) else 5
    n_in = shape[-1]
    x = Variable(_values(shape, "float32", 5) / 1e3)
    w = Variable(_values((n_out, n_in), "float32", 6) / 1e3, requires_grad=True)
    b = Variable(_values((n_out,), "float32", 7) / 1e3, requires_grad=True)
    y = F.linear(x, w, b)
    want = x.data @ w.data.T
    want += b.data
    assert y.data.tobytes() == want.tobytes()
    g = _values(y.shape, "float32", 8) / 1e3
    y.backward(Variable(g))
    g2 = g.reshape(-1, n_out)
    assert b.grad.data.tobytes() == np.add.reduce(g2, axis=0).tobytes()
    assert w.grad.data.tobytes() == (g2.T @ x.data.reshape(-1, n_in)).tobytes()
