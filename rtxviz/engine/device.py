"""Devices and the array-module seam: every kernel asks `xp_of(array)` for numpy or cupy.

cupy is imported lazily, the first time a CUDA device is asked for, so `import rtxviz` never touches a GPU.
`use_cuda_backend` puts another module in cupy's place (the test suite's strict stand-in, tests/strict_xp.py,
which refuses what cupy refuses), and `set_default_device` makes constructors without a device use one.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from .errors import DeviceError

_cupy: ModuleType | None = None
_cupyx: ModuleType | None = None
_cupy_error: str | None = None


def use_cuda_backend(xp: ModuleType | None, xpx: ModuleType | None = None) -> None:
    """Make `xp` the array module of "cuda" devices instead of cupy, and `xpx` its cupyx (scatter_add,
    scipy.special); None gives them back to cupy, imported lazily again. For tests: the strict stand-in
    (tests/strict_xp.py) runs the cupy path on the CPU. `xp` answers cupy's calls the engine makes
    (`cuda.runtime.getDeviceCount()`, `cuda.Device(i)`, `asarray`, numpy's functions)."""
    global _cupy, _cupyx, _cupy_error, _default
    _cupy, _cupyx, _cupy_error = xp, xpx, None
    _cuda_devices.clear()
    if _default.kind == "cuda":
        _default = CPU


def _import_cupy() -> ModuleType:
    """Import cupy once; raise a DeviceError that says why when it cannot be used."""
    global _cupy, _cupy_error
    if _cupy is not None:
        return _cupy
    if _cupy_error is not None:
        raise DeviceError(_cupy_error)
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install
        _cupy_error = (
            f"Device.cuda: cupy is not importable ({type(exc).__name__}: {exc}); "
            "install it with `pip install rtxviz[cuda]` on a machine with an NVIDIA GPU"
        )
        raise DeviceError(_cupy_error) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy imports without a GPU, then fails on the first CUDA call
        _cupy_error = f"Device.cuda: cupy is installed but no CUDA GPU is usable ({exc})"
        raise DeviceError(_cupy_error) from None
    if count < 1:
        _cupy_error = "Device.cuda: cupy is installed but no CUDA GPU is present"
        raise DeviceError(_cupy_error)
    _cupy = cupy
    return cupy


def cupyx_module() -> ModuleType:
    """cupyx, or the companion `use_cuda_backend` registered: what a kernel needs beyond cupy's namespace."""
    global _cupyx
    _import_cupy()
    if _cupyx is None:
        import cupyx

        _cupyx = cupyx
    return _cupyx


def cuda_is_available() -> bool:
    """True when cupy imports and at least one GPU answers. Never allocates.

    >>> isinstance(cuda_is_available(), bool)
    True
    """
    try:
        _import_cupy()
    except DeviceError:
        return False
    return True


class CudaNamespace:
    """`torch.cuda`'s few functions a training script calls, as `rtxviz.cuda`: ``device = rtxviz.device("cuda" if
    rtxviz.cuda.is_available() else "cpu")``.

    >>> cuda = CudaNamespace()
    >>> cuda.device_count() == (1 if cuda.is_available() else 0) or cuda.device_count() > 1
    True
    """

    @staticmethod
    def is_available() -> bool:
        """True when cupy imports and a GPU answers (`cuda_is_available`)."""
        return cuda_is_available()

    @staticmethod
    def device_count() -> int:
        """The number of GPUs cupy sees (0 without cupy or a GPU)."""
        if not cuda_is_available():
            return 0
        return int(_import_cupy().cuda.runtime.getDeviceCount())

    @staticmethod
    def manual_seed(seed: int) -> None:
        """Nothing to do: rtxviz draws every random number from the one generator `rtxviz.manual_seed` seeds, on
        the CPU, then moves it to the device, so there is no CUDA generator (and the same seed gives the same
        numbers on either device)."""

    manual_seed_all = manual_seed

    @staticmethod
    def synchronize(device: Any = None) -> None:
        """Wait for the GPU's queued work (nothing to wait for without one)."""
        if cuda_is_available():
            _import_cupy().cuda.get_current_stream().synchronize()


#: `torch.cuda`'s spelling (rtxviz.cuda)
cuda = CudaNamespace()


class Device:
    """Where a tensor lives: `Device.cpu()` (numpy) or `Device.cuda(index)` (cupy).

    >>> Device.cpu()
    Device('cpu')
    >>> Device.cpu() == Device('cpu')
    True
    """

    __slots__ = ("kind", "index")
    kind: str
    index: int | None

    def __init__(self, spec: str | Device = "cpu", index: int | None = None) -> None:
        if isinstance(spec, Device):
            self.kind, self.index = spec.kind, spec.index
            return
        kind, _, idx = str(spec).partition(":")
        if kind not in ("cpu", "cuda"):
            raise DeviceError(f"Device: unknown device {spec!r}; use 'cpu' or 'cuda[:index]'")
        if kind == "cpu":
            self.kind, self.index = "cpu", None
            return
        self.kind = "cuda"
        self.index = int(idx) if idx else (index if index is not None else 0)

    @staticmethod
    def cpu() -> Device:
        return CPU

    @staticmethod
    def cuda(index: int = 0) -> Device:
        """The CUDA device `index`; raises DeviceError when cupy or a GPU is missing."""
        cupy = _import_cupy()
        count = cupy.cuda.runtime.getDeviceCount()
        if not 0 <= index < count:
            raise DeviceError(f"Device.cuda: index {index} out of range, {count} GPU(s) present")
        return Device("cuda", index)

    @property
    def xp(self) -> ModuleType:
        """The array module of this device: numpy or cupy."""
        return np if self.kind == "cpu" else _import_cupy()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and self.kind == other.kind and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"


CPU = Device("cpu")
_cuda_devices: dict[int, Device] = {}


def device_of(array: Any) -> Device:
    """The Device an ndarray lives on."""
    if type(array) is np.ndarray or isinstance(array, np.generic):
        return CPU
    dev_id = array.device.id
    dev = _cuda_devices.get(dev_id)
    if dev is None:
        dev = _cuda_devices[dev_id] = Device("cuda", dev_id)
    return dev


def xp_of(array: Any) -> ModuleType:
    """numpy for numpy arrays, cupy for cupy arrays: the one seam every kernel goes through."""
    if type(array) is np.ndarray or isinstance(array, np.generic):
        return np
    return _import_cupy()


def to_device(array: Any, device: Device) -> Any:
    """Copy an array to `device` (no copy when it is already there)."""
    if device.kind == "cpu":
        return array if type(array) is np.ndarray else array.get()
    cupy = _import_cupy()
    with cupy.cuda.Device(device.index):
        return cupy.asarray(array)


_default: Device = CPU


def set_default_device(device: Device | str | None) -> None:
    """The device of tensors made without one (constructors, `Tensor(data)` of host data, random draws), as
    torch.set_default_device; None is the CPU.

    >>> set_default_device("cpu"); get_default_device()
    Device('cpu')
    """
    global _default
    _default = CPU if device is None else as_device(device)


def get_default_device() -> Device:
    """The device `set_default_device` chose (the CPU unless it was called)."""
    return _default


def as_device(device: Device | str | None) -> Device:
    if device is None:
        return _default
    if isinstance(device, Device):
        return device
    dev = Device(device)
    return Device.cuda(dev.index or 0) if dev.kind == "cuda" else CPU
