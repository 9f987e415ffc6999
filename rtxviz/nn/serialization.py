"""Save and load a model's state as a plain .npz archive: one array per state-dict key, no pickle.

>>> import tempfile, os
>>> from rtxviz.nn import Linear
>>> a, b = Linear(3, 2), Linear(3, 2)
>>> with tempfile.TemporaryDirectory() as d:
...     path = save(a, os.path.join(d, "linear.npz"))
...     _ = load_into(b, path)
>>> bool((a.weight.numpy() == b.weight.numpy()).all())
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..engine.tensor import Tensor
from .module import Module, StateDictError


def _as_state(obj: Module | Mapping[str, Any]) -> dict[str, np.ndarray]:
    state = obj.state_dict() if isinstance(obj, Module) else obj
    out: dict[str, np.ndarray] = {}
    for key, value in state.items():
        arr = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        if arr.dtype == object:
            raise TypeError(f"save: {key!r} is not a numeric array (dtype object); only arrays can be saved")
        out[key] = arr
    return out


def save(obj: Module | Mapping[str, Any], path: str | os.PathLike) -> str:
    """Write a model's state dict (or a mapping of arrays/Tensors) to `path` (.npz). Returns the path written."""
    path = os.fspath(path)
    if not path.endswith(".npz"):
        path += ".npz"  # np.savez would add it silently; say so by returning the real name
    np.savez(path, **_as_state(obj))  # type: ignore[arg-type]  # numpy's stub types the first keyword oddly
    return path


def load(path: str | os.PathLike, device: Any = None) -> dict[str, Tensor]:
    """Read a state dict written by `save` (pickled objects are refused)."""
    with np.load(os.fspath(path), allow_pickle=False) as archive:
        return {key: Tensor._wrap(archive[key]).to(device) for key in archive.files}


def load_into(model: Module, path: str | os.PathLike, strict: bool = True) -> Module:
    """Load the state saved at `path` into `model` in place, refusing a file that does not fit it.

    Keys, shapes and dtypes are all checked before anything is written; the error names the key, the model's
    shape and the file's shape.
    """
    state = load(path)
    try:
        model.load_state_dict(state, strict=strict)
    except StateDictError as exc:
        raise StateDictError(f"{exc} (file {os.fspath(path)!r})") from None
    return model
