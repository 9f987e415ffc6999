"""Tensor: an ndarray (numpy or cupy) on a device, its constructors, and op methods without a graph.

The op methods (`add`, `matmul`, `sum`, ...) are attached by `rtxviz.engine.ops`, one op in one place; on a
plain Tensor they compute and return a Tensor, on a Variable they also record the graph.

>>> t = Tensor.from_slice([1.0, 2.0, 3.0], [3])
>>> t.shape, t.dtype.name, str(t.device)
((3,), 'float32', 'cpu')
>>> Tensor.zeros([2, 2]).sum().item()
0.0
"""

from __future__ import annotations

import builtins
import gc
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import hooks as _hooks
from . import random as _random
from .device import CPU, Device, as_device, device_of, get_default_device, to_device, xp_of
from .dtypes import as_dtype, device_or_dtype, float32, get_default_dtype, int64
from .errors import DimError, DTypeError, GraphError, ShapeError

if TYPE_CHECKING:  # names in the declared signatures of the op methods (the class's generated block)
    from .ops.linalg import Slogdet
    from .ops.nn_conv import Pair
    from .ops.sorting import Sorted

ShapeLike = int | Sequence[int]


def _shape(shape: ShapeLike | Iterable[int], where: str) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (int(shape),)
    try:
        out = tuple(int(d) for d in shape)
    except TypeError:
        raise ShapeError(f"{where}: shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ShapeError(f"{where}: negative dimension in shape {out}")
    return out


def _no_variable_yet(t: Tensor) -> None:  # pragma: no cover - variable.py replaces it at import
    raise GraphError("requires_grad_: rtxviz.engine.variable is not loaded")


#: Turns a plain Tensor into a leaf Variable in place (set by variable.py, which builds on this module)
_BECOME_LEAF: Any = _no_variable_yet


class Tensor:
    """An n-dimensional array on a device. float32 by default; float64; int64 for indices.

    A Tensor records no graph. Wrap it in `Variable.from_tensor` to differentiate through it.
    """

    # A Variable's slots live here too, so that the two classes have one layout and `requires_grad_()` can turn a
    # Tensor into a leaf Variable in place, as PyTorch's does; a plain Tensor sets `_node` and `requires_grad`
    # only (they are read for every input of every op), the others stay unset until it becomes a Variable.
    __slots__ = ("data", "_node", "requires_grad", "_grad", "name", "_retains_grad", "_hooks", "__weakref__")
    _is_var = False
    _node: Any
    requires_grad: bool

    def __init__(self, data: Any, dtype: Any = None, device: Device | str | None = None) -> None:
        self.data = _to_array(data, dtype, device, "Tensor")
        self._node = None
        self.requires_grad = False

    # -- construction -------------------------------------------------------------------------------
    @staticmethod
    def _wrap(array: Any) -> Tensor:
        t = object.__new__(Tensor)
        t.data = array
        t._node = None
        t.requires_grad = False
        return t

    @staticmethod
    def from_slice(
        data: Sequence[float] | Any, shape: ShapeLike, device: Device | str | None = None, dtype: Any = None
    ) -> Tensor:
        """A tensor from flat row-major values and a shape, as the spec's `Tensor::from_slice`.

        >>> Tensor.from_slice([1, 2, 3, 4], [2, 2]).numpy().tolist()
        [[1.0, 2.0], [3.0, 4.0]]
        """
        shape = _shape(shape, "Tensor.from_slice")
        flat = np.asarray(data, dtype=as_dtype(dtype, "Tensor.from_slice")).reshape(-1)
        expected = int(np.prod(shape, dtype=np.int64))
        if flat.size != expected:
            raise ShapeError(f"Tensor.from_slice: {flat.size} values do not fill shape {shape} ({expected} values)")
        return Tensor._wrap(to_device(flat.reshape(shape), as_device(device)))

    @staticmethod
    def from_numpy(array: np.ndarray, device: Device | str | None = None) -> Tensor:
        """Wrap a numpy array (float16 and other widths become float32; ints become int64)."""
        return Tensor(array, None if array.dtype.kind == "f" and array.dtype.itemsize in (4, 8) else
                      (int64 if array.dtype.kind in "iu" else None), device)

    @staticmethod
    def zeros(shape: ShapeLike, device: Device | str | None = None, dtype: Any = None) -> Tensor:
        dev = as_device(device)
        return Tensor._wrap(dev.xp.zeros(_shape(shape, "Tensor.zeros"), dtype=as_dtype(dtype, "Tensor.zeros")))

    @staticmethod
    def ones(shape: ShapeLike, device: Device | str | None = None, dtype: Any = None) -> Tensor:
        dev = as_device(device)
        return Tensor._wrap(dev.xp.ones(_shape(shape, "Tensor.ones"), dtype=as_dtype(dtype, "Tensor.ones")))

    @staticmethod
    def full(shape: ShapeLike, value: float, device: Device | str | None = None, dtype: Any = None) -> Tensor:
        dev = as_device(device)
        dt = as_dtype(dtype, "Tensor.full")
        return Tensor._wrap(dev.xp.full(_shape(shape, "Tensor.full"), value, dtype=dt))

    @staticmethod
    def arange(
        start: float, stop: float | None = None, step: float = 1, device: Device | str | None = None,
        dtype: Any = None,
    ) -> Tensor:
        """Like numpy.arange; int64 when every bound is an int and no dtype is given.

        >>> Tensor.arange(3).numpy().tolist()
        [0, 1, 2]
        """
        if stop is None:
            start, stop = 0, start
        if dtype is None:
            ints = all(isinstance(v, int) for v in (start, stop, step))
            dtype = int64 if ints else get_default_dtype()
        dev = as_device(device)
        return Tensor._wrap(dev.xp.arange(start, stop, step, dtype=as_dtype(dtype, "Tensor.arange")))

    @staticmethod
    def randn(shape: ShapeLike, device: Device | str | None = None, dtype: Any = None) -> Tensor:
        """Standard normal samples from rtxviz's seedable generator (`rtxviz.manual_seed`)."""
        arr = _random.generator().standard_normal(_shape(shape, "Tensor.randn")).astype(as_dtype(dtype, "randn"))
        return Tensor._wrap(to_device(arr, as_device(device)))

    @staticmethod
    def rand(shape: ShapeLike, device: Device | str | None = None, dtype: Any = None) -> Tensor:
        """Uniform samples in [0, 1) from rtxviz's seedable generator."""
        arr = _random.generator().random(_shape(shape, "Tensor.rand")).astype(as_dtype(dtype, "rand"))
        return Tensor._wrap(to_device(arr, as_device(device)))

    # -- properties -----------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def device(self) -> Device:
        return device_of(self.data)

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def size(self, dim: int | None = None) -> Any:
        """The shape (a tuple, as torch.Size), or the size of one `dim` (negative counts from the end). PyTorch's
        meaning: the element count is `numel()`.

        >>> Tensor.zeros([2, 3]).size(), Tensor.zeros([2, 3]).size(-1)
        ((2, 3), 3)
        """
        shape = self.data.shape
        if dim is None:
            return shape
        if not -len(shape) <= dim < len(shape):
            raise DimError(f"size: dim {dim} is out of range for a tensor of {len(shape)} dim(s)")
        return shape[dim]

    def numel(self) -> int:
        return int(self.data.size)

    def dim(self) -> int:
        return self.data.ndim

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    @property
    def xp(self) -> Any:
        """numpy or cupy: the array module this tensor's kernels run on."""
        return xp_of(self.data)

    @property
    def tensor(self) -> Tensor:
        """This value as a plain Tensor (no graph); shares memory."""
        return Tensor._wrap(self.data)

    # -- the graph, as a PyTorch user asks a tensor about it ---------------------------------------------------------
    @property
    def grad(self) -> Tensor | None:
        """None: a plain Tensor is outside the graph, so no backward pass gives it a gradient (a Variable's is set)."""
        return None

    def detach(self) -> Tensor:
        """A new Tensor sharing this one's data (a plain Tensor is already outside the graph)."""
        return Tensor._wrap(self.data)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """With True, this tensor becomes a leaf Variable in place (the same object, its data shared), as PyTorch's
        ``x.requires_grad_()``: ``x = rtxviz.zeros(3); x.requires_grad_()`` and then ``x.grad`` after a backward.
        With False, it is this tensor as it is (a plain Tensor records nothing already).

        >>> import rtxviz
        >>> x = rtxviz.tensor([1.0, 2.0])
        >>> x.requires_grad_() is x, type(x).__name__
        (True, 'Variable')
        >>> (x * x).sum().backward(); x.grad.tolist()
        [2.0, 4.0]
        """
        if not requires_grad:
            return self
        if self.data.dtype.kind != "f":
            raise DTypeError(f"requires_grad_: only floating-point tensors can require grad, got dtype "
                             f"{self.data.dtype} (shape {tuple(self.shape)})")
        _BECOME_LEAF(self)
        return self

    # Reading values into Python is reported to tracing hooks (`value_read`): a tracer such as the graph cache
    # must know when control flow or Python values may depend on data. Printing (`_values_repr`) is not.
    def numpy(self) -> np.ndarray:
        """The values as a numpy array (copied from the GPU; shared on the CPU)."""
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="numpy")
        return self._host()

    def _host(self) -> np.ndarray:
        return self.data if type(self.data) is np.ndarray else self.data.get()

    def item(self) -> float | int | bool:
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="item")
        return self._item("item")

    def _item(self, where: str) -> float | int | bool:
        if self.data.size != 1:
            raise ShapeError(f"{where}: only one-element tensors convert to a Python number, got shape {self.shape}")
        return self.data.reshape(-1)[0].item()

    def tolist(self) -> Any:
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="tolist")
        return self._host().tolist()

    def to(self, device: Device | str | None = None, dtype: Any = None) -> Tensor:
        """A copy on `device` and/or with `dtype` (self when nothing changes); a dtype may come first, as
        ``t.to(rtxviz.float64)``."""
        device, dtype = device_or_dtype(device, dtype)
        arr = self.data
        if device is not None:
            arr = to_device(arr, as_device(device))
        if dtype is not None:
            dt = as_dtype(dtype, "to")
            if dt != arr.dtype:
                arr = arr.astype(dt)
        return self if arr is self.data else Tensor._wrap(arr)

    def cpu(self) -> Tensor:
        return self.to(CPU)

    def cuda(self, index: int = 0) -> Tensor:
        return self.to(Device.cuda(index))

    def float(self) -> Tensor:
        return self.to(dtype=float32)

    def double(self) -> Tensor:
        return self.to(dtype="float64")

    def long(self) -> Tensor:
        return self.to(dtype=int64)

    def type_as(self, other: Tensor) -> Tensor:
        """This tensor cast to `other`'s dtype (torch's ``x.type_as(y)``)."""
        return self.to(dtype=other.dtype)

    def contiguous(self) -> Tensor:
        """The tensor itself: rtxviz keeps no strides for a user to mind (PyTorch's ``.contiguous()`` after a
        transpose or permute needs nothing here; `view` accepts any layout)."""
        return self

    def is_contiguous(self) -> builtins.bool:
        """True: see `contiguous`."""
        return True

    @property
    def is_cuda(self) -> builtins.bool:
        """Whether the tensor lives on a CUDA device (torch's ``x.is_cuda``)."""
        return self.device.kind == "cuda"

    def _new(self, where: str, size: tuple, dtype: Any, device: Any) -> tuple[tuple[int, ...], Any, Any]:
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else size
        if not all(isinstance(s, int | np.integer) for s in shape):
            raise TypeError(f"{where}: the size must be ints or one tuple of ints, got {size!r}")
        return (tuple(int(s) for s in shape), self.dtype if dtype is None else dtype,
                self.device if device is None else device)

    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None) -> Tensor:
        """Zeros of `size` with this tensor's dtype and device unless given (torch's ``x.new_zeros``)."""
        shape, dt, dev = self._new("new_zeros", size, dtype, device)
        return Tensor.zeros(shape, dev, dt)

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None) -> Tensor:
        """Ones of `size` with this tensor's dtype and device unless given (torch's ``x.new_ones``)."""
        shape, dt, dev = self._new("new_ones", size, dtype, device)
        return Tensor.ones(shape, dev, dt)

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None) -> Tensor:
        """Zeros, in fact, as `rtxviz.empty` (torch's ``x.new_empty``)."""
        shape, dt, dev = self._new("new_empty", size, dtype, device)
        return Tensor.zeros(shape, dev, dt)

    def new_full(self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
        """`fill_value` everywhere, with this tensor's dtype and device unless given (torch's ``x.new_full``)."""
        shape, dt, dev = self._new("new_full", (size,), dtype, device)
        return Tensor.full(shape, fill_value, dev, dt)

    def new_tensor(self, data: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
        """A copy of `data` with this tensor's dtype and device unless given (torch's ``x.new_tensor``)."""
        src = data.data if isinstance(data, Tensor) else data
        return Tensor(src.copy() if hasattr(src, "copy") and not isinstance(src, list | tuple) else src,
                      dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device)

    def __index__(self) -> int:
        """A one-element integer (or bool) tensor as a Python index (``data[i:i + 8]`` for an i drawn by
        ``randint``, ``items[t.argmax()]``), as PyTorch's; any other tensor raises TypeError, as Python expects."""
        if self.data.size != 1 or self.data.dtype.kind not in "iub":
            raise TypeError(f"__index__: only integer tensors of a single element can be converted to an index, "
                            f"got a {self.dtype} tensor of shape {self.shape}")
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="__index__")
        return int(self.data.reshape(-1)[0])

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    def __bool__(self) -> bool:
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="__bool__")
        if self.data.size != 1:
            raise ShapeError(f"bool: the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.data.reshape(-1)[0])

    def __float__(self) -> builtins.float:  # `float` in this class body is Tensor.float
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="__float__")
        return float(self._item("item"))

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"``: a one-element tensor formats as its number; no spec gives str(self), as PyTorch's."""
        if not spec:
            return str(self)
        if self.data.size != 1:
            raise TypeError(f"format: the spec {spec!r} needs a one-element tensor, got shape {tuple(self.shape)}")
        return format(self._item("format"), spec)

    def __int__(self) -> int:
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="__int__")
        return int(self._item("item"))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if _hooks.TRACING:
            _hooks.trace("value_read", tensor=self, how="__array__")
        arr = self._host()
        return arr if dtype is None else arr.astype(dtype)

    def _values_repr(self) -> str:
        arr = self._host()
        body = np.array2string(arr, precision=4, separator=", ", threshold=40, edgeitems=3)
        return body.replace("\n", "\n       ")

    def __repr__(self) -> str:
        dev = "" if self.device == CPU else f", device={self.device}"
        return f"Tensor({self._values_repr()}, dtype={self.dtype.name}{dev})"

    __hash__ = object.__hash__

    # -- op methods: generated by tests/engine/test_tensor_methods.py, do not edit by hand --
    if TYPE_CHECKING:
        @property
        def T(x: Any) -> Any:
            """All dims reversed (PyTorch's `.T`); a tensor of fewer than 2 dims is returned as is."""

        def __abs__(x: Any) -> Any:
            ...

        def __add__(a: Any, b: Any, alpha: Any = 1) -> Any:
            """a + alpha·b with broadcasting (a Python number b records `add_scalar`; `alpha` as PyTorch's)."""

        def __and__(a: Tensor, b: Any) -> Tensor:
            """a & b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""

        def __array_function__(self: Tensor, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
            """numpy functions on Tensors (np.sum, np.concatenate, ...) run the engine's op; a function without one"""

        def __array_ufunc__(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
            """numpy ufuncs on Tensors (``np.exp(x)``, ``np.float64(2) * x``, ``np.ones(2) + x``) run the engine's o…"""

        def __eq__(self: Tensor, other: Any) -> Tensor:  # type: ignore[override]
            """self == other, elementwise (bool, no gradient): tensors hash by identity, as PyTorch's."""

        def __floordiv__(a: Any, b: Any) -> Any:
            """a // b: the quotient rounded toward -inf, with broadcasting (torch.floor_divide); zero gradients."""

        def __ge__(self: Tensor, other: Any) -> Tensor:
            """self >= other, elementwise (bool, no gradient)."""

        def __getitem__(x: Any, key: Any) -> Any:
            """x[key] with numpy/PyTorch semantics: ints, slices (negative steps too), None, ..., integer and bool"""

        def __gt__(self: Tensor, other: Any) -> Tensor:
            """self > other, elementwise (bool, no gradient)."""

        def __iadd__(x: Tensor, other: Any, alpha: Any = 1.0) -> Tensor:
            """x += alpha · other, in place."""

        def __ifloordiv__(x: Tensor, other: Any) -> Tensor:
            """x //= other, in place."""

        def __imod__(x: Tensor, other: Any) -> Tensor:
            """x %= other, in place."""

        def __imul__(x: Tensor, other: Any) -> Tensor:
            """x *= other, in place."""

        def __invert__(a: Tensor) -> Tensor:
            """~a elementwise: not, for a bool tensor; bitwise not for int64 (no gradient)."""

        def __isub__(x: Tensor, other: Any, alpha: Any = 1.0) -> Tensor:
            """x -= alpha · other, in place."""

        def __iter__(x: Any) -> Any:
            ...

        def __itruediv__(x: Tensor, other: Any) -> Tensor:
            """x /= other, in place."""

        def __le__(self: Tensor, other: Any) -> Tensor:
            """self <= other, elementwise (bool, no gradient)."""

        def __lt__(self: Tensor, other: Any) -> Tensor:
            """self < other, elementwise: a bool Tensor that records no gradient."""

        def __matmul__(a: Any, b: Any) -> Any:
            """Matrix product with numpy's rules (1-D operands promoted, batch dims broadcast)."""

        def __mod__(a: Any, b: Any) -> Any:
            """a % b with the sign of b (Python's and torch.remainder's), with broadcasting."""

        def __mul__(a: Any, b: Any) -> Any:
            """a * b with broadcasting."""

        def __ne__(self: Tensor, other: Any) -> Tensor:  # type: ignore[override]
            """self != other, elementwise (bool, no gradient)."""

        def __neg__(x: Any) -> Any:
            """-x."""

        def __or__(a: Tensor, b: Any) -> Tensor:
            """a | b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""

        def __pos__(self: Tensor) -> Tensor:
            """+self: the tensor itself."""

        def __pow__(a: Any, b: Any) -> Any:
            """a ** b: a scalar exponent records `pow_scalar`, a tensor exponent `pow`."""

        def __radd__(self: Tensor, other: Any) -> Any:
            """other + self."""

        def __rand__(a: Tensor, b: Any) -> Tensor:
            """b & a (a bool or int on the left)."""

        def __rfloordiv__(self: Tensor, other: Any) -> Any:
            """other // self."""

        def __rmatmul__(self: Tensor, other: Any) -> Any:
            """other @ self."""

        def __rmod__(self: Tensor, other: Any) -> Any:
            """other % self."""

        def __rmul__(self: Tensor, other: Any) -> Any:
            """other * self."""

        def __ror__(a: Tensor, b: Any) -> Tensor:
            """b | a (a bool or int on the left)."""

        def __rpow__(self: Tensor, other: Any) -> Any:
            """other ** self."""

        def __rsub__(self: Tensor, other: Any) -> Any:
            """other - self."""

        def __rtruediv__(self: Tensor, other: Any) -> Any:
            """other / self (a Python number: other · reciprocal(self))."""

        def __rxor__(a: Tensor, b: Any) -> Tensor:
            """b ^ a (a bool or int on the left)."""

        def __setitem__(x: Tensor, key: Any, value: Any) -> None:
            """``x[key] = value``: numpy/PyTorch basic and advanced indexing, value broadcast into the picked region."""

        def __sub__(a: Any, b: Any, alpha: Any = 1) -> Any:
            """a - alpha·b with broadcasting (`alpha` as PyTorch's)."""

        def __truediv__(a: Any, b: Any) -> Any:
            """a / b with broadcasting (Python's /, torch.true_divide): `div` without its rounding_mode, whose keywo…"""

        def __xor__(a: Tensor, b: Any) -> Tensor:
            """a ^ b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""

        @property
        def _version(x: Tensor) -> int:
            """How many times this tensor's buffer was modified in place (PyTorch's ``x._version``)."""

        def abs(x: Any) -> Any:
            ...

        def adaptive_avg_pool2d(x: Tensor, output_size: int | tuple[int | None, int | None]) -> Any:
            """Average pooling of x [N, C, H, W] or [C, H, W] to [.., oh, ow] (PyTorch's F.adaptive_avg_pool2d): out…"""

        def add(a: Any, b: Any, alpha: Any = 1) -> Any:
            """a + alpha·b with broadcasting (a Python number b records `add_scalar`; `alpha` as PyTorch's)."""

        def add_(x: Tensor, other: Any, alpha: Any = 1.0) -> Tensor:
            """x += alpha · other, in place."""

        def add_scalar(x: Tensor, value: builtins.float) -> Any:
            """x + value, for a Python number."""

        def addmm(input: Any, mat1: Any, mat2: Any, *, beta: builtins.float = 1, alpha: builtins.float = 1) -> Any:
            """beta · input + alpha · (mat1 @ mat2), input broadcast to [n, p] (torch.addmm)."""

        def all(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
            """Whether every element (along `dim`) is nonzero: a bool Tensor, as torch.all."""

        def allclose(a: Tensor, b: Any, rtol: builtins.float = 1e-05, atol: builtins.float = 1e-08,
                     equal_nan: bool = False) -> builtins.bool:
            """Whether every element of `a` is close to `b`'s (`isclose`), as torch.allclose: a Python bool."""

        def amax(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """The largest value over `dim` (an int, a list of ints; None or [] for all), as torch.amax: the gradien…"""

        def amin(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """The smallest value over `dim` (an int, a list of ints; None or [] for all), as torch.amin: the gradie…"""

        def any(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
            """Whether some element (along `dim`) is nonzero: a bool Tensor, as torch.any."""

        def arctan(x: Any) -> Any:
            """The inverse tangent, elementwise, in (-π/2, π/2) (torch.atan)."""

        def arctan2(a: Any, b: Any) -> Any:
            """The elementwise angle of the point (b, a), with broadcasting (torch.atan2)."""

        def argmax(x: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
            """Index of the (first) largest value over `dim`, or into the flattened tensor; an int64 Tensor with"""

        def argmin(x: Any, dim: int | None = None, keepdim: bool = False) -> Tensor:
            """Index of the (first) smallest value over `dim`, or into the flattened tensor; int64, no gradient."""

        def argsort(x: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
            """The indices that sort `x` along `dim` (int64, no gradient), as torch.argsort (stable)."""

        def atan(x: Any) -> Any:
            """The inverse tangent, elementwise, in (-π/2, π/2) (torch.atan)."""

        def atan2(a: Any, b: Any) -> Any:
            """The elementwise angle of the point (b, a), with broadcasting (torch.atan2)."""

        def avg_pool2d(x: Tensor, kernel_size: int | Pair, stride: int | Pair | None = None, padding: int | Pair = 0,
                       ceil_mode: bool = False, count_include_pad: bool = True,
                       divisor_override: int | None = None) -> Any:
            """The mean of each kh×kw window of x [N, C, H, W], as PyTorch's F.avg_pool2d: zero padding counts unless"""

        def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: builtins.float = 1,
                    alpha: builtins.float = 1) -> Any:
            """beta · input + alpha · bmm(batch1, batch2), input broadcast to [B, n, p] (torch.baddbmm)."""

        def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
                       weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
                       momentum: builtins.float | None = 0.1, eps: builtins.float = 1e-05, *,
                       num_batches_tracked: Tensor | None = None) -> Any:
            """Batch normalisation of input [N, C, ...] per channel, as PyTorch's F.batch_norm: with training, the b…"""

        def bitwise_and(a: Tensor, b: Any) -> Tensor:
            """a & b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""

        def bitwise_not(a: Tensor) -> Tensor:
            """~a elementwise: not, for a bool tensor; bitwise not for int64 (no gradient)."""

        def bitwise_or(a: Tensor, b: Any) -> Tensor:
            """a | b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""

        def bitwise_xor(a: Tensor, b: Any) -> Tensor:
            """a ^ b elementwise: logical for bool tensors, bitwise for int64 (no gradient)."""

        def bmm(a: Tensor, b: Tensor) -> Any:
            """Batched matrix product of a [B, n, m] and b [B, m, p]: [B, n, p] (torch.bmm; batch sizes must agree)."""

        def broadcast_to(x: Tensor, *shape: Any) -> Any:
            """Broadcast `x` to `shape` without copying (PyTorch's expand; -1 keeps a dim)."""

        def ceil(x: Any) -> Any:
            """Each element rounded toward +inf (torch.ceil); an integer tensor is returned as it is. Zero gradient."""

        def cholesky(A: Tensor, upper: bool = False) -> Any:
            """The Cholesky factor of a symmetric positive-definite A [.., n, n] (torch.linalg.cholesky): the lower…"""

        def chunk(x: Any, chunks: int, dim: int = 0) -> tuple:
            """At most `chunks` equal pieces along `dim` (PyTorch: each of ceil(size / chunks); maybe fewer)."""

        def clamp(x: Any, min: Any = None, max: Any = None) -> Any:
            """x limited to [min, max]; either bound may be a number or a tensor (broadcast against x)."""

        def clamp_(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
            """x clamped into [min, max], in place."""

        def clamp_max(x: Any, max: Any) -> Any:
            """x limited from above by `max`, a number or a tensor (torch.clamp_max): ``clamp(x, max=max)``."""

        def clamp_min(x: Any, min: Any) -> Any:
            """x limited from below by `min`, a number or a tensor (torch.clamp_min): ``clamp(x, min=min)``."""

        def clip(x: Any, min: Any = None, max: Any = None) -> Any:
            """x limited to [min, max]; either bound may be a number or a tensor (broadcast against x)."""

        def clip_(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
            """x clamped into [min, max], in place."""

        def clone(x: Any) -> Any:
            """A copy of `x` in its own buffer, differentiable (torch.clone)."""

        def conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int = 1, padding: int = 0,
                   dilation: int = 1, groups: int = 1) -> Any:
            """1-D cross-correlation of x [N, C, L] with weight [O, C/groups, k], plus bias [O] (PyTorch's F.conv1d)."""

        def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int | Pair = 1,
                   padding: int | Pair = 0, dilation: int | Pair = 1, groups: int = 1) -> Any:
            """2-D cross-correlation of x [N, C, H, W] with weight [O, C/groups, kh, kw], plus bias [O]."""

        def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int | Pair = 1,
                             padding: int | Pair = 0, output_padding: int | Pair = 0, groups: int = 1,
                             dilation: int | Pair = 1) -> Any:
            """The transposed 2-D convolution of x [N, C, H, W] with weight [C, O/groups, kh, kw], plus bias [O]"""

        def copy_(x: Tensor, src: Any) -> Tensor:
            """x's values replaced by `src` (broadcast to x's shape, cast to x's dtype and device), in place."""

        def cos(x: Any) -> Any:
            ...

        def cosh(x: Any) -> Any:
            """The hyperbolic cosine, elementwise (torch.cosh)."""

        def count_nonzero(x: Any, dim: Any = None) -> Tensor:
            """How many elements of `x` (along `dim`: an int, a sequence of ints or None for all) are nonzero: int64…"""

        def cumprod(x: Any, dim: int, *, dtype: Any = None) -> Any:
            """The cumulative product along `dim`, as torch.cumprod (`dtype`: cast first)."""

        def cumsum(x: Any, dim: int, *, dtype: Any = None) -> Any:
            """The cumulative sum along `dim`, as torch.cumsum (`dtype`: cast first)."""

        def det(A: Tensor) -> Any:
            """The determinant of A [.., n, n] (torch.linalg.det): a tensor of A's batch shape."""

        def diag(x: Any, diagonal: int = 0) -> Any:
            """torch.diag: a 1-D `x` as the square matrix with x on its diagonal `diagonal` (offset > 0 above the ma…"""

        def diagonal(x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
            """The diagonal ``x[i, i + offset]`` of the matrices in dims (dim1, dim2), as a new last dim (torch.diag…"""

        def div(a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
            """a / b with broadcasting; `rounding_mode` "trunc" or "floor" rounds the quotient (toward 0, toward -in…"""

        def div_(x: Tensor, other: Any) -> Tensor:
            """x /= other, in place."""

        def divide(a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
            """a / b with broadcasting; `rounding_mode` "trunc" or "floor" rounds the quotient (toward 0, toward -in…"""

        def dot(input: Any, tensor: Any) -> Any:
            """The inner product of two 1-D tensors of one length and dtype, a 0-d tensor (torch.dot)."""

        def dropout(x: Tensor, p: builtins.float = 0.5, training: bool = True) -> Any:
            """Zero each element with probability `p` and scale the rest by 1/(1-p); `x` itself when not training."""

        def elu(x: Any, alpha: builtins.float = 1.0) -> Any:
            ...

        def eq(self: Tensor, other: Any) -> Tensor:
            """self == other, elementwise (bool, no gradient): tensors hash by identity, as PyTorch's."""

        def equal(a: Tensor, b: Tensor) -> builtins.bool:
            """Whether `a` and `b` have the same shape and the same values, as torch.equal: a Python bool."""

        def erf(x: Any) -> Any:
            """The error function 2/√π ∫₀ˣ exp(-t²) dt, elementwise (torch.erf)."""

        def exp(x: Any) -> Any:
            ...

        def expand(x: Tensor, *shape: Any) -> Any:
            """Broadcast `x` to `shape` without copying (PyTorch's expand; -1 keeps a dim)."""

        def expand_as(x: Tensor, other: Tensor) -> Any:
            """`x` broadcast to `other`'s shape (torch's ``x.expand_as(y)``)."""

        def expm1(x: Any) -> Any:
            """exp(x) - 1, accurate for small x (torch.expm1)."""

        def fill_(x: Tensor, value: builtins.float) -> Tensor:
            """Every element set to `value`, in place."""

        def fix(x: Any) -> Any:
            """Each element rounded toward 0 (torch.trunc, torch.fix); an integer tensor is returned as it is. Zero"""

        def flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
            """Merge dims `start_dim..end_dim` into one (a `reshape`); a 0-d tensor becomes shape (1,)."""

        def flip(x: Any, *dims: Any) -> Any:
            """`x` with the order of its elements reversed along each of `dims` (torch.flip; ``x.flip(0, 1)`` and"""

        def floor(x: Any) -> Any:
            """Each element rounded toward -inf (torch.floor); an integer tensor is returned as it is. Zero gradient."""

        def floor_divide(a: Any, b: Any) -> Any:
            """a // b: the quotient rounded toward -inf, with broadcasting (torch.floor_divide); zero gradients."""

        def floor_divide_(x: Tensor, other: Any) -> Tensor:
            """x //= other, in place."""

        def fmod(a: Any, b: Any) -> Any:
            """The remainder of a / b with the sign of a (C's fmod, torch.fmod), with broadcasting."""

        def frac(x: Any) -> Any:
            """The fractional part x - trunc(x), with x's sign (torch.frac); gradient 1, as torch's."""

        def gather(x: Any, dim: int, index: Any) -> Any:
            """The values of `x` at `index` along `dim` (torch.gather): ``out[i][j] = x[i][index[i][j]]`` for dim 1."""

        def ge(self: Tensor, other: Any) -> Tensor:
            """self >= other, elementwise (bool, no gradient)."""

        def gelu(x: Any, approximate: str = 'none') -> Any:
            ...

        def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
                       eps: builtins.float = 1e-05) -> Any:
            """Group normalisation of input [N, C, ...] (PyTorch's F.group_norm): the C channels split into num_grou…"""

        def gt(self: Tensor, other: Any) -> Tensor:
            """self > other, elementwise (bool, no gradient)."""

        def hypot(a: Any, b: Any) -> Any:
            """The elementwise length √(a² + b²) of the point (a, b), with broadcasting (torch.hypot)."""

        def index_add(x: Any, dim: int, index: Any, source: Any, *, alpha: builtins.float = 1) -> Any:
            """`x` plus `alpha` times the slices of `source` added into the rows `index` (1-D int64) along `dim`"""

        def index_select(x: Any, dim: int, index: Any) -> Any:
            """The entries at `index` (1-D int64) along `dim`; repeats allowed, and their gradients add up."""

        def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                          weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                          momentum: builtins.float = 0.1, eps: builtins.float = 1e-05) -> Any:
            """Instance normalisation of input [N, C, ...] (PyTorch's F.instance_norm): each (sample, channel) norma…"""

        def inverse(A: Tensor) -> Any:
            """The inverse of A [.., n, n] (torch.linalg.inv); a singular matrix raises ShapeError."""

        def isclose(a: Tensor, b: Any, rtol: builtins.float = 1e-05, atol: builtins.float = 1e-08,
                    equal_nan: bool = False) -> Tensor:
            """Where |a - b| <= atol + rtol·|b|, elementwise (bool), as torch.isclose: equal values (infinities too)…"""

        def isfinite(x: Tensor) -> Tensor:
            """Where x is neither NaN nor infinite, elementwise (bool, no gradient), as torch.isfinite."""

        def isinf(x: Tensor) -> Tensor:
            """Where x is +inf or -inf, elementwise (bool, no gradient), as torch.isinf."""

        def isnan(x: Tensor) -> Tensor:
            """Where x is NaN, elementwise (bool, no gradient), as torch.isnan."""

        def layer_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
                       bias: Tensor | None = None, eps: builtins.float = 1e-05) -> Any:
            """Normalise over the trailing `normalized_shape` dims, then scale by `weight` and shift by `bias`."""

        def le(self: Tensor, other: Any) -> Tensor:
            """self <= other, elementwise (bool, no gradient)."""

        def leaky_relu(x: Any, negative_slope: builtins.float = 0.01) -> Any:
            ...

        def lerp(input: Any, end: Any, weight: Any) -> Any:
            """input + weight · (end - input), with broadcasting; `weight` a number or a tensor (torch.lerp)."""

        def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Any:
            """x @ weightᵀ + bias for x [..., in], weight [out, in], bias [out] (PyTorch's F.linear)."""

        def log(x: Any) -> Any:
            ...

        def log1p(x: Any) -> Any:
            """log(1 + x), accurate for small x (torch.log1p)."""

        def log_softmax(x: Tensor, dim: int = -1) -> Any:
            """log(softmax(x)) along `dim`, computed as x - logsumexp(x) (stable for large logits)."""

        def logcumsumexp(x: Any, dim: int) -> Any:
            """log(cumsum(exp(x))) along `dim`, as torch.logcumsumexp, without overflow."""

        def logical_and(a: Tensor, b: Any) -> Tensor:
            """a and b elementwise, as bool (nonzero is true; no gradient)."""

        def logical_not(a: Tensor) -> Tensor:
            """not a, elementwise, as bool: a bool tensor's negation, any other's ``a == 0`` (no gradient)."""

        def logical_or(a: Tensor, b: Any) -> Tensor:
            """a or b elementwise, as bool (nonzero is true; no gradient)."""

        def logsumexp(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """log(sum(exp(x))) over `dim`, computed without overflow."""

        def lt(self: Tensor, other: Any) -> Tensor:
            """self < other, elementwise: a bool Tensor that records no gradient."""

        @property
        def mT(x: Any) -> Any:
            """The last two dims swapped (matrix transpose of a batch)."""

        def masked_fill(x: Any, mask: Any, value: Any) -> Any:
            """x with `value` written where `mask` (a bool tensor broadcastable to x) is True."""

        def masked_fill_(x: Tensor, mask: Any, value: Any) -> Tensor:
            """x with `value` written where `mask` is True, in place."""

        def matmul(a: Any, b: Any) -> Any:
            """Matrix product with numpy's rules (1-D operands promoted, batch dims broadcast)."""

        def max(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """The largest value: over everything (a 0-d tensor) when dim is None, else over `dim` as the pair"""

        def max_pool2d(x: Tensor, kernel_size: int | Pair, stride: int | Pair | None = None, padding: int | Pair = 0,
                       dilation: int | Pair = 1, ceil_mode: bool = False) -> Any:
            """The maximum of each kh×kw window of x [N, C, H, W] (stride defaults to the kernel size; padding count…"""

        def maximum(a: Any, b: Any) -> Any:
            """The elementwise maximum, with broadcasting."""

        def mean(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """Mean over `dim` (an int, a list of ints, or None for all). Of a float tensor only, as PyTorch's: the…"""

        def min(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """The smallest value: over everything when dim is None, else ``(values, indices)`` over `dim`."""

        def minimum(a: Any, b: Any) -> Any:
            """The elementwise minimum, with broadcasting."""

        def mm(input: Any, mat2: Any) -> Any:
            """The product of two matrices [n, m] @ [m, p] (torch.mm; no broadcasting, no other ranks)."""

        def mul(a: Any, b: Any) -> Any:
            """a * b with broadcasting."""

        def mul_(x: Tensor, other: Any) -> Tensor:
            """x *= other, in place."""

        def mul_scalar(x: Tensor, value: builtins.float) -> Any:
            """x * value, for a Python number."""

        def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Tensor:
            """Category indices drawn with probabilities proportional to the rows of `input` ([K] or [N, K] non-nega…"""

        def multiply(a: Any, b: Any) -> Any:
            """a * b with broadcasting."""

        def mv(input: Any, vec: Any) -> Any:
            """The product of a matrix [n, m] and a vector [m]: a vector [n] (torch.mv)."""

        def nan_to_num(x: Any, nan: builtins.float = 0.0, posinf: builtins.float | None = None,
                       neginf: builtins.float | None = None) -> Any:
            """x with NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (None: the dtype's largest and lo…"""

        def narrow(x: Any, dim: int, start: int, length: int) -> Any:
            """Elements `start .. start+length-1` along `dim` (a view; negative start counts from the end)."""

        def ne(self: Tensor, other: Any) -> Tensor:
            """self != other, elementwise (bool, no gradient)."""

        def neg(x: Any) -> Any:
            """-x."""

        def negative(x: Any) -> Any:
            """-x."""

        def nonzero(x: Any, *, as_tuple: bool = False) -> Any:
            """Where `x` is nonzero (torch.nonzero): an int64 tensor [N, x.ndim] of the indices, one row per nonzero"""

        def norm(x: Any, p: Any = 'fro', dim: Any = None, keepdim: bool = False) -> Any:
            """The `p`-norm of `x` over `dim` (every element when None), as Tensor.norm: "fro" (the default) is the"""

        def outer(a: Tensor, b: Tensor) -> Any:
            """The outer product of vectors a [n] and b [m]: [n, m] (torch.outer)."""

        def permute(x: Any, *dims: Any) -> Any:
            """Reorder the dims: output dim i is input dim `dims[i]` (a view)."""

        def pow(a: Any, b: Any) -> Any:
            """a ** b: a scalar exponent records `pow_scalar`, a tensor exponent `pow`."""

        def pow_scalar(x: Tensor, exponent: builtins.float) -> Any:
            """x ** exponent, for a Python number."""

        def prod(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """The product over `dim` (an int, a list of ints, or None for all), as torch.prod."""

        def reciprocal(x: Any) -> Any:
            ...

        def relu(x: Any) -> Any:
            ...

        def remainder(a: Any, b: Any) -> Any:
            """a % b with the sign of b (Python's and torch.remainder's), with broadcasting."""

        def remainder_(x: Tensor, other: Any) -> Tensor:
            """x %= other, in place."""

        def repeat(x: Any, *sizes: Any) -> Any:
            """`x` tiled `sizes[d]` times along each dim d (PyTorch's Tensor.repeat; extra leading sizes add dims)."""

        def repeat_interleave(x: Any, repeats: int, dim: int | None = None, *, output_size: int | None = None) -> Any:
            """Each element of `x` repeated `repeats` times in place along `dim` (torch.repeat_interleave with an int"""

        def reshape(x: Any, *shape: Any) -> Any:
            """A new shape with the same number of elements (one -1 is inferred)."""

        def reshape_as(x: Any, other: Any) -> Any:
            """`x` reshaped to `other`'s shape (torch's ``x.reshape_as(y)``)."""

        def roll(x: Any, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Any:
            """`x` with its elements moved `shifts` places along `dims`, those that fall off one end coming back at…"""

        def round(x: Any, *, decimals: int = 0) -> Any:
            """Each element rounded to `decimals` decimal places, halves to even (torch.round); an integer tensor is"""

        def rsqrt(x: Any) -> Any:
            """1 / sqrt(x), elementwise (torch.rsqrt): reciprocal(sqrt(x)), torch's values and its gradient"""

        def rsub_scalar(x: Tensor, value: builtins.float) -> Any:
            """value - x."""

        def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                         dropout_p: builtins.float = 0.0, is_causal: bool = False,
                                         scale: builtins.float | None = None) -> Any:
            """softmax(query·keyᵀ·scale + mask)·value, as PyTorch's F.scaled_dot_product_attention: query [.., L, E],"""

        def scatter_add(x: Any, dim: int, index: Any, src: Any) -> Any:
            """`x` with each ``src[i][j]`` added at position ``index[i][j]`` along `dim` (torch.scatter_add; for dim…"""

        def sigmoid(x: Any) -> Any:
            ...

        def sign(x: Any) -> Any:
            """-1, 0 or 1 by the sign of each element, in x's dtype (torch.sign); zero gradient."""

        def silu(x: Any) -> Any:
            ...

        def sin(x: Any) -> Any:
            ...

        def sinh(x: Any) -> Any:
            """The hyperbolic sine, elementwise (torch.sinh)."""

        def slogdet(A: Tensor) -> Slogdet:
            """(sign, logabsdet) of det A for A [.., n, n], as torch.linalg.slogdet: det A = sign · exp(logabsdet)."""

        def softmax(x: Tensor, dim: int = -1) -> Any:
            """exp(x) / Σ exp(x) along `dim` (numerically stable)."""

        def softplus(x: Any) -> Any:
            ...

        def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Sorted:
            """``(values, indices)``: `x` sorted along `dim`, and where each value came from (torch.sort). Ties keep…"""

        def split(x: Any, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple:
            """Pieces along `dim`: of `split_size` each (the last may be smaller), or of the listed sizes."""

        def sqrt(x: Any) -> Any:
            ...

        def square(x: Any) -> Any:
            ...

        def squeeze(x: Any, dim: Any = None) -> Any:
            """Drop size-1 dims: all of them (dim None), or the given dim(s); a dim whose size is not 1 is kept,"""

        def std(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
                correction: int | None = None) -> Any:
            """Standard deviation over `dim` with Bessel's `correction` (1 by default, as PyTorch; `unbiased=False`…"""

        def sub(a: Any, b: Any, alpha: Any = 1) -> Any:
            """a - alpha·b with broadcasting (`alpha` as PyTorch's)."""

        def sub_(x: Tensor, other: Any, alpha: Any = 1.0) -> Tensor:
            """x -= alpha · other, in place."""

        def subtract(a: Any, b: Any, alpha: Any = 1) -> Any:
            """a - alpha·b with broadcasting (`alpha` as PyTorch's)."""

        def sum(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
            """Sum over `dim` (an int, a list of ints, or None for all)."""

        def t(x: Any) -> Any:
            """The transpose of a matrix (a tensor of at most 2 dims is returned with its 2 dims swapped), as torch's"""

        def tan(x: Any) -> Any:
            """The tangent, elementwise (torch.tan)."""

        def tanh(x: Any) -> Any:
            ...

        def tile(x: Any, dims: Sequence[int]) -> Any:
            """`x` repeated `dims[d]` times along each dim (torch.tile): Tensor.repeat, with ones put in front of `d…"""

        def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Sorted:
            """``(values, indices)`` of the `k` largest (or, `largest=False`, smallest) values along `dim` (torch.to…"""

        def trace(x: Tensor) -> Any:
            """The sum of the diagonal of a 2-D tensor, square or not (torch.trace)."""

        def transpose(x: Any, dim0: int = 0, dim1: int = 1) -> Any:
            """Swap two dims (a view). The spec calls `transpose(0, 1)`."""

        def tril(x: Any, diagonal: int = 0) -> Any:
            """The lower triangle of the matrices in the last two dims: entries (i, j) with j <= i + diagonal, the r…"""

        def triu(x: Any, diagonal: int = 0) -> Any:
            """The upper triangle of the matrices in the last two dims: entries (i, j) with j >= i + diagonal, the r…"""

        def true_divide(a: Any, b: Any) -> Any:
            """a / b with broadcasting (Python's /, torch.true_divide): `div` without its rounding_mode, whose keywo…"""

        def trunc(x: Any) -> Any:
            """Each element rounded toward 0 (torch.trunc, torch.fix); an integer tensor is returned as it is. Zero"""

        def unbind(x: Any, dim: int = 0) -> tuple:
            """The slices of `x` along `dim`, that dim removed, as a tuple (torch.unbind): one recorded `getitem` ea…"""

        def unique(x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
                   dim: int | None = None) -> Any:
            """The distinct values of `x`, sorted, as a 1-D tensor (torch.unique, no gradient); with `return_inverse`"""

        def unsqueeze(x: Any, dim: int) -> Any:
            """Insert a dim of size 1 at `dim` (negative counts from the end of the result)."""

        def var(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
                correction: int | None = None) -> Any:
            """Variance over `dim` with Bessel's `correction` (1 by default, as PyTorch; `unbiased=False` is 0)."""

        def view(x: Any, *shape: Any) -> Any:
            """A new shape with the same number of elements (one -1 is inferred)."""

        def view_as(x: Any, other: Any) -> Any:
            """`x` reshaped to `other`'s shape (torch's ``x.view_as(y)``)."""

        def where(x: Any, condition: Any, other: Any) -> Any:
            """x.where(condition, other): x where condition else other (PyTorch's Tensor.where)."""

        def xlogy(a: Any, b: Any) -> Any:
            """a · log(b) elementwise, with broadcasting, and 0 where a is 0 (torch.xlogy)."""

        def zero_(x: Tensor) -> Tensor:
            """Every element set to 0, in place."""
    # -- end of op methods --


def _to_array(data: Any, dtype: Any, device: Device | str | None, where: str) -> Any:
    """Any array-like to an ndarray of a supported dtype on `device`."""
    if isinstance(data, Tensor):
        data = data.data
    dev = as_device(device) if device is not None else None
    if dtype is None:
        kind = getattr(getattr(data, "dtype", None), "kind", None)
        if kind is None:
            probe = np.asarray(data)
            kind = probe.dtype.kind
            dtype = int64 if kind in "iu" else ("bool" if kind == "b" else get_default_dtype())
        elif kind in "iu":
            dtype = int64
        elif kind == "b":
            dtype = "bool"
        elif kind == "f":
            dtype = data.dtype if data.dtype.itemsize in (4, 8) else get_default_dtype()
        else:
            raise DTypeError(f"{where}: unsupported dtype {data.dtype}")
    dt = as_dtype(dtype, where)
    if type(data) is np.ndarray or not hasattr(data, "__cuda_array_interface__"):
        arr = np.asarray(data, dtype=dt)
        if dev is None:  # host data goes to the default device (set_default_device); device arrays stay put
            dev = get_default_device()
        return arr if dev.kind == "cpu" else to_device(arr, dev)
    arr = data.astype(dt, copy=False)
    return arr if dev is None else to_device(arr, dev)


def as_tensor_like(value: Any, like: Tensor | None) -> Tensor:
    """Coerce an op's operand to a Tensor, by one rule (docs/engine.md, "Mixing Python, numpy and Tensors"):

    - Python numbers, numpy scalars and Python lists take the dtype (and device) of `like`, the tensor they meet,
      as PyTorch treats Python numbers: ``x * 2.0`` and ``np.float64(2) * x`` stay float32 for a float32 x;
    - a numpy (or cupy) array is treated exactly like a Tensor of its own dtype: with a tensor of another dtype
      the op raises the same DTypeError a Tensor would (naming both dtypes), never a silent cast;
    - but a float number meeting an int64 or bool tensor gives the default float dtype, and an int meeting a bool
      tensor int64, as torch's result_type (``int_tensor * 2.5`` is float32); the op then promotes the tensor.

    >>> import numpy as np
    >>> x = Tensor.ones([2])
    >>> as_tensor_like(np.float64(2.0), x).dtype.name, as_tensor_like(np.arange(2.0), x).dtype.name
    ('float32', 'float64')
    """
    if isinstance(value, Tensor):
        return value
    if like is None:
        t = Tensor(value)
    else:
        arr = like.data
        if isinstance(value, bool | int | float | np.number | list | tuple):
            xp = np if type(arr) is np.ndarray else xp_of(arr)
            dtype = arr.dtype if arr.dtype.kind == "f" else _number_dtype(value, arr.dtype)
            t = Tensor._wrap(xp.asarray(value, dtype=dtype))
        else:
            # host values start on the host (not the default device), device arrays stay where they are
            converted = _to_array(value, None, None if hasattr(value, "__cuda_array_interface__") else CPU,
                                  "operand")
            if type(arr) is not np.ndarray:
                converted = to_device(converted, Device("cuda", arr.device.id))
            t = Tensor._wrap(converted)
    if _hooks.TRACING:  # a constant of the computation, as a tracer sees it (the graph cache bakes it in)
        _hooks.trace("constant", tensor=t)
    return t


def _number_dtype(value: Any, dtype: np.dtype) -> np.dtype:
    """The dtype a Python value takes beside a non-float tensor of `dtype` (torch's result_type): a float value the
    default float dtype, an int value beside a bool tensor int64, anything else `dtype`.

    >>> _number_dtype(2.5, np.dtype(np.int64)).name, _number_dtype(2, np.dtype(np.bool_)).name
    ('float32', 'int64')
    """
    kind = np.asarray(value).dtype.kind
    if kind == "f":
        return get_default_dtype()
    if kind in "iu" and dtype.kind == "b":
        return int64
    return dtype


_PROXIES = (weakref.ProxyType, weakref.CallableProxyType)


def live_tensors() -> Iterator[Tensor]:
    """Every Tensor (and Variable) alive now, from the garbage collector's view of live objects. Weak proxies are
    skipped before the isinstance test: on a proxy whose object died, isinstance raises ReferenceError."""
    for obj in gc.get_objects():
        if type(obj) in _PROXIES:
            continue
        if isinstance(obj, Tensor):
            yield obj
