"""Datasets: the Dataset protocol and TensorDataset (rows of equal-length tensors).

>>> from rtxviz import Tensor
>>> ds = TensorDataset(Tensor.ones([4, 2]), Tensor.arange(4))
>>> len(ds), ds[1][1].item()
(4, 1)
"""

from __future__ import annotations

from typing import Any

from ..engine.errors import ShapeError
from ..engine.tensor import Tensor


class Dataset:
    """Anything with `__getitem__(index)` and `__len__()`; subclass and implement both."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__}: implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__}: implement __len__")


class TensorDataset(Dataset):
    """Item i is the tuple of row i of every tensor. Indexing with an int64 array of indices gives a whole
    batch at once (the DataLoader's fast path)."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor")
        tensors = tuple(t if isinstance(t, Tensor) else Tensor(t) for t in tensors)
        n = tensors[0].shape[0] if tensors[0].ndim else None
        for i, t in enumerate(tensors):
            if t.ndim == 0 or t.shape[0] != n:
                raise ShapeError(f"TensorDataset: every tensor needs the same first dim; tensor 0 has shape "
                                 f"{tensors[0].shape}, tensor {i} has {t.shape}")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        # a row of a 1-D tensor is a numpy scalar, not an array: keep it a 0-d array of the tensor's kind
        return tuple(Tensor._wrap(t.xp.asarray(t.data[index])) for t in self.tensors)

    def take(self, indices: Any) -> tuple[Tensor, ...]:
        """Rows `indices` (a numpy int array) of every tensor, each as one batched Tensor."""
        out = []
        for t in self.tensors:
            data = t.data
            idx = indices if type(data).__module__ == "numpy" else t.xp.asarray(indices)
            out.append(Tensor._wrap(data[idx]))
        return tuple(out)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]
