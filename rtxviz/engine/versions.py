"""Version counters: which buffers were written in place, and when, so that a backward rule never reads a saved
tensor that changed after its op saved it.

Every in-place write through the public API (the in-place methods, ``x[...] = v``, ``x += 1``, an optimizer's
step) calls `bump` on the buffer it wrote. A write is stamped with a fresh value of the node-id counter, so it
sorts after every node recorded before it and before every node recorded after it: the backward walk only has
to ask, for a node whose id is below the latest stamp, whether a buffer it saved carries a later stamp (`check`).
Recording an op costs nothing for this; a backward with no write since its forward pays one comparison per node.

Views share their buffer, so they share its version (as PyTorch's version counters do).

>>> import numpy as np
>>> a = np.zeros(3)
>>> version(a), version(a[1:])
(0, 0)
>>> bump(a[1:], "a[1:] += 1")
>>> version(a), version(a[1:])
(1, 1)
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from .errors import GraphError
from .memory import root_of

#: The stamp of the most recent write anywhere (0: none yet). Read by the backward walk for every node.
LAST_STAMP = 0
_RECENT = 64  # stamps remembered per buffer: enough to say exactly which version a node saw, in practice

#: One counter orders recorded nodes (TapeNode.id) and in-place writes (their stamps).
node_ids = itertools.count(1)
next_stamp: Callable[[], int] = node_ids.__next__


class InplaceError(GraphError):
    """A tensor that a recorded op saved for backward was modified in place before that backward ran."""


class _Writes:
    __slots__ = ("ref", "version", "stamps", "site", "recorded")

    def __init__(self, ref: Any) -> None:
        self.ref = ref
        self.version = 0
        self.stamps: deque[int] = deque(maxlen=_RECENT)
        self.site = ""
        # the latest write recorded into a graph: (its stamp, the id of the node the written Variable now has,
        # its site); see `note_recorded_write`
        self.recorded: tuple[int, int, str] | None = None


_BUFFERS: dict[int, _Writes] = {}  # id(root buffer) -> its writes; an entry goes when its buffer dies


def _forget(key: int, _ref: object) -> None:
    """The weakref callback: the buffer died, so its write record goes."""
    _BUFFERS.pop(key, None)


def _entry(array: Any) -> _Writes | None:
    root = root_of(array)
    e = _BUFFERS.get(id(root))
    return e if e is not None and e.ref() is root else None


def _record_write(array: Any, stamp: int, site: str) -> None:
    """Count one in-place write to `array`'s buffer, at `stamp`."""
    root = array if array.base is None else root_of(array)  # most arrays written in place own their buffer
    key = id(root)
    e = _BUFFERS.get(key)
    if e is None or e.ref() is not root:
        try:
            ref = weakref.ref(root, functools.partial(_forget, key))
        except TypeError:  # a buffer that takes no weak references (a numpy scalar): nothing can save it
            return
        e = _BUFFERS[key] = _Writes(ref)
    e.version += 1
    e.stamps.append(stamp)
    e.site = site


def bump(array: Any, site: str = "") -> None:
    """Record an in-place write to `array`'s buffer (`site`: what wrote it, for error messages)."""
    global LAST_STAMP
    stamp = next_stamp()
    _record_write(array, stamp, site)
    LAST_STAMP = stamp


def bump_all(arrays: list, site: str = "") -> None:
    """`bump` for buffers written together, with no op recorded between the writes (an optimizer's step): one
    stamp for all of them, since a stamp only has to sort after the nodes recorded before the writes and before
    those recorded after; each buffer's version still counts its own writes."""
    global LAST_STAMP
    if not arrays:
        return
    stamp = next_stamp()
    buffers = _BUFFERS
    for array in arrays:
        # _record_write inlined for a buffer written before (every optimizer step after the first): on a small
        # model the call per parameter was a tenth of the step
        root = array if array.base is None else root_of(array)
        e = buffers.get(id(root))
        if e is None or e.ref() is not root:
            _record_write(array, stamp, site)  # its first write: the entry and its weak reference
            continue
        e.version += 1
        e.stamps.append(stamp)
        e.site = site
    LAST_STAMP = stamp


