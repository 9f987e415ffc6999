"""tensor_stats and jsonable against hand-computed numbers, through the compiled kernel and through numpy."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest

from rtxviz.events.fields import jsonable
from rtxviz.summary import count_nonfinite, norm, stats, tensor_stats


@pytest.fixture(autouse=True, params=["native", "numpy"])
def summary_path(request, monkeypatch):
    """Every test here runs twice: with the compiled one-pass kernel (skipped when it was not built) and with
    the numpy fallback a machine without a C compiler gets."""
    if request.param == "native":
        if stats.native_summary is None:
            why = "rtxviz._native is not built (python setup.py build_ext --inplace)"
            if os.environ.get("RTXVIZ_REQUIRE_NATIVE") == "1":  # `make test`, and so CI: a failed compile fails
                pytest.fail(why)
            pytest.skip(why)
    else:
        for name in ("native_summary", "native_stats", "native_all_finite"):  # every compiled kernel it calls
            monkeypatch.setattr(stats, name, None)
    return request.param


def test_stats_of_finite_values():
    s = tensor_stats(np.array([[3.0, -4.0], [0.0, 1.0]], dtype=np.float32), values_max_numel=4)
    assert s["shape"] == [2, 2]
    assert s["norm"] == pytest.approx(math.sqrt(26.0))
    assert (s["min"], s["max"], s["mean"], s["nan"], s["inf"]) == (-4.0, 3.0, 0.0, 0, 0)
    assert s["values"] == [3.0, -4.0, 0.0, 1.0]
    assert "values" not in tensor_stats(np.zeros(5), values_max_numel=4)


def test_stats_count_nan_and_inf_and_keep_finite_extremes():
    s = tensor_stats(np.array([1.0, np.nan, np.inf, -2.0]), values_max_numel=8)
    assert (s["nan"], s["inf"], s["min"], s["max"]) == (1, 1, -2.0, 1.0)
    assert s["norm"] is None and s["mean"] is None
    assert s["values"] == [1.0, None, None, -2.0]


def test_stats_when_only_the_squares_overflow():
    s = tensor_stats(np.array([1e20, -1e20], dtype=np.float32))
    assert s["nan"] == 0 and s["inf"] == 0
    assert s["norm"] == pytest.approx(math.sqrt(2) * 1e20, rel=1e-6)
    assert s["mean"] == pytest.approx(0.0, abs=1e13)


def test_stats_of_ints_empty_and_large():
    assert tensor_stats(np.array([1, 2, 2], dtype=np.int64))["norm"] == pytest.approx(3.0)
    assert tensor_stats(np.zeros((0, 3)))["norm"] == 0.0
    big = np.full(100_000, 0.5, dtype=np.float32)
    s = tensor_stats(big)
    assert s["norm"] == pytest.approx(0.5 * math.sqrt(100_000), rel=1e-5) and s["min"] == s["max"] == 0.5
    if stats.native_summary is not None:
        assert s["mean"] == pytest.approx(0.5, rel=1e-6)
    else:  # numpy path: no fourth pass for the mean of a large tensor
        assert "mean" not in s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mean_of_any_size(dtype):
    # x_i = i: the mean of 0..n-1 is (n-1)/2 (exact in float32 up to 2^24)
    for n in (1, 17, stats.MEAN_MAX_NUMEL_NUMPY, 1025, 4096 * 5 + 3):
        s = tensor_stats(np.arange(n, dtype=dtype))
        if stats.native_summary is None and n > stats.MEAN_MAX_NUMEL_NUMPY:
            assert "mean" not in s  # numpy path: no fourth pass for a large tensor's mean
        else:
            assert s["mean"] == pytest.approx((n - 1) / 2, rel=1e-6)
    # NaN present: the mean is null, the finite extremes stay
    for n in (8, 5000):
        x = np.ones(n, dtype=dtype)
        x[3] = np.nan
        s = tensor_stats(x)
        assert s["mean"] is None and (s["nan"], s["min"], s["max"]) == (1, 1.0, 1.0)
    # float16 whose sum of squares overflows (1000 * 200² > 65504): the careful path still gives the mean
    h = np.full(1000, 200.0, dtype=np.float16)
    assert tensor_stats(h)["mean"] == pytest.approx(200.0)


@pytest.mark.parametrize("n", [4096 * 3, 4096 * 3 + 517, 784 * 512])
def test_stats_of_large_arrays(n):
    # closed forms: x_i = (i mod 7) - 3, a column when n is odd (ravel of a non-1-D array)
    i = np.arange(n)
    x = ((i % 7) - 3).astype(np.float32).reshape(-1, 1) if n % 2 else ((i % 7) - 3).astype(np.float32)
    full, rest = divmod(n, 7)
    sq = full * 28 + sum(((k % 7) - 3) ** 2 for k in range(rest))
    total = full * 0 + sum((k % 7) - 3 for k in range(rest))  # each full period of 7 sums to 0
    s = tensor_stats(x)
    if stats.native_summary is not None:
        assert s["mean"] == pytest.approx(total / n, abs=1e-6)
    else:
        assert "mean" not in s
    assert s["norm"] == pytest.approx(math.sqrt(sq), rel=1e-6)
    assert (s["min"], s["max"], s["nan"], s["inf"]) == (-3.0, 3.0, 0, 0)


@pytest.mark.parametrize("where", [0, 15, 16, 4095, 4096, 9001])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extremes_anywhere_and_infinities(where, dtype):
    # the extreme in any lane, block or the tail; an Inf is counted and taken out of min/max
    x = np.linspace(-1.0, 1.0, 9003).astype(dtype)  # 9003 = 562 lanes of 16 + 11 in the tail
    x[where] = 7.0
    s = tensor_stats(x)
    assert (s["max"], s["min"], s["nan"], s["inf"]) == (7.0, -1.0 if where else x[1], 0, 0)
    x[where] = -np.inf
    s = tensor_stats(x)
    assert (s["inf"], s["nan"], s["norm"], s["mean"]) == (1, 0, None, None)
    assert s["min"] == (-1.0 if where else x[1]) and s["max"] == 1.0


def test_other_layouts_and_dtypes_take_the_numpy_path():
    # big-endian, float16 and non-contiguous arrays: the same numbers as their float64 copies
    base = np.array([[3.0, -4.0, 1.0], [0.5, 2.0, -0.25]])
    for arr in (base.astype(">f4"), base.astype(np.float16), base.T, base[:, ::2].astype(np.float32)):
        s, ref = tensor_stats(arr), tensor_stats(np.ascontiguousarray(arr, dtype=np.float64))
        assert s["norm"] == pytest.approx(ref["norm"], rel=1e-3)
        assert (s["min"], s["max"]) == (ref["min"], ref["max"])
        assert s["mean"] == pytest.approx(ref["mean"], rel=1e-3)


def test_norm_of_small_and_large_arrays():
    assert norm(np.array([3.0, 4.0], dtype=np.float32)) == pytest.approx(5.0)
    assert norm(np.full(1 << 17, 2.0)) == pytest.approx(2.0 * math.sqrt(1 << 17))
    assert norm(np.array([1.0, np.inf])) is None and norm(np.array([3, 4])) == pytest.approx(5.0)


def test_count_nonfinite():
    assert count_nonfinite(np.ones(3)) == (0, 0)
    assert count_nonfinite(np.ones(1 << 17, dtype=np.float32)) == (0, 0)
    big = np.ones(1 << 17, dtype=np.float32)
    big[[5, 77_000]] = [np.nan, np.inf]
    assert count_nonfinite(big) == (1, 1)
    assert count_nonfinite(np.array([np.nan, np.inf, -np.inf, 1.0])) == (1, 2)
    assert count_nonfinite(np.array([1, 2])) == (0, 0)


def test_jsonable_bounds_and_converts():
    assert jsonable((1, np.int64(2), "x" * 300))[:2] == [1, 2]
    assert len(jsonable("x" * 300)) == 201
    assert jsonable(np.zeros((2, 3))) == {"shape": [2, 3], "dtype": "float64"}
    assert len(jsonable(list(range(100)))) == 33
    assert jsonable({"a": {"b": {"c": {"d": 1}}}}) == {"a": {"b": {"c": "{'d': 1}"}}}
    assert jsonable(float("inf")) is None


def _scaled_norm(x: np.ndarray) -> float:
    """‖x‖ computed as m·‖x/m‖ (m = max |x|): finite wherever ‖x‖ is, even when x·x overflows."""
    m = float(np.abs(x).max()) if x.size else 0.0
    return 0.0 if m == 0.0 else m * float(np.sqrt(np.sum((x / m) ** 2)))


def _definition(a: np.ndarray, values_max_numel: int) -> dict:
    """The schema's Stats of `a` written from numpy's float64 definitions, no shortcut: what either path must give
    (norm and mean only when every value is finite; min/max over the finite values; NaN/Inf as null in values)."""
    x = np.asarray(a, dtype=np.float64).ravel()
    fin = np.isfinite(x)
    good = x[fin]
    all_finite = bool(fin.all())
    out = {"shape": list(a.shape), "nan": int(np.isnan(x).sum()), "inf": int(np.isinf(x).sum()),
           "norm": _scaled_norm(x) if all_finite else None,
           "min": float(good.min()) if good.size else None, "max": float(good.max()) if good.size else None,
           "mean": (float(x.mean()) if x.size else None) if all_finite else None}
    if x.size == 0:
        out["norm"] = 0.0
    if 0 < x.size <= values_max_numel:
        out["values"] = [float(v) if math.isfinite(v) else None for v in x]
    return out


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0,), (3, 0), (), (1,), (17,), (4, 5), (4096 + 33,)])
@pytest.mark.parametrize("poison", ["none", "nan", "inf", "-inf", "nan+inf", "all nan", "huge"])
def test_each_path_matches_the_definition(dtype, shape, poison):
    # the fused one-pass kernel and the numpy passes against the float64 definition, on the edge cases where a
    # shortcut could differ: empty and 0-d arrays, NaN/Inf anywhere, nothing finite, squares that overflow
    # (float16: 300² > 65504; float32: 1e20² > 3.4e38) while every value is finite
    rng = np.random.default_rng(sum(shape) + len(poison))
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    if flat.size:
        if poison == "nan":
            flat[-1] = np.nan
        elif poison == "inf":
            flat[0] = np.inf
        elif poison == "-inf":
            flat[flat.size // 2] = -np.inf
        elif poison == "nan+inf":
            flat[0], flat[-1] = np.nan, np.inf  # one element of a 1-element array: the Inf wins
        elif poison == "all nan":
            flat[:] = np.nan
        elif poison == "huge":
            flat[0] = np.finfo(dtype).max / 2 if dtype == np.float64 else (300.0 if dtype == np.float16 else 1e20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow inside a summary must not reach the user as a warning
        got = tensor_stats(a, values_max_numel=32)
    want = _definition(a, 32)
    assert got["shape"] == want["shape"] and (got["nan"], got["inf"]) == (want["nan"], want["inf"])
    assert got["min"] == want["min"] and got["max"] == want["max"]  # exact: min/max round nothing
    # float16 holds about 3 digits; float32 sums run in float32 lanes (added into double totals per block)
    rel = {np.float16: 2e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    if want["norm"] is None:
        assert got["norm"] is None
    elif poison == "huge" and dtype == np.float64:  # ‖x‖ is finite, ‖x‖² is not even in float64: either is fine
        assert got["norm"] is None or got["norm"] == pytest.approx(want["norm"], rel=rel)
    else:
        assert got["norm"] == pytest.approx(want["norm"], rel=rel, abs=1e-30)
    if "mean" in got:  # the numpy path leaves a large tensor's mean out
        if want["mean"] is None:
            assert got["mean"] is None
        else:
            assert got["mean"] == pytest.approx(want["mean"], rel=rel, abs=rel * np.abs(a.astype(np.float64)).max())
    else:
        # only where numpy summarises (no kernel, or float16, which the kernel does not read), and only large
        assert (stats.native_summary is None or a.dtype == np.float16) and flat.size > stats.MEAN_MAX_NUMEL_NUMPY
    assert got.get("values") == want.get("values")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow inside the test must not reach the user as a warning
        assert count_nonfinite(a) == (want["nan"], want["inf"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_count_nonfinite_at_every_position_and_tail(dtype):
    """NaN or ±Inf first, last, or in the tail past the kernel's lanes, at sizes around its lane counts: the
    counts are numpy's own; finite values whose squares overflow (3e38 in float32) count as finite."""
    rng = np.random.default_rng(1)
    for n in (1, 15, 16, 31, 32, 33, 100, 4097, 70_001):
        x = rng.standard_normal(n).astype(dtype)
        assert count_nonfinite(x) == (0, 0)
        for where in {0, n - 1, n // 2}:
            for bad in (np.nan, np.inf, -np.inf):
                y = x.copy()
                y[where] = bad
                assert count_nonfinite(y) == (int(np.isnan(y).sum()), int(np.isinf(y).sum())), (n, where, bad)
    assert count_nonfinite(np.full(1000, np.finfo(dtype).max / 2, dtype=dtype)) == (0, 0)
    assert count_nonfinite(np.ones((4, 6), dtype=dtype)[:, ::2]) == (0, 0)  # not contiguous: the numpy path
    strided = np.ones((4, 6), dtype=dtype)
    strided[1, 2] = np.nan
    assert count_nonfinite(strided[:, ::2]) == (1, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_finite_summary_fields_match_numpy(dtype):
    """The summary dict against numpy computed here in float64, at sizes with and without values."""
    rng = np.random.default_rng(2)
    for shape in [(1,), (16,), (17,), (3, 5), (128, 10), (300, 7)]:
        x = rng.standard_normal(shape).astype(dtype)
        s = tensor_stats(x, values_max_numel=16)
        x64 = x.astype(np.float64)
        assert s["shape"] == list(shape) and s["nan"] == s["inf"] == 0
        assert s["norm"] == pytest.approx(float(np.sqrt((x64 * x64).sum())), rel=1e-6)
        assert (s["min"], s["max"]) == (float(x.min()), float(x.max()))
        if "mean" in s:
            assert s["mean"] == pytest.approx(float(x64.mean()), rel=1e-5, abs=1e-7)
        assert s.get("values") == (x.ravel().tolist() if x.size <= 16 else None)
        assert all(type(v) is float for v in s.get("values", []))
