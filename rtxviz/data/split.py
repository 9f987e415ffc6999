"""random_split: a dataset cut into non-overlapping random Subsets, with torch.utils.data's lengths rules.

>>> import numpy as np
>>> from rtxviz import Tensor
>>> from rtxviz.data import TensorDataset
>>> ds = TensorDataset(Tensor.arange(10))
>>> train, val, test = random_split(ds, [0.7, 0.2, 0.1], generator=np.random.default_rng(0))
>>> len(train), len(val), len(test)
(7, 2, 1)
>>> sorted(train.indices + val.indices + test.indices) == list(range(10))
True
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence

import numpy as np

from ..engine import random as rtx_random
from .dataset import Dataset, Subset


def _fraction_lengths(fractions: Sequence[float], n: int) -> list[int]:
    """torch's rule: ⌊n · fraction⌋ each, then the items left over one each to the splits in turn, from the
    first."""
    lengths = []
    for i, frac in enumerate(fractions):
        if not 0 <= frac <= 1:
            raise ValueError(f"random_split: fraction {frac} at index {i} is not between 0 and 1")
        lengths.append(math.floor(n * frac))
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"random_split: split {i} has length 0 (an empty dataset)", UserWarning, stacklevel=3)
    return lengths


def _check_lengths(lengths: Sequence[float], n: int) -> list[int]:
    """Item counts: whole numbers >= 0 summing to n."""
    if sum(lengths) != n:
        raise ValueError(f"random_split: the lengths {list(lengths)} sum to {sum(lengths):g}, but the dataset has {n} "
                         f"items (give item counts summing to {n}, or fractions summing to 1)")
    out: list[int] = []
    for i, length in enumerate(lengths):
        if isinstance(length, bool) or not isinstance(length, numbers.Integral):
            raise ValueError(f"random_split: length {length} at index {i} is not an integer (fractions must sum "
                             "to 1)")
        if length < 0:
            raise ValueError(f"random_split: length {length} at index {i} is negative")
        out.append(int(length))
    return out


def random_split(dataset: Dataset, lengths: Sequence[int | float],
                 generator: np.random.Generator | None = None) -> list[Subset]:
    """Split `dataset` into Subsets of the given `lengths` (item counts summing to len(dataset), or fractions
    summing to 1), its items in a random order: `generator.permutation(len(dataset))`, the generator being the
    numpy Generator you pass or rtxviz's own (seeded by `rtxviz.manual_seed`). Same seed, same split.
    """
    if generator is not None and not isinstance(generator, np.random.Generator):
        raise TypeError(f"random_split: generator must be a numpy Generator or None, got "
                        f"{type(generator).__name__} (np.random.default_rng(seed) makes one)")
    n = len(dataset)
    total = sum(lengths)
    # torch's test for fractions: a sum close to 1 and not above it
    sizes = (_fraction_lengths(lengths, n) if math.isclose(total, 1) and total <= 1
             else _check_lengths(lengths, n))
    rng = generator if generator is not None else rtx_random.generator()
    order = rng.permutation(n).tolist()
    parts, start = [], 0
    for size in sizes:
        parts.append(Subset(dataset, order[start:start + size]))
        start += size
    return parts