#: The stamp of the latest in-place write recorded into a graph (0: none yet). `graph.apply` tests it once per
#: recorded op: a program that never writes a graph's value in place pays nothing more.
RECORDED_LAST = 0


def note_recorded_write(array: Any, node_id: int) -> None:
    """The write just bumped on `array`'s buffer was recorded: the Variable written now has node `node_id`. Every
    other Variable over that buffer (a view of it, or the base of a view written) with an older node now holds
    values its node did not compute, and its gradient would miss the write: `check_alias` refuses it."""
    global RECORDED_LAST
    e = _entry(array)
    if e is not None:
        e.recorded = (LAST_STAMP, node_id, e.site)
        RECORDED_LAST = LAST_STAMP


def check_alias(t: Any, op: str, index: int) -> None:
    """Raise InplaceError when input `index` of `op` is a Variable whose buffer a recorded in-place write reached
    through another Variable after `t`'s node was made: `h[:1].zero_()` then `h.sum()`, or `v = h.T`,
    `h.mul_(2)`, then `v.sum()`. Its values include the write, its node does not, so its gradient would be
    silently wrong. (PyTorch rewrites the alias's graph to include the write; rtxviz refuses instead.)"""
    node = t._node
    e = _entry(t.data)
    if e is None or e.recorded is None:
        return
    stamp, written, site = e.recorded
    if node.id < stamp and node.id != written:
        raise InplaceError(
            f"{op}: input {index} ({t.dtype} of shape {tuple(t.shape)}, made by {node.op.name}) shares its buffer with "
            f"a tensor written in place after it was made ({site or 'an in-place op'}): it holds the new values but "
            "its gradient would not see the write. Make it after the in-place op, .clone() it before, or write "
            "out of place (h = h * 2, or h[...] = v on the tensor itself)")


def version(array: Any) -> int:
    """How many times `array`'s buffer was written in place (through the public API)."""
    e = _entry(array)
    return 0 if e is None else e.version


def _saved_arrays(node: Any) -> list[tuple[str, Any, Any]]:
    """(what, the array, its tensor or None) of everything `node` saved for backward."""
    out = []
    if node.inputs is not None:
        for i, t in enumerate(node.inputs):
            if t is not None:
                out.append((f"input {i}", t.data, t))
    if node.out_data is not None:
        out.append(("output", node.out_data, None))
    return out


def check(node: Any) -> None:
    """Raise InplaceError when a tensor `node` saved was written in place after the node was recorded."""
    for what, array, tensor in _saved_arrays(node):
        e = _entry(array)
        if e is None or not e.stamps or e.stamps[-1] < node.id:
            continue
        later = sum(1 for s in e.stamps if s > node.id)
        saved = e.version - later
        exact = later < len(e.stamps) or len(e.stamps) < _RECENT
        raise InplaceError(_message(node, what, array, tensor, saved if exact else None, e))


def _message(node: Any, what: str, array: Any, tensor: Any, saved: int | None, e: _Writes) -> str:
    name = getattr(tensor, "name", None)
    label = f"{what} ({'`' + name + '`, ' if name else ''}{array.dtype} of shape {tuple(array.shape)})"
    module = f" in module {node.module_path}" if node.module_path else ""
    at = f"version {saved}" if saved is not None else f"a version before the last {_RECENT} writes"
    text = (f"backward of {node.op.name} (node #{node.id}{module}): its saved {label} was saved at {at} and is now "
            f"at version {e.version}: it was modified in place after the op recorded it")
    if e.site:
        text += f" (last written by {e.site})"
    site = getattr(node, "site", None)
    text += (f". The op was created at {site}" if site else
             ". Run the forward inside rtxviz.detect_anomaly() to see the file and line that created the op")
    return text + ". Modify a copy (x.clone()) instead, or do the write after backward."
