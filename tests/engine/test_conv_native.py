"""The convolutions' lowering: the compiled col2im (rtxviz/_native.c `col2im_wide`) against its numpy path, bit
for bit (the same additions in the same order), through every op that runs it (conv2d's input gradient,
conv_transpose2d, conv1d's input gradient; padding, dilation, groups, float32 and float64); and the row layout
of the im2col columns (conv2d with c·kh·kw >= 32) against the channel-major one, forward and weight gradient.
The op harness checks all of these paths against PyTorch's numbers and finite differences."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from rtxviz import Tensor, Variable, accel
from rtxviz.engine import grad
from rtxviz.engine.ops import nn_conv
from rtxviz.engine.ops.nn_conv import conv1d, conv2d, conv_transpose2d

needs_native = pytest.mark.skipif(
    accel.col2im_wide is None and os.environ.get("RTXVIZ_REQUIRE_NATIVE") != "1",
    reason="rtxviz._native is not built (python setup.py build_ext --inplace)",
)

CASES = [  # (x shape, w shape, conv2d kwargs)
    ((4, 16, 14, 14), (32, 16, 3, 3), {"padding": 1}),  # conv_train's second convolution, smaller batch
    ((2, 3, 9, 7), (5, 3, 3, 2), {"padding": (2, 0), "dilation": (2, 3)}),
    ((2, 4, 6, 6), (6, 2, 3, 3), {"padding": 1, "groups": 2}),
    ((1, 1, 5, 8), (2, 1, 1, 4), {}),
]


def _conv_grads(x: np.ndarray, w: np.ndarray, kw: dict) -> tuple[np.ndarray, ...]:
    xv, wv = Variable(Tensor(x), requires_grad=True), Variable(Tensor(w), requires_grad=True)
    y = conv2d(xv, wv, **kw)
    g = np.random.default_rng(7).standard_normal(y.shape).astype(x.dtype)
    dx, dw = grad([y], [xv, wv], [Tensor(g)])
    return y.data, dx.data, dw.data


def _without(monkeypatch: pytest.MonkeyPatch, fn: Any) -> Any:
    with monkeypatch.context() as m:
        m.setattr(accel, "col2im_wide", None)
        return fn()


@needs_native
@pytest.mark.parametrize("xs, ws, kw", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_col2im_is_the_numpy_path_bit_for_bit(xs: tuple, ws: tuple, kw: dict, dtype: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    got = _conv_grads(x, w, kw)
    expected = _without(monkeypatch, lambda: _conv_grads(x, w, kw))
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a, b)


@needs_native
def test_conv_transpose2d_and_conv1d_take_the_compiled_col2im_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 4, 5, 6)), rng.standard_normal((4, 3, 3, 3))
    got = conv_transpose2d(Tensor(x), Tensor(w), padding=1, dilation=2).data
    np.testing.assert_array_equal(got, _without(monkeypatch, lambda: conv_transpose2d(
        Tensor(x), Tensor(w), padding=1, dilation=2).data))
    x1, w1 = rng.standard_normal((3, 2, 11)), rng.standard_normal((4, 2, 3))

    def grad_1d() -> np.ndarray:
        xv = Variable(Tensor(x1), requires_grad=True)
        (dx,) = grad([conv1d(xv, Tensor(w1), padding=2).sum()], [xv])
        return dx.data

    np.testing.assert_array_equal(grad_1d(), _without(monkeypatch, grad_1d))


@needs_native
def test_col2im_refuses_a_geometry_or_size_it_would_read_past() -> None:
    from rtxviz import _native

    cols = np.zeros((2 * 9 * 1 * 4 * 6,), dtype=np.float32)  # c=2, 3x3, n=1, ho=4, wp=6
    dx = np.empty((1, 2, 4, 4), dtype=np.float32)
    _native.col2im_wide(cols, dx, 2, 1, 4, 4, 6, 6, 1, 1, 3, 3, 1, 1, 4)  # consistent: accepted
    with pytest.raises(ValueError, match="bad geometry"):
        _native.col2im_wide(cols, dx, 2, 1, 4, 4, 6, 6, 1, 1, 3, 3, 1, 1, 5)  # ho inconsistent with the kernel
    with pytest.raises(ValueError, match="cols has 432 elements, expected 864"):
        _native.col2im_wide(cols, dx, 4, 1, 4, 4, 6, 6, 1, 1, 3, 3, 1, 1, 4)
    with pytest.raises(TypeError, match="another float type"):
        _native.col2im_wide(cols, dx.astype(np.float64), 2, 1, 4, 4, 6, 6, 1, 1, 3, 3, 1, 1, 4)


@pytest.mark.parametrize("stride, dilation", [((1, 1), (1, 1)), ((2, 1), (1, 2))])
def test_row_layout_matches_the_channel_major_layout(stride: tuple, dilation: tuple,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # c·kh·kw = 36 takes the row layout; raising the threshold sends the same convolution channel-major
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((3, 4, 9, 8)), rng.standard_normal((5, 4, 3, 3))
    kw = {"padding": 1, "stride": stride, "dilation": dilation}
    got = _conv_grads(x, w, kw)
    with monkeypatch.context() as m:
        m.setattr(nn_conv, "_ROWS_FROM", 10**9)
        expected = _conv_grads(x, w, kw)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_row_layout_is_what_forward_keeps_for_the_weight_gradient() -> None:
    pl = nn_conv.Plan((2, 4, 6, 6), (5, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    _, cols = nn_conv._conv_forward(pl, np.zeros((2, 4, 6, 6)), np.zeros((5, 4, 3, 3)))
    assert cols.shape == (2 * 6 * 6, 3 * 3 * 4)  # [n·ho·wo, kh·kw·c]
