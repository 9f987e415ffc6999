"""A strict stand-in for cupy, on the CPU: the engine's "cuda" backend in tests when no GPU is lent.

No GPU has run rtxviz's cupy path, so a numpy call that only works because the array happens to live on the
host goes unnoticed until one does. This module imitates cupy where the two differ, and numpy computes the
values:

- `StrictArray` wraps an ndarray and refuses implicit conversion to numpy, as ``cupy.ndarray`` does:
  ``np.asarray(a)`` raises ``TypeError: Implicit conversion to a NumPy array is not allowed. Please use
  `.get()` ...``; `.get()` copies to the host, ``.item()`` and ``.tolist()`` return host values;
- a numpy array does not mix with it, in operators and ufuncs (``a + np.ones(2)``, ``np.add(np.ones(2), a)``:
  ``TypeError: Unsupported type <class 'numpy.ndarray'>``, cupy's words) nor in the namespace's functions
  (``xp.where(np_mask, a, b)``); indexing with numpy/list keys and assigning numpy values are allowed, as
  cupy converts those;
- reductions, full integer indexing and ufuncs on 0-d arrays give 0-d arrays where numpy gives scalars;
- it lives on device 0 of kind "cuda" (``a.device.id == 0``; the engine's `Device` says ``cuda:0``);
- the namespace (`xp`, numpy's functions with these rules) has only names cupy has (`tests/cupy_names.txt`,
  the public names of cupy's ``__init__.py``, cupy 15.0.0a1): ``xp.errstate`` is an AttributeError, as on a
  GPU; ufunc methods cupy lacks (``xp.exp.at``, ``xp.maximum.reduce``) raise NotImplementedError as cupy's do.

`install()` registers it as the engine's "cuda" backend (`rtxviz.engine.device.use_cuda_backend`);
`RTXVIZ_TEST_DEVICE=strict` does that for the test suite (tests/conftest.py).

>>> import numpy as np
>>> a = xp.arange(3.0)
>>> (a * 2).sum()
strict_array(6.)
>>> np.asarray(a)
Traceback (most recent call last):
...
TypeError: Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy ...
>>> a + np.ones(3)
Traceback (most recent call last):
...
TypeError: Unsupported type <class 'numpy.ndarray'> (cupy does not mix host numpy arrays with device arrays; ...
>>> a.get().tolist(), float(a[1]), a.device.id
([0.0, 1.0, 2.0], 1.0, 0)
"""

from __future__ import annotations

import math
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

#: The public names of cupy's top-level namespace (cupy/__init__.py of cupy 15.0.0a1, read with `ast`).
CUPY_NAMES = frozenset((Path(__file__).parent / "cupy_names.txt").read_text().split())
#: cupy.linalg's names (cupy/linalg/__init__.py).
LINALG_NAMES = frozenset(
    "matrix_power matmul cholesky qr svd eigh eig eigvalsh eigvals norm cond det matrix_rank slogdet solve "
    "tensorsolve lstsq inv pinv tensorinv LinAlgError".split())
#: ufuncs whose `at` cupy implements (those with a scatter op), and those with `reduce`/`accumulate`.
_AT = frozenset({"add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor"})
_REDUCE = frozenset({"add", "multiply"})
#: Python scalars a cupy kernel takes as arguments (numpy scalars, np.generic, are taken too).
_SCALARS = (bool, int, float, complex)

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy "
             "array explicitly.")


def _unsupported(value: Any) -> TypeError:
    return TypeError(f"Unsupported type {type(value)} (cupy does not mix host numpy arrays with device arrays; "
                     "move it with xp.asarray first, or keep the computation on the host)")


def _unwrap(value: Any) -> Any:
    """A kernel's argument: device arrays to their ndarrays, containers walked; a numpy array raises."""
    if isinstance(value, StrictArray):
        return value._a
    if isinstance(value, np.ndarray):
        raise _unsupported(value)
    if type(value) is list or type(value) is tuple:
        return type(value)(_unwrap(v) for v in value)
    if type(value) is dict:  # keyword arguments (out=...)
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _unwrap_host_ok(value: Any) -> Any:
    """An argument cupy converts itself (index keys, assigned values, `xp.asarray`'s input): numpy is fine."""
    if isinstance(value, StrictArray):
        return value._a
    if type(value) is list or type(value) is tuple:
        return type(value)(_unwrap_host_ok(v) for v in value)
    return value


