"""Datasets: the Dataset protocol, TensorDataset (rows of equal-length tensors), and torch.utils.data's
combinators Subset, ConcatDataset and StackDataset.

>>> from rtxviz import Tensor
>>> ds = TensorDataset(Tensor.ones([4, 2]), Tensor.arange(4))
>>> len(ds), ds[1][1].item()
(4, 1)
>>> Subset(ds, [3, 0])[0][1].item()
3
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np

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


def takes_batches(dataset: Any) -> bool:
    """Whether `dataset.take(indices)` gives a whole batch at once (a TensorDataset, or Subsets of one): the
    DataLoader's fast path."""
    if isinstance(dataset, TensorDataset):
        return True
    return isinstance(dataset, Subset) and takes_batches(dataset.dataset)


class Subset(Dataset):
    """The items of `dataset` at `indices`, in that order: item i is `dataset[indices[i]]`. A list of positions
    gives `dataset[[indices[i] for i in positions]]` (a batch, for a TensorDataset), as torch's."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        self._index_source: Any = None  # the `indices` object _index_array was made from
        self._index_array = np.zeros(0, dtype=np.int64)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, list):  # the dataset takes a list of indices (as a TensorDataset does)
            return cast(Any, self.dataset)[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def _array(self) -> np.ndarray:
        # converted once per `indices` object, not once per batch (assigning new indices is noticed)
        if self._index_source is not self.indices:
            self._index_array = np.asarray(self.indices, dtype=np.int64).reshape(-1)
            self._index_source = self.indices
        return self._index_array

    def take(self, indices: Any) -> Any:
        """Items at positions `indices` (a numpy int array) as one batch, when the dataset batches (see
        `takes_batches`)."""
        return self.dataset.take(self._array()[np.asarray(indices, dtype=np.int64)])  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """The items of `datasets` one dataset after another; `cumulative_sizes[k]` is the length of the first k+1.
    Negative indices count from the end."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: give at least one dataset, got an empty iterable")
        self.cumulative_sizes: list[int] = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> Any:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"ConcatDataset: index {index} is out of range for {n} items")
        if index < 0:
            index += n
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][index - start]


class StackDataset(Dataset):
    """Item i gathers item i of every dataset: a tuple (`StackDataset(a, b)`) or a dict (`StackDataset(x=a,
    y=b)`). The datasets must have the same length."""

    datasets: tuple[Dataset, ...] | dict[str, Dataset]

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise ValueError("StackDataset: give datasets as positional or as keyword arguments, not both "
                             f"({len(args)} positional, keywords {sorted(kwargs)})")
        if not args and not kwargs:
            raise ValueError("StackDataset: give at least one dataset")
        parts = list(args) if args else list(kwargs.values())
        lengths = [len(d) for d in parts]
        if len(set(lengths)) != 1:
            raise ValueError(f"StackDataset: the datasets have different lengths {lengths}")
        self._length = lengths[0]
        self.datasets = args if args else dict(kwargs)

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length
