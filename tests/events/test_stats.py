"""tensor_stats and jsonable against hand-computed numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtxviz.events.stats import MEAN_MAX_NUMEL, count_nonfinite, jsonable, tensor_stats


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
    assert "mean" not in s  # large tensors' summaries carry no mean (one pass less)


def test_mean_only_for_small_tensors():
    # x_i = i: the mean of 0..n-1 is (n-1)/2
    for n in (1, 17, MEAN_MAX_NUMEL):
        assert tensor_stats(np.arange(n, dtype=np.float32))["mean"] == pytest.approx((n - 1) / 2)
    assert "mean" not in tensor_stats(np.arange(MEAN_MAX_NUMEL + 1, dtype=np.float32))
    # NaN present: a small tensor's mean is null, a large one's absent
    small, large = np.ones(8), np.ones(MEAN_MAX_NUMEL + 1)
    small[3] = large[3] = np.nan
    assert tensor_stats(small)["mean"] is None and "mean" not in tensor_stats(large)
    assert tensor_stats(large)["nan"] == 1 and tensor_stats(large)["max"] == 1.0
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
    s = tensor_stats(x)
    assert "mean" not in s
    assert s["norm"] == pytest.approx(math.sqrt(sq), rel=1e-6)
    assert (s["min"], s["max"], s["nan"], s["inf"]) == (-3.0, 3.0, 0, 0)


def test_count_nonfinite():
    assert count_nonfinite(np.ones(3)) == (0, 0)
    assert count_nonfinite(np.array([np.nan, np.inf, -np.inf, 1.0])) == (1, 2)
    assert count_nonfinite(np.array([1, 2])) == (0, 0)


def test_jsonable_bounds_and_converts():
    assert jsonable((1, np.int64(2), "x" * 300))[:2] == [1, 2]
    assert len(jsonable("x" * 300)) == 201
    assert jsonable(np.zeros((2, 3))) == {"shape": [2, 3], "dtype": "float64"}
    assert len(jsonable(list(range(100)))) == 33
    assert jsonable({"a": {"b": {"c": {"d": 1}}}}) == {"a": {"b": {"c": "{'d': 1}"}}}
    assert jsonable(float("inf")) is None
