"""Keep freed array memory in the process between training steps (glibc only).

A training step allocates and frees the same activation-sized buffers (1-5 MiB each) every iteration. glibc's
malloc gives the top of its heap back to the kernel as soon as more than `M_TRIM_THRESHOLD` of it is free (by
default twice the largest block it has mmapped so far, a few MiB), so each step's first touch of those buffers
page-faults them in again. On the 2-core AMD EPYC VM of benchmarks/README.md that was half of a BatchNorm + conv
training step (bn_conv_train): round medians of 14.6-17.7 ms per step as shipped, 7.4-7.8 ms with the heap kept.
PyTorch keeps the memory in its own allocator; numpy has no such cache for large arrays, so the engine asks malloc
to keep it.

`tune_malloc()` runs once when the engine is imported. It raises the trim threshold to 256 MiB and pins the
mmap threshold at 32 MiB (glibc's maximum for the dynamic one; setting any of these parameters turns the dynamic
adjustment off, so it is set explicitly). The cost: up to 256 MiB of freed memory stays with the process instead
of going back to the kernel. `RTXVIZ_MALLOC_TUNING=0` in the environment leaves malloc as it was. Elsewhere (macOS,
Windows, musl) nothing is done.

>>> MMAP_THRESHOLD // 2**20, TRIM_THRESHOLD // 2**20  # MiB
(32, 256)
"""

from __future__ import annotations

import ctypes
import os

# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

TRIM_THRESHOLD = 256 * 1024 * 1024
MMAP_THRESHOLD = 32 * 1024 * 1024

_tuned: bool | None = None


def tune_malloc() -> bool:
    """Apply the settings above once per process; True when glibc accepted them, False when not applied."""
    global _tuned
    if _tuned is None:
        _tuned = _apply()
    return _tuned


def is_glibc() -> bool:
    """True in a process linked against glibc (asked of the C library itself: no file is read)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError):  # the name is unknown outside glibc
        return False


def _apply() -> bool:
    if os.environ.get("RTXVIZ_MALLOC_TUNING", "1") == "0":
        return False
    if not is_glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 for a value it refuses
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
