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

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..engine.device import Device
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


# -- torch.save / torch.load: any nesting of tensors, arrays, numbers, strings, dicts, lists and tuples ---------------

#: the archive entry that holds the saved object's structure (JSON); the arrays are the entries "0", "1", ...
_STRUCTURE = "__rtxviz_save__"


def _encode(obj: Any, arrays: list[np.ndarray], where: str) -> Any:
    """`obj` as JSON-able data, its arrays appended to `arrays` and referred to by position."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, Tensor | np.ndarray | np.generic):
        arr = obj.numpy() if isinstance(obj, Tensor) else np.asarray(obj)
        if arr.dtype == object:
            raise TypeError(f"save: {where} is an array of Python objects (dtype object); only numeric arrays save")
        arrays.append(arr)
        kind = "tensor" if isinstance(obj, Tensor) else "ndarray" if isinstance(obj, np.ndarray) else "scalar"
        return {"$": kind, "i": len(arrays) - 1}
    if isinstance(obj, Mapping):
        return {"$": "dict", "items": [[_encode(k, arrays, f"a key of {where}"), _encode(v, arrays, f"{where}[{k!r}]")]
                                       for k, v in obj.items()]}
    if isinstance(obj, list | tuple):
        items = [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else {"$": "tuple", "items": items}
    hint = "; save model.state_dict() and load it into a new model" if isinstance(obj, Module) else ""
    raise TypeError(f"save: {where} is a {type(obj).__name__}; only tensors, numpy arrays, numbers, "
                    f"strings, None and dicts, lists and tuples of them can be saved{hint}")


def _decode(data: Any, arrays: Any, device: Any) -> Any:
    if isinstance(data, list):
        return [_decode(v, arrays, device) for v in data]
    if not isinstance(data, dict):
        return data
    kind = data["$"]
    if kind == "dict":
        return {_decode(k, arrays, device): _decode(v, arrays, device) for k, v in data["items"]}
    if kind == "tuple":
        return tuple(_decode(v, arrays, device) for v in data["items"])
    arr = arrays[str(data["i"])]
    if kind == "tensor":
        return Tensor._wrap(arr).to(device)
    return arr if kind == "ndarray" else arr[()]


def save_object(obj: Any, f: str | os.PathLike | Any) -> None:
    """torch.save: write `obj` (a state dict, an optimizer's or scheduler's state dict, a checkpoint dict of them
    with numbers and strings) to the path `f`, exactly that name, or to a binary file object. The file is a
    .npz archive (the arrays, and the structure as JSON), so loading never unpickles code.

    >>> import io
    >>> from rtxviz import tensor
    >>> buf = io.BytesIO(); save_object({"epoch": 3, "w": tensor([1.0, 2.0])}, buf); _ = buf.seek(0)
    >>> ck = load_object(buf); ck["epoch"], ck["w"].tolist()
    (3, [1.0, 2.0])
    """
    arrays: list[np.ndarray] = []
    structure = json.dumps(_encode(obj, arrays, "the object"))
    entries = {str(i): a for i, a in enumerate(arrays)}
    entries[_STRUCTURE] = np.frombuffer(structure.encode("utf-8"), dtype=np.uint8)
    if isinstance(f, str | os.PathLike):
        with open(os.fspath(f), "wb") as fh:  # a file object: np.savez would add ".npz" to a name
            np.savez(fh, **entries)  # type: ignore[arg-type]  # numpy's stub types the first keyword oddly
    else:
        np.savez(f, **entries)  # type: ignore[arg-type]


def load_object(f: str | os.PathLike | Any, map_location: Any = None, weights_only: bool = True) -> Any:
    """torch.load: read what `save_object` (rtxviz.save) wrote, tensors on `map_location` ("cpu", "cuda", a
    Device; None: the CPU). A file written by `rtxviz.nn.save` (one array per state-dict key) loads as that
    state dict. `weights_only` is accepted for PyTorch's signature: nothing is ever unpickled either way."""
    if map_location is not None and not isinstance(map_location, str | Device):
        raise TypeError(f"load: map_location must be a device ('cpu', 'cuda', a Device), got "
                        f"{type(map_location).__name__}")
    name = os.fspath(f) if isinstance(f, str | os.PathLike) else f"<{type(f).__name__}>"
    try:
        archive = np.load(os.fspath(f) if isinstance(f, str | os.PathLike) else f, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ValueError(f"load: {name!r} was not written by rtxviz.save (not an .npz archive: {exc})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"load: {name!r} was not written by rtxviz.save (a single .npy array, not an archive)")
    with archive:
        if _STRUCTURE not in archive.files:  # rtxviz.nn.save's flat state dict
            return {key: Tensor._wrap(archive[key]).to(map_location) for key in archive.files}
        structure = json.loads(archive[_STRUCTURE].tobytes().decode("utf-8"))
        return _decode(structure, archive, map_location)
