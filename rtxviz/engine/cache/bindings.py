"""Where an array a replayed op reads comes from (a binding), and the small facts capture and replay share."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from ..device import device_of
from ..errors import GraphCacheError
from ..variable import Variable

# -- bindings: (kind, index[, path]) tuples ----------------------------------------------------------------
IN, SLOT, PARAM, REF, CONST, STATE_PART, BAD = range(7)
ATOMS = (int, float, bool, str, bytes, complex, slice, type(None), type(Ellipsis), np.generic, np.dtype, type)
# State entries never worth indexing by identity (small ints, dtypes and the like are shared singletons).
STATE_SKIP = (int, bool, str, bytes, slice, type(None), type(Ellipsis), np.dtype, type)
SLOT_ARRAY_MIN_BYTES = 4096  # intermediates at least this big are freed at their last use in the replay


def is_array(v: Any) -> bool:
    return type(v) is np.ndarray or hasattr(v, "__cuda_array_interface__")


def signature_of(t: Any) -> tuple:
    """One input's signature: shape, dtype, device, and what kind of value it is (Tensor, leaf Variable)."""
    d = t.data
    kind = "var" if t._is_var and t.requires_grad else ("const_var" if t._is_var else "tensor")
    # every call of run_cached computes this per input: numpy's device without building a Device to name it
    return (tuple(d.shape), d.dtype, "cpu" if type(d) is np.ndarray else str(device_of(d)), kind)


def checksum(a: Any) -> Any:
    """A cheap fingerprint of an array's bytes (numpy: CRC32 without a copy; cupy: none, identity only)."""
    if type(a) is not np.ndarray:
        return None
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return zlib.crc32(memoryview(a).cast("B"))


class ReplayCtx:
    """What an op's forward receives during a replay: its attrs and a place for its state (TapeNode-like, but
    with no finalizer and no memory accounting: a replay records no graph)."""

    __slots__ = ("attrs", "state")
    attrs: Any
    state: Any


def module_name(module: Any) -> str:
    path = module.path
    return f"{path} ({type(module).__name__})" if path else type(module).__name__


def mode_name(training: Any) -> str:
    return "training" if training else "eval"


def modules_key(modules: tuple) -> tuple:
    return tuple((id(ref()), training, version) for ref, training, version, _ in modules)


def param_ids(params: Any) -> tuple | None:
    if params is None:
        return None
    ids: list[int] = []
    for p in params:  # run_cached checks its params= on every call: one loop, no enumerate or generator
        if not (isinstance(p, Variable) and p.requires_grad and p._node is None):
            raise GraphCacheError(f"params: entry {len(ids)} is not a leaf Variable that requires grad")
        ids.append(id(p))
    return tuple(ids)