def _wrap(value: Any) -> Any:
    """numpy's result as cupy's: arrays on the device, scalars as 0-d arrays, containers walked."""
    if isinstance(value, np.ndarray):
        return _wrap_array(value)
    if isinstance(value, np.generic):
        return _wrap_array(np.asarray(value))
    if isinstance(value, tuple):
        items = [_wrap(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


#: id(ndarray) -> its live wrapper, so that a view's `.base` is the very object it was made from (as cupy's is;
#: the engine keys version counters and memory accounting by the root buffer's identity).
_LIVE: weakref.WeakValueDictionary[int, StrictArray] = weakref.WeakValueDictionary()


def _wrap_array(array: np.ndarray) -> StrictArray:
    w = _LIVE.get(id(array))
    if w is not None and w._a is array:
        return w
    w = object.__new__(StrictArray)
    w._a = array
    base = array.base
    w._base = _wrap_array(base) if isinstance(base, np.ndarray) else None
    _LIVE[id(array)] = w
    return w


class _Device:
    """cupy.cuda.Device: an id, and a context manager that makes it current (there is one)."""

    def __init__(self, device: int | None = None) -> None:
        self.id = 0 if device is None else int(device)
        if self.id != 0:
            raise ValueError(f"strict stand-in: device {self.id} does not exist (one device, id 0)")

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"


_DEVICE0 = _Device(0)

# Methods and attributes of cupy.ndarray (cupy/_core/core.pyx) that numpy's ndarray also has, delegated to it.
_METHODS = frozenset(
    "all any argmax argmin argpartition argsort astype byteswap choose clip compress conj conjugate copy cumprod "
    "cumsum diagonal dot fill flatten max mean min nonzero partition prod ptp put ravel repeat reshape round "
    "searchsorted sort squeeze std sum swapaxes take tobytes trace transpose var view item tolist".split())
_ATTRIBUTES = frozenset("shape dtype ndim size nbytes itemsize strides T mT real imag".split())


class _Flags:
    """cupy's ndarray.flags: contiguity and ownership only (no `writeable`: device arrays are always writable)."""

    def __init__(self, flags: Any) -> None:
        self.c_contiguous, self.f_contiguous, self.owndata = flags.c_contiguous, flags.f_contiguous, flags.owndata

    def __getitem__(self, name: str) -> bool:
        key = {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous", "OWNDATA": "owndata"}.get(name)
        if key is None:
            raise KeyError(f"{name} is not defined for cupy.ndarray.flags")
        return getattr(self, key)


def _ufunc_op(name: str, reflected: bool = False) -> Callable[[StrictArray, Any], Any]:
    ufunc = getattr(np, name)
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


def _inplace_op(name: str) -> Callable[[StrictArray, Any], Any]:
    ufunc = getattr(np, name)

    def op(self: StrictArray, other: Any) -> StrictArray:
        ufunc(self, other, out=(self,))
        return self

    return op


class StrictArray:
    """A device array as cupy's `ndarray` behaves, over a numpy array (see the module's docstring).

    >>> a = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    >>> a.base is None, a[0].base is a, type(a.sum()).__name__, a.sum().ndim
    (True, True, 'StrictArray', 0)
    """

    __slots__ = ("_a", "_base", "__weakref__")
    __module__ = "strict_xp"  # as cupy.ndarray's names its package: sys.modules["strict_xp"] is the namespace
    _a: np.ndarray
    _base: StrictArray | None
    __hash__ = None  # type: ignore[assignment]  # unhashable, as ndarrays are

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("StrictArray: make one with xp.asarray / xp.zeros / ..., as cupy arrays are made")

    # -- what cupy refuses, and its explicit doors ---------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(_IMPLICIT)

    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None) -> np.ndarray:
        """A host copy (cupy's `.get()`)."""
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        """Copy host values in (cupy's `.set()`)."""
        self._a[...] = arr

    @property
    def device(self) -> _Device:
        return _DEVICE0

    @property
    def base(self) -> StrictArray | None:
        return self._base

    @property
    def flags(self) -> _Flags:
        return _Flags(self._a.flags)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Version 3 of the CUDA array interface, describing the host buffer (nothing here reads the pointer)."""
        face = self._a.__array_interface__
        return {"shape": face["shape"], "typestr": face["typestr"], "descr": face["descr"],
                "data": face["data"], "strides": face["strides"], "version": 3}

    def __getattr__(self, name: str) -> Any:
        if name in _ATTRIBUTES:
            return _wrap(getattr(self._a, name))
        if name in _METHODS:
            method = getattr(self._a, name)
            return lambda *args, **kwargs: _wrap(method(*_unwrap(args), **_unwrap(kwargs)))
        raise AttributeError(f"'StrictArray' object has no attribute {name!r} (cupy.ndarray has none either"
                             + (": `.data` is a device memory pointer there, not a buffer)" if name == "data"
                                else ")"))

    # -- numpy's protocols, as cupy answers them ------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        if isinstance(out, tuple):
            if len(out) != 1:
                raise ValueError("The 'out' parameter must have exactly one array value")
            kwargs["out"] = out = out[0]
        for x in (*inputs, *((out,) if out is not None else ())):
            if isinstance(x, np.ndarray):
                raise _unsupported(x)
            if not isinstance(x, (StrictArray, np.generic, *_SCALARS)):
                return NotImplemented  # a Tensor, say: its own __array_ufunc__ is asked next
        if ufunc.__name__ not in CUPY_NAMES:
            return NotImplemented
        func = getattr(xp, ufunc.__name__)
        return (func if method == "__call__" else getattr(func, method))(*inputs, **kwargs)

    def __array_function__(self, func: Any, types_: tuple, args: tuple, kwargs: dict) -> Any:
        """numpy's functions on device arrays run the namespace's (cupy's) function of that name, if any."""
        name = func.__name__
        module = func.__module__.split(".")
        if module[0] != "numpy":
            return NotImplemented
        space: Any = {"linalg": xp.linalg, "fft": xp.fft}.get(module[1] if len(module) > 1 else "", xp)
        try:
            mine = getattr(space, name)
        except AttributeError:
            return NotImplemented
        return mine(*args, **kwargs)

    # -- containers and conversions ---------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._a[_unwrap_host_ok(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._a[_unwrap_host_ok(key)] = _unwrap_host_ok(value)

    def __len__(self) -> int:
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self) -> Iterator[StrictArray]:
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._a.shape[0]))

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __complex__(self) -> complex:
        return complex(self._a)

    # cupy.ndarray has no __index__: a device scalar is not a Python index (range(a), [..][a] raise)

    def __copy__(self) -> StrictArray:
        return _wrap_array(self._a.copy())

    def __deepcopy__(self, memo: dict) -> StrictArray:
        return _wrap_array(self._a.copy())

    def __reduce__(self) -> tuple:
        return (xp.array, (self.get(),))

    def __repr__(self) -> str:
        return "strict_" + repr(self._a)

    def __str__(self) -> str:
        return str(self._a)

    def __format__(self, spec: str) -> str:
        return format(self._a, spec)

    # -- operators: numpy's ufuncs, answered by __array_ufunc__ above (so a Tensor operand gets its turn) --------
    __add__, __radd__, __iadd__ = _ufunc_op("add"), _ufunc_op("add", True), _inplace_op("add")
    __sub__, __rsub__, __isub__ = _ufunc_op("subtract"), _ufunc_op("subtract", True), _inplace_op("subtract")
    __mul__, __rmul__, __imul__ = _ufunc_op("multiply"), _ufunc_op("multiply", True), _inplace_op("multiply")
    __truediv__, __rtruediv__ = _ufunc_op("true_divide"), _ufunc_op("true_divide", True)
    __itruediv__ = _inplace_op("true_divide")
    __floordiv__, __rfloordiv__ = _ufunc_op("floor_divide"), _ufunc_op("floor_divide", True)
    __mod__, __rmod__ = _ufunc_op("remainder"), _ufunc_op("remainder", True)
    __pow__, __rpow__, __ipow__ = _ufunc_op("power"), _ufunc_op("power", True), _inplace_op("power")
    __matmul__, __rmatmul__ = _ufunc_op("matmul"), _ufunc_op("matmul", True)
    __and__, __rand__ = _ufunc_op("bitwise_and"), _ufunc_op("bitwise_and", True)
    __or__, __ror__ = _ufunc_op("bitwise_or"), _ufunc_op("bitwise_or", True)
    __xor__, __rxor__ = _ufunc_op("bitwise_xor"), _ufunc_op("bitwise_xor", True)
    __iand__, __ior__ = _inplace_op("bitwise_and"), _inplace_op("bitwise_or")
    __lt__, __le__ = _ufunc_op("less"), _ufunc_op("less_equal")
    __gt__, __ge__ = _ufunc_op("greater"), _ufunc_op("greater_equal")
    __eq__, __ne__ = _ufunc_op("equal"), _ufunc_op("not_equal")  # type: ignore[assignment]

    def __neg__(self) -> Any:
        return np.negative(self)

    def __pos__(self) -> Any:
        return np.positive(self)

    def __abs__(self) -> Any:
        return np.absolute(self)

    def __invert__(self) -> Any:
        return np.invert(self)


