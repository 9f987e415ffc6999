"""tanh's gradient through the compiled pass (rtxviz/_native.c `tanh_grad`): bit for bit numpy's `g * (1.0 - y*y)`
on every value class (NaN, ±inf, subnormals, |y| > 1), in float32 and float64, and the layouts, shapes and
dtypes it declines left to numpy; the op gives the same gradients with and without the kernel."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rtxviz import Variable, accel
from rtxviz.engine.ops import unary

REQUIRED = os.environ.get("RTXVIZ_REQUIRE_NATIVE") == "1"  # a build that must have the kernels: no skipping
needs_native = pytest.mark.skipif(accel.tanh_grad is None and not REQUIRED, reason="rtxviz._native is not built")


@pytest.fixture(autouse=True)
def _quiet_fp() -> object:
    with np.errstate(all="ignore"):  # inf·0 and friends on purpose: numpy would warn, the kernel does not
        yield


def _values(shape: tuple, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.5, 1.5, shape).astype(dtype)
    flat = a.reshape(-1)
    tiny = np.finfo(dtype).tiny
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, tiny / 8, -tiny / 3, 1.0, -1.0, 1e20], dtype=dtype)
    flat[: min(flat.size, specials.size)] = specials[: flat.size]
    return a


@needs_native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1,), (7,), (67, 65), (3, 4, 5)])
def test_kernel_equals_numpy_bit_for_bit(dtype, shape) -> None:
    g, y = _values(shape, dtype, 1), _values(shape, dtype, 2)
    out = np.empty(shape, dtype)
    assert accel.tanh_grad(g, y, out) is True
    assert out.tobytes() == (g * (1.0 - y * y)).tobytes()


@needs_native
def test_kernel_declines_what_it_cannot_take() -> None:
    g, y = _values((4, 6), "float32", 3), _values((4, 6), "float32", 4)
    for args in [(g.T, y.T, np.empty((6, 4), np.float32)),  # not C-contiguous
                 (g, y.astype(np.float64), np.empty((4, 6), np.float32)),  # mixed formats
                 (g, y[:1], np.empty((4, 6), np.float32)),  # shapes differ (numpy would broadcast)
                 (g.astype(np.float16), y.astype(np.float16), np.empty((4, 6), np.float16)),
                 (g, y, g),  # out is an input
                 (g, y, "not a buffer")]:
        before = None if isinstance(args[2], str) else args[2].copy()
        assert accel.tanh_grad(*args) is False
        if before is not None:
            assert args[2].tobytes() == before.tobytes() or args[2] is g
    with pytest.raises(TypeError, match="tanh_grad"):
        accel.tanh_grad(g, y)


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("case", ["f32", "f64", "scalar", "broadcast_g", "transposed"])
def test_tanh_backward_equals_numpy_formula(case, native, monkeypatch) -> None:
    """x.tanh() backward's gradient equals g·(1 − tanh(x)²) computed here with numpy, bit for bit, whether or not
    the kernel is there; the 0-d, broadcast and transposed cases take numpy's path inside the op."""
    if native and accel.tanh_grad is None and not REQUIRED:
        pytest.skip("rtxviz._native is not built")
    if not native:
        monkeypatch.setattr(unary, "_tanh_grad", None)
    dtype = "float64" if case == "f64" else "float32"
    shape = {"scalar": (), "f32": (9, 33), "f64": (9, 33), "broadcast_g": (5, 3), "transposed": (3, 5)}[case]
    x = Variable(_values(shape, dtype, 5) if shape else np.array(0.3, dtype), requires_grad=True)
    if case == "transposed":
        x = Variable(np.ascontiguousarray(_values((5, 3), dtype, 5)).T, requires_grad=True)
    y = x.tanh()
    if case == "broadcast_g":
        g = None
        y.sum().backward()  # the upstream gradient is a broadcast of one value
        upstream = np.ones(shape, dtype)
    else:
        upstream = _values(shape, dtype, 6) if shape else np.array(0.7, dtype)
        g = Variable(upstream)
        y.backward(g)
    t = np.tanh(x.data)
    want = upstream * (1.0 - t * t)
    assert x.grad.data.dtype == want.dtype and np.asarray(x.grad.data).tobytes() == np.asarray(want).tobytes()
