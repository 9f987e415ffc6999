"""max pooling's compiled kernels (rtxviz/_native.c `max_pool2d_forward` / `max_pool2d_scatter`) against the numpy
path of the same ops (tests/engine/test_ops_nn.py and the op harness check that path, and the kernels too, against
PyTorch's numbers and finite differences): the same window maxima bit for bit, the gradient routed to the same
first maximum, over ties, NaN, padding, ceil mode, dilation, overlapping windows and both float types; second
derivatives through the WindowMax the kernel path keeps; wrong sizes refused, not written past."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from rtxviz import Tensor, Variable, accel
from rtxviz.engine import grad
from rtxviz.engine.ops import nn_pool
from rtxviz.engine.ops.nn_pool import max_pool2d

pytestmark = pytest.mark.skipif(
    accel.max_pool2d_forward is None and os.environ.get("RTXVIZ_REQUIRE_NATIVE") != "1",
    reason="rtxviz._native is not built (python setup.py build_ext --inplace)",
)

GEOMETRIES = [
    {"kernel_size": 2},  # the 2x2 stride-2 loops
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (3, 2), "stride": (1, 2), "padding": (1, 0), "dilation": (2, 1)},
    {"kernel_size": 2, "stride": 1, "padding": 1},  # overlapping windows: gradients accumulate
    {"kernel_size": 2, "ceil_mode": True},  # odd sizes: a last window reaching past the input
]


@pytest.fixture
def numpy_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A function that runs `fn` with the compiled kernels switched off."""
    saved = accel.max_pool2d_forward, accel.max_pool2d_scatter

    def run(fn: Any) -> Any:
        monkeypatch.setattr(accel, "max_pool2d_forward", None)
        monkeypatch.setattr(accel, "max_pool2d_scatter", None)
        try:
            return fn()
        finally:
            monkeypatch.setattr(accel, "max_pool2d_forward", saved[0])
            monkeypatch.setattr(accel, "max_pool2d_scatter", saved[1])

    yield run


def _forward_backward(x: np.ndarray, g_seed: int, kw: dict) -> tuple[np.ndarray, np.ndarray]:
    v = Variable(Tensor(x), requires_grad=True)
    y = max_pool2d(v, **kw)
    g = np.random.default_rng(g_seed).standard_normal(y.shape).astype(x.dtype)
    (dx,) = grad([y], [v], [Tensor(g)])
    return y.data, dx.data


@pytest.mark.parametrize("kw", GEOMETRIES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_match_the_numpy_path(kw: dict, dtype: Any, numpy_path: Any) -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (3, 2, 7, 9)).astype(dtype)  # small integers: many tied maxima
    x[0, 0, 0, 0] = np.nan  # a window whose maximum is NaN (and gets no gradient on either path)
    x[1, 1] = np.maximum(x[1, 1], 0)  # relu'd values: windows of zeros only
    y, dx = _forward_backward(x, 0, kw)
    y_np, dx_np = numpy_path(lambda: _forward_backward(x, 0, kw))
    assert y.dtype == dtype and dx.dtype == dtype
    np.testing.assert_array_equal(y, y_np)
    # the same positions get dY; overlapping windows may add in another order (last-bit differences)
    np.testing.assert_allclose(dx, dx_np, rtol=0, atol=4 * float(np.finfo(dtype).eps))


def test_ties_route_the_gradient_to_the_first_maximum_in_row_major_order() -> None:
    x = np.array([[[[1.0, 3.0, 0.0, 0.0], [3.0, 3.0, 0.0, 0.0]]]], dtype=np.float32)
    _, dx = _forward_backward(x, 0, {"kernel_size": 2})
    g = np.random.default_rng(0).standard_normal((1, 1, 1, 2)).astype(np.float32)
    expected = np.zeros_like(x)
    expected[0, 0, 0, 1] = g[0, 0, 0, 0]  # first 3 of the left window
    expected[0, 0, 0, 2] = g[0, 0, 0, 1]  # first 0 of the right one
    np.testing.assert_array_equal(dx, expected)


def test_second_derivative_through_the_kernel_path_matches_the_numpy_path(numpy_path: Any) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 6))

    def hessian_vector() -> np.ndarray:
        v = Variable(Tensor(x), requires_grad=True)
        y = max_pool2d(v, 3, stride=2, padding=1)
        g = Variable(Tensor(np.ones(y.shape)), requires_grad=True)
        (dx,) = grad([y], [v], [g], create_graph=True)
        (dg,) = grad([(dx * Tensor(x)).sum()], [g])  # the gather of x at the argmax positions
        return dg.data

    got = hessian_vector()
    np.testing.assert_array_equal(got, numpy_path(hessian_vector))
    np.testing.assert_array_equal(got, max_pool2d(Tensor(x), 3, stride=2, padding=1).data)


def test_scatter_keeps_the_window_maxima_not_masks() -> None:
    x = np.random.default_rng(2).standard_normal((2, 2, 4, 4)).astype(np.float32)
    attrs = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "input_size": (4, 4)}
    y = nn_pool.MaxPool2d.forward(nn_pool._Attrs(attrs), x)
    ctx = nn_pool._Attrs(attrs)
    nn_pool.MaxPool2dScatter.forward(ctx, np.ones_like(y), x, y)
    assert isinstance(ctx.state, nn_pool.WindowMax) and ctx.state.x is x and ctx.state.best is y


def test_wrong_sizes_are_refused() -> None:
    from rtxviz import _native

    x = np.zeros((2, 3, 4, 4), dtype=np.float32)
    out = np.empty((2, 3, 2, 2), dtype=np.float32)
    geom = (6, 4, 4, 2, 2, 2, 2, 2, 2, 0, 0, 1, 1)
    with pytest.raises(ValueError, match="out has 4 elements, expected 24"):
        _native.max_pool2d_forward(x, out[:1, :1], *geom)
    with pytest.raises(TypeError, match="another float type"):
        _native.max_pool2d_forward(x, out.astype(np.float64), *geom)
    with pytest.raises(ValueError, match="bad geometry"):
        _native.max_pool2d_forward(x, out, 6, 4, 4, 2, 2, 0, 2, 2, 2, 0, 0, 1, 1)
    with pytest.raises(ValueError, match="dx must not be one of the inputs"):
        _native.max_pool2d_scatter(out, x, out, x, *geom)
    with pytest.raises(ValueError, match="C-contiguous|contiguous"):
        _native.max_pool2d_forward(x.transpose(0, 1, 3, 2), out, *geom)