class _Ufunc:
    """A cupy ufunc: numpy's, on device arrays only, with the methods cupy implements."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self._u = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for a in args:
            if isinstance(a, list | tuple):
                raise TypeError(f"Unsupported type {type(a)} (cupy's {self.__name__} takes arrays and scalars)")
        return _wrap(self._u(*_unwrap(args), **_unwrap(kwargs)))

    def at(self, a: StrictArray, indices: Any, b: Any = None) -> None:
        if self.__name__ not in _AT:
            raise NotImplementedError(f"`{self.__name__}.at` is not supported yet")
        if not isinstance(a, StrictArray):
            raise _unsupported(a)
        self._u.at(a._a, _unwrap_host_ok(indices), _unwrap_host_ok(b))

    def reduce(self, array: StrictArray, axis: Any = 0, dtype: Any = None, out: Any = None,
               keepdims: bool = False) -> Any:
        if self.__name__ not in _REDUCE:
            raise NotImplementedError(f"`{self.__name__}.reduce` is not supported yet")
        return _wrap(self._u.reduce(_unwrap(array), axis, dtype, _unwrap(out), keepdims))

    def accumulate(self, array: StrictArray, axis: int = 0, dtype: Any = None, out: Any = None) -> Any:
        if self.__name__ not in _REDUCE:
            raise NotImplementedError(f"`{self.__name__}.accumulate` is not supported yet")
        return _wrap(self._u.accumulate(_unwrap(array), axis, dtype, _unwrap(out)))

    def outer(self, a: Any, b: Any, **kwargs: Any) -> Any:
        return _wrap(self._u.outer(_unwrap_host_ok(a), _unwrap_host_ok(b), **_unwrap(kwargs)))

    def __getattr__(self, name: str) -> Any:
        if name in ("nin", "nout", "nargs", "ntypes", "types", "identity"):
            return getattr(self._u, name)
        if name in ("reduceat",):
            raise NotImplementedError(f"`{self.__name__}.{name}` is not supported yet")
        raise AttributeError(f"cupy.ufunc has no attribute {name!r}")


def _function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A cupy function: numpy's, taking device arrays (a numpy array raises), giving device arrays."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return _wrap(fn(*_unwrap(args), **_unwrap(kwargs)))

    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "function")
    call.__doc__ = fn.__doc__
    return call


def _asarray(a: Any, dtype: Any = None, order: Any = None, *, copy: Any = None, blocking: bool = False) -> Any:
    """cupy.asarray: host values (numpy arrays too) copied to the device; a device array kept when it fits."""
    if isinstance(a, StrictArray) and (dtype is None or np.dtype(dtype) == a.dtype) and copy is not True:
        return a
    return _wrap_array(np.array(_unwrap_host_ok(a), dtype=dtype, order=order or "K", copy=True))


def _array(obj: Any, dtype: Any = None, copy: bool = True, order: str = "K", subok: bool = False,
           ndmin: int = 0, *, blocking: bool = False) -> Any:
    if not copy:
        return _asarray(obj, dtype)
    return _wrap_array(np.array(_unwrap_host_ok(obj), dtype=dtype, order=order, ndmin=ndmin, copy=True))


def _asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None, *, blocking: bool = True) -> np.ndarray:
    return a.get(order=order, out=out) if isinstance(a, StrictArray) else np.asarray(a, order=order)


class _Namespace(types.ModuleType):
    """A cupy namespace: numpy's names (only those cupy has), wrapped by the rules above; built on first use."""

    def __init__(self, name: str, source: Any, names: frozenset[str] | None,
                 special: dict[str, Any] | None = None) -> None:
        super().__init__(name)
        self._source, self._names, self._special = source, names, special or {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in self._special:
            value = self._special[name]
        else:
            if self._names is not None and name not in self._names:
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (cupy has no {name})")
            value = getattr(self._source, name)
            if isinstance(value, np.ufunc):
                value = _Ufunc(value)
            elif isinstance(value, type) or not callable(value):
                pass  # dtypes (xp.float32 is np.float32 in cupy too), finfo, constants (pi, inf, newaxis)
            else:
                value = _function(value)
        setattr(self, name, value)
        return value


def _erf(x: Any) -> Any:
    """cupyx.scipy.special.erf, elementwise (math.erf; the stand-in is for correctness, not speed)."""
    arr = _unwrap(x)
    out = np.vectorize(math.erf, otypes=[arr.dtype])(arr) if arr.size else arr.copy()
    return _wrap(out)


def _scatter_add(a: StrictArray, slices: Any, value: Any) -> None:
    """cupyx.scatter_add: a[slices] += value with repeated indices accumulating."""
    if not isinstance(a, StrictArray):
        raise _unsupported(a)
    np.add.at(a._a, _unwrap_host_ok(slices), _unwrap_host_ok(value))


_cuda = types.ModuleType("strict_xp.cuda")
_cuda.Device = _Device  # type: ignore[attr-defined]
_cuda.runtime = types.SimpleNamespace(getDeviceCount=lambda: 1)  # type: ignore[attr-defined]
_cuda.is_available = lambda: True  # type: ignore[attr-defined]


def _get_array_module(*args: Any) -> Any:
    return xp if any(isinstance(a, StrictArray) for a in args) else np


#: The stand-in for the `cupy` module.
xp = _Namespace("strict_xp", np, CUPY_NAMES | {"lib"}, {
    "ndarray": StrictArray, "asarray": _asarray, "asanyarray": _asarray, "array": _array,
    "ascontiguousarray": lambda a, dtype=None: _asarray(a, dtype, "C"),
    "asnumpy": _asnumpy, "get_array_module": _get_array_module, "cuda": _cuda,
    "linalg": _Namespace("strict_xp.linalg", np.linalg, LINALG_NAMES),
    "fft": _Namespace("strict_xp.fft", np.fft, None),
    "lib": types.SimpleNamespace(stride_tricks=_Namespace("strict_xp.lib.stride_tricks", np.lib.stride_tricks,
                                                          frozenset({"as_strided", "broadcast_to"}))),
})
#: The stand-in for `cupyx` (what the engine uses of it).
xpx = types.ModuleType("strict_xpx")
xpx.scatter_add = _scatter_add  # type: ignore[attr-defined]
xpx.scipy = types.SimpleNamespace(special=types.SimpleNamespace(erf=_erf))  # type: ignore[attr-defined]


def install() -> None:
    """Make the stand-in the engine's "cuda" backend (until `uninstall`)."""
    from rtxviz.engine.device import use_cuda_backend

    use_cuda_backend(xp, xpx)


def uninstall() -> None:
    """Give "cuda" devices back to cupy."""
    from rtxviz.engine.device import use_cuda_backend

    use_cuda_backend(None, None)


sys.modules.setdefault("strict_xp", xp)  # type(array).__module__ -> the namespace, as for cupy (rtxviz.summary)
