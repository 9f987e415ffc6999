"""Tensor summaries: norm, min, max, mean, NaN/Inf counts and the values of small tensors, on raw arrays.

What the event stream sends for every gradient, what `detect_anomaly` prints, what the drawings label edges with.

Runs on every op while watching, so it is written for speed. The compiled one-pass kernel (`rtxviz._native.summary`,
built from `rtxviz/_native.c` when the package is installed with a C compiler) reads a float32/float64 tensor once for
its sum of squares, sum, min and max. Without it (or for a dtype it does not take) numpy takes a pass per number:
a BLAS dot product for the norm, one min, one max, and for tensors of at most `MEAN_MAX_NUMEL_NUMPY` elements a
dot with ones for the mean. Either way a finite sum of squares proves there is no NaN/Inf, so the counts cost
nothing in the common case. cupy arrays are summarised on the GPU and copied back as a few
numbers in one transfer.

>>> import numpy as np
>>> s = tensor_stats(np.array([3.0, -4.0], dtype=np.float32), values_max_numel=4)
>>> s["norm"], s["min"], s["max"], s["mean"], s["nan"], s["values"]
(5.0, -4.0, 3.0, -0.5, 0, [3.0, -4.0])
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from ..accel import all_finite as native_all_finite
from ..accel import stats as native_stats
from ..accel import summary as native_summary  # None without the compiled module: numpy does it

_ONES: dict[Any, np.ndarray] = {}
# the ufuncs' own reduce (what ndarray.min/max end up calling, minus two Python-level wrappers)
_min, _max, _dot = np.minimum.reduce, np.maximum.reduce, np.dot
#: dtypes the native kernel reads (native byte order only: np.dtype(">f4") is not among them)
NATIVE_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
#: Without the compiled kernel, tensors over this many elements are summarised without their mean (a fourth
#: numpy pass over every large gradient, ~+4% on a watched mlp_train step); the schema's `mean` is optional.
MEAN_MAX_NUMEL_NUMPY = 1024
#: above this many elements a BLAS dot product alone (a norm, a NaN test) is faster than the fused kernel (measured)
_DOT_MIN_NUMEL = 1 << 14


def _ones(dtype: Any, n: int) -> np.ndarray:
    """A cached vector of ones (at least n long) so `dot(x, ones)` gives the sum at BLAS speed."""
    arr = _ONES.get(dtype)
    if arr is None or arr.shape[0] < n:
        arr = _ONES[dtype] = np.ones(max(n, 1024), dtype=dtype)
    return arr[:n]


def _sum(flat: np.ndarray, n: int) -> float:
    """Sum at BLAS speed (a numpy `sum` is pairwise and slower than `dot` against a cached vector of ones)."""
    return float(_dot(flat, _ones(flat.dtype, n)))


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _value_list(flat: Any, finite: bool) -> list:
    values = flat.tolist()
    if not finite:
        values = [v if math.isfinite(v) else None for v in values]
    return values


def tensor_stats(array: Any, values_max_numel: int = 0) -> dict[str, Any]:
    """Summarise `array` (numpy or cupy) as a JSON-safe dict matching `schema.Stats`."""
    if native_stats is not None and type(array) is np.ndarray:
        # The common case first, with no checks of its own: the kernel refuses (TypeError, ValueError)
        # anything but C-contiguous float32/float64 in native byte order, and those take the general path;
        # it answers None for an empty array and for one whose sum of squares is not finite.
        try:
            out = native_stats(array, values_max_numel)
        except (TypeError, ValueError, BufferError):
            pass
        else:
            if out is not None:
                return out
            if array.size:
                return _nonfinite_stats(array.ravel(), list(array.shape), values_max_numel)
    return _stats(array, values_max_numel)


def _finite_stats(array: np.ndarray, sq: float, total: float | None, mn: float, mx: float,
                  values_max_numel: int) -> dict[str, Any]:
    """The summary of a tensor whose sum of squares `sq` is finite, which proves every element finite (no NaN/Inf
    to count or mask, and the sum cannot overflow either). `total` None: no mean (the numpy path, large)."""
    n = array.size
    out = {"shape": list(array.shape), "norm": math.sqrt(sq), "min": mn, "max": mx, "nan": 0, "inf": 0}
    if total is not None:
        out["mean"] = total / n
    if n <= values_max_numel:
        out["values"] = array.ravel().tolist()
    return out


def _stats(array: Any, values_max_numel: int) -> dict[str, Any]:
    """tensor_stats of anything: empty, cupy, integer, float16, strided or byte-swapped arrays, NaN/Inf."""
    n = array.size
    if n == 0:
        return {"shape": list(array.shape), "norm": 0.0, "min": None, "max": None, "mean": None, "nan": 0, "inf": 0}
    if type(array) is not np.ndarray:
        return _cupy_stats(array, list(array.shape), values_max_numel)
    if array.dtype.kind != "f":
        array = array.astype(np.float64)
    flat = array.ravel()
    total: float | None
    if native_summary is not None and flat.dtype in NATIVE_DTYPES and flat.flags.aligned:
        sq, total, mn, mx = native_summary(flat)
    else:
        with np.errstate(over="ignore"):  # float16 squares overflow past 256: the slow path below handles it
            sq = float(_dot(flat, flat))
        total = mn = mx = 0.0
        if sq - sq == 0.0:
            mn, mx = float(_min(flat)), float(_max(flat))
            # numpy needs a fourth pass for the sum: only small tensors get their mean on this path
            total = _sum(flat, n) if n <= MEAN_MAX_NUMEL_NUMPY else None
    if sq - sq == 0.0:
        return _finite_stats(flat.reshape(array.shape), sq, total, mn, mx, values_max_numel)
    return _nonfinite_stats(flat, list(array.shape), values_max_numel)


def _nonfinite_stats(flat: np.ndarray, shape: list, values_max_numel: int) -> dict[str, Any]:
    """The slow path: the squares overflowed, or NaN/Inf are present (count them, summarise the rest)."""
    n = flat.size
    nan = int(np.isnan(flat).sum())
    inf = int(np.isinf(flat).sum())
    finite = nan == 0 and inf == 0
    if finite:  # only the squares overflowed: the values are fine
        with np.errstate(over="ignore"):  # squares past float64's range too: the norm is then not finite (null)
            sq = float(np.linalg.norm(flat.astype(np.float64))) ** 2
        mn, mx = float(_min(flat)), float(_max(flat))
    else:
        good = flat[np.isfinite(flat)]
        mn = float(good.min()) if good.size else math.nan
        mx = float(good.max()) if good.size else math.nan
        sq = math.nan
    out = {
        "shape": shape, "norm": _finite(math.sqrt(sq)) if finite else None, "min": _finite(mn), "max": _finite(mx),
        "mean": _finite(float(flat.sum(dtype=np.float64)) / n) if finite else None, "nan": nan, "inf": inf,
    }
    if n <= values_max_numel:
        out["values"] = _value_list(flat, finite)
    return out


def _device_module(array: Any) -> Any:
    """The array module of a device array: the package its type comes from (cupy for cupy.ndarray, whose type
    lives in cupy._core.core; the tests' strict stand-in registers itself the same way). Not `import cupy`:
    this layer cannot see the engine's backend seam (rtxviz.engine.device.use_cuda_backend)."""
    return sys.modules[type(array).__module__.partition(".")[0]]


def _cupy_stats(array: Any, shape: list, values_max_numel: int) -> dict[str, Any]:
    cupy = _device_module(array)

    flat = array.ravel().astype(cupy.float64) if array.dtype.kind != "f" else array.ravel()
    fin = cupy.isfinite(flat)
    good = cupy.where(fin, flat, 0)
    nbad = flat.size - cupy.count_nonzero(fin)
    nums = cupy.stack([
        cupy.sqrt(cupy.dot(good, good)).astype(cupy.float64), good.sum(dtype=cupy.float64),
        cupy.where(fin, flat, cupy.inf).min().astype(cupy.float64),
        cupy.where(fin, flat, -cupy.inf).max().astype(cupy.float64),
        cupy.isnan(flat).sum().astype(cupy.float64), nbad.astype(cupy.float64),
    ]).get()
    norm, total, mn, mx, nan, bad = (float(x) for x in nums)
    nan_i, inf_i = int(nan), int(bad - nan)
    finite = bad == 0
    out = {
        "shape": shape, "norm": _finite(norm) if finite else None, "min": _finite(mn), "max": _finite(mx),
        "mean": _finite(total / flat.size) if finite else None, "nan": nan_i, "inf": inf_i,
    }
    if flat.size <= values_max_numel:
        out["values"] = _value_list(flat.get(), finite)
    return out


def norm(a: Any) -> float | None:
    """‖a‖ (L2, over all elements), None when it is not finite (or `a` is None)."""
    if a is None:
        return None
    flat = a.ravel()
    if type(flat) is np.ndarray:
        if flat.dtype.kind != "f":
            v = float(np.linalg.norm(flat))
        elif (native_summary is not None and flat.size <= _DOT_MIN_NUMEL and flat.dtype in NATIVE_DTYPES
              and flat.flags.aligned):
            v = math.sqrt(native_summary(flat)[0])  # a small one: the kernel's call costs less than dot's
        else:
            v = math.sqrt(float(_dot(flat, flat)))
    else:
        v = float(flat.dot(flat).get()) ** 0.5
    return v if v - v == 0.0 else None


def count_nonfinite(array: Any) -> tuple[int, int]:
    """(NaN count, Inf count) of a float array; (0, 0) quickly when everything is finite."""
    if type(array) is np.ndarray:
        if native_all_finite is not None:
            try:  # C-contiguous float32/float64: one compiled pass, faster than a dot at every size
                if native_all_finite(array):
                    return 0, 0
            except (TypeError, ValueError, BufferError):
                pass
            else:
                flat = array.ravel()
                return int(np.isnan(flat).sum()), int(np.isinf(flat).sum())
        n = array.size
        if array.dtype.kind != "f" or n == 0:
            return 0, 0
        flat = array.ravel()
        # x·x reads one memory stream (x·ones two); a finite result proves no NaN/Inf. float16 squares overflow
        # at |x| > 256, so there the plain sum is the cheaper test (numpy's own loop, which warns on overflow)
        # errstate: finite values whose squares overflow are not an error here (the counts below say so), and
        # a RuntimeWarning from inside a hook would be an exception under `-W error`
        with np.errstate(over="ignore"):
            s = float(_dot(flat, flat)) if flat.itemsize >= 4 else float(_dot(flat, _ones(flat.dtype, n)))
        if s - s == 0.0:
            return 0, 0
        return int(np.isnan(flat).sum()), int(np.isinf(flat).sum())
    if array.dtype.kind != "f" or array.size == 0:
        return 0, 0
    flat = array.ravel()
    cupy = _device_module(array)
    nums = cupy.stack([cupy.isnan(flat).sum(), cupy.isinf(flat).sum()]).get()
    return int(nums[0]), int(nums[1])


def host(array: Any) -> np.ndarray:
    """`array` as a numpy array (a cupy array is copied to the host; numpy arrays and array-likes pass)."""
    if type(array) is np.ndarray:
        return array
    get = getattr(array, "get", None)
    return get() if get is not None and hasattr(array, "__cuda_array_interface__") else np.asarray(array)


def describe(array: Any) -> dict[str, Any]:
    """shape, dtype, and over the finite values min, max, mean, with NaN and Inf counts: what an error message
    shows about a tensor (the event summary `tensor_stats` omits the mean of a tensor holding NaN/Inf).

    >>> describe(np.array([1.0, np.nan, 3.0]))
    {'shape': (3,), 'dtype': 'float64', 'nan': 1, 'inf': 0, 'min': 1.0, 'max': 3.0, 'mean': 2.0}
    """
    a = host(array)
    out: dict[str, Any] = {"shape": tuple(a.shape), "dtype": a.dtype.name}
    if a.size == 0 or a.dtype.kind not in "fiub":
        return out
    s = tensor_stats(a)
    out["nan"], out["inf"] = s["nan"], s["inf"]
    if s["min"] is None:  # nothing finite to describe
        return out
    mean = s.get("mean")
    if mean is None:  # NaN/Inf present, or a large tensor on the numpy path: the mean of the finite values
        af = a.astype(np.float64, copy=False).ravel()
        mean = float(af[np.isfinite(af)].mean()) if s["nan"] or s["inf"] else float(af.mean())
    out.update(min=s["min"], max=s["max"], mean=mean)
    return out
