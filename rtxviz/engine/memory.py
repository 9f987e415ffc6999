"""Memory accounting: the bytes of activations the recorded graph holds for backward.

`current` and `peak` count arrays saved for backward by recorded nodes (non-leaf inputs and outputs, and the
arrays an op keeps in its `ctx.state`, such as conv2d's im2col columns or dropout's mask: the activation memory
that checkpointing trades for recomputation), each underlying buffer once however many
nodes or views share it. Parameters and user inputs are not activations and are reported separately, from a
snapshot scan, with gradients and all live tensors.

>>> import rtxviz
>>> stats = rtxviz.memory_stats()
>>> sorted(k for k in stats if k in ("current", "peak"))
['current', 'peak']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .tensor import live_tensors

# id(root buffer) -> [number of nodes holding it, nbytes]; a held buffer is alive, so its id is stable.
_held: dict[int, list[int]] = {}
_stats = {"current": 0, "peak": 0}


def root_of(array: Any) -> Any:
    """The buffer an array (or a view of a view) reads: the end of its `.base` chain."""
    base = array.base
    while base is not None and hasattr(base, "nbytes"):
        array = base
        base = getattr(array, "base", None)
    return array


def _add(array: Any) -> int:
    root = array if array.base is None else root_of(array)  # most saved arrays own their buffer
    key = id(root)
    entry = _held.get(key)
    if entry is None:
        _held[key] = [1, int(root.nbytes)]
        cur = _stats["current"] = _stats["current"] + int(root.nbytes)
        if cur > _stats["peak"]:
            _stats["peak"] = cur
    else:
        entry[0] += 1
    return key


def track(inputs: tuple | None, out_data: Any) -> tuple[int, ...] | None:
    """Count what a new node saves; returns the keys to release later (None when it saves no activation)."""
    keys = []
    if inputs is not None:
        for t in inputs:
            if t._node is not None:
                keys.append(_add(t.data))
    if out_data is not None:
        keys.append(_add(out_data))
    return tuple(keys) if keys else None


# Types an op's ctx.state commonly holds that are certainly not arrays (shapes, sizes, flags, dtypes).
_NOT_ARRAYS = frozenset({tuple, list, int, float, bool, str, type(None), dict, np.dtype})


def _is_array(obj: Any) -> bool:
    """An ndarray of numpy or cupy (both have .nbytes and .base); numpy scalars are not buffers we track."""
    cls = obj.__class__
    if cls is np.ndarray:
        return True
    if cls in _NOT_ARRAYS or isinstance(obj, np.generic):
        return False
    return hasattr(obj, "nbytes") and hasattr(obj, "base")


def state_arrays(state: Any) -> list:
    """The arrays an op keeps in its `ctx.state`, by the rule `track_state` counts them: the state itself when it
    is an array, or the arrays of a tuple/list one level deep, in order.

    >>> import numpy as np
    >>> [a.shape for a in state_arrays((np.zeros(3), (2, 3), np.ones((2, 2))))]
    [(3,), (2, 2)]
    """
    cls = state.__class__
    if cls is tuple or cls is list:
        return [s for s in state if _is_array(s)]
    return [state] if _is_array(state) else []


def track_state(state: Any, keys: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """Also count the arrays an op keeps in `ctx.state` (conv2d's im2col columns, dropout's mask): an array, or
    a tuple/list holding arrays one level deep; anything else is ignored. Returns `keys` extended."""
    cls = state.__class__
    if cls is tuple or cls is list:
        found = None
        for s in state:
            c = s.__class__
            if c is int or c is tuple:  # a shape or a size, the usual state: no lookups
                continue
            if c is np.ndarray or _is_array(s):
                if found is None:
                    found = []
                found.append(_add(s))
        if found is None:
            return keys
        new = tuple(found)
    elif _is_array(state):
        new = (_add(state),)
    else:
        return keys
    return new if keys is None else keys + new


def untrack(keys: tuple[int, ...]) -> None:
    for key in keys:
        entry = _held.get(key)
        if entry is None:
            continue
        entry[0] -= 1
        if entry[0] == 0:
            del _held[key]
            _stats["current"] -= entry[1]


def reset_peak_memory_stats() -> None:
    """Start peak tracking afresh from the current activation bytes."""
    _stats["peak"] = _stats["current"]


def memory_stats(scan: bool = True) -> dict[str, int]:
    """Bytes the engine holds. Keys:

    - current, peak: activation bytes saved for backward (see module doc), now and at the peak.
    - saved_buffers: how many distinct buffers that is.
    - parameter_bytes, gradient_bytes, tensor_bytes: from a scan of live tensors (leaf Variables that
      require grad, their `.grad`, and every live Tensor/Variable), each buffer once. `scan=False` skips it.
    """
    out = {"current": _stats["current"], "peak": _stats["peak"], "saved_buffers": len(_held)}
    if scan:
        params: dict[int, int] = {}
        grads: dict[int, int] = {}
        every: dict[int, int] = {}
        for obj in live_tensors():
            root = root_of(obj.data)
            every[id(root)] = int(root.nbytes)
            if obj.requires_grad and obj._node is None:
                params[id(root)] = int(root.nbytes)
                g = getattr(obj, "grad", None)
                if g is not None:
                    groot = root_of(g.data)
                    grads[id(groot)] = int(groot.nbytes)
        out.update(parameter_bytes=sum(params.values()), gradient_bytes=sum(grads.values()),
                   tensor_bytes=sum(every.values()))
    return out
