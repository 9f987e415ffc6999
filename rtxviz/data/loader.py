"""DataLoader: batches from a Dataset, optionally shuffled by a seeded numpy Generator.

>>> from rtxviz import Tensor
>>> from rtxviz.data import TensorDataset
>>> ds = TensorDataset(Tensor.arange(10, dtype="float32"), Tensor.arange(10))
>>> [xb.shape for xb, yb in DataLoader(ds, batch_size=4)]
[(4,), (4,), (2,)]
>>> len(DataLoader(ds, batch_size=4, drop_last=True))
2
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..engine.errors import ShapeError
from ..engine.tensor import Tensor
from .dataset import Dataset, takes_batches


def default_collate(items: Sequence[Any]) -> Any:
    """Stack a list of items into a batch: Tensors/arrays/numbers become one Tensor with a leading batch dim;
    tuples, lists and dicts are collated field by field."""
    first = items[0]
    if isinstance(first, Tensor):
        xp = first.xp
        shapes = {t.shape for t in items}
        if len(shapes) != 1:
            raise ShapeError(f"default_collate: items have different shapes {sorted(shapes)}; pass a collate_fn")
        return Tensor._wrap(xp.stack([t.data for t in items]))
    if isinstance(first, tuple | list):
        return type(first)(default_collate([it[i] for it in items]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: default_collate([it[k] for it in items]) for k in first}
    if isinstance(first, bool | int | float | np.number | np.ndarray):
        return Tensor(np.stack([np.asarray(v) for v in items]))
    return list(items)


class DataLoader:
    """Iterate over `dataset` in batches.

    shuffle: a new permutation every epoch from `generator` (a numpy Generator) or, if none is given, from
    `np.random.default_rng(seed)` made once here, so `seed` fixes the whole sequence of epochs.
    A TensorDataset (or a Subset of one) without a collate_fn is batched by fancy indexing (one copy per batch,
    no Python loop).
    `num_workers` and `pin_memory` are taken for PyTorch code: batches are always made in the calling process
    (no worker processes start), and there is no pinned memory to ask for.
    """

    def __init__(self, dataset: Dataset, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 collate_fn: Callable[[list], Any] | None = None, seed: int | None = 0,
                 generator: np.random.Generator | None = None, num_workers: int = 0, pin_memory: bool = False
                 ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be an integer >= 1, got {batch_size!r} (rtxviz's loader "
                             "always batches; batch_size=None, PyTorch's unbatched loading, is not supported)")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int | np.integer) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an integer >= 0, got {num_workers!r}")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, int(batch_size), shuffle, drop_last
        self.collate_fn = collate_fn
        self.generator = generator if generator is not None else np.random.default_rng(seed)

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        return self.generator.permutation(n) if self.shuffle else np.arange(n)

    def __iter__(self) -> Iterator[Any]:
        order = self._order()
        n, bs = len(order), self.batch_size
        stop = n - n % bs if self.drop_last else n
        fast = self.collate_fn is None and takes_batches(self.dataset)
        collate = self.collate_fn or default_collate
        for start in range(0, stop, bs):
            idx = order[start:start + bs]
            if fast:
                yield self.dataset.take(idx)  # type: ignore[attr-defined]  # a TensorDataset or Subset (fast)
            else:
                yield collate([self.dataset[int(i)] for i in idx])
