"""The shipped digits set (UCI optical digits, 8x8 images, 10 classes; see README.md here for the credit).

>>> split = load_digits()
>>> split.x_train.shape, split.x_test.shape, split.y_train.dtype.name
((1438, 64), (359, 64), 'int64')
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..engine.device import get_default_device
from ..engine.dtypes import as_dtype, float32
from ..engine.tensor import Tensor

DIGITS_PATH = Path(__file__).with_name("digits.csv.gz")


class DigitsSplit(NamedTuple):
    """x_*: [N, 64] pixels scaled to [0, 1]; y_*: [N] int64 labels 0..9."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor


def read_digits_csv(path: str | Path = DIGITS_PATH) -> tuple[np.ndarray, np.ndarray]:
    """(pixels [N, 64] as 0..16 ints, labels [N]) from the gzip'd CSV, with numpy only."""
    with gzip.open(path, "rt") as fh:
        table = np.loadtxt(fh, delimiter=",", dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 65:
        raise ValueError(f"load_digits: expected 65 columns (64 pixels + label) in {path}, got {table.shape}")
    return table[:, :64], table[:, 64]


def load_digits(test_fraction: float = 0.2, seed: int = 0, device: Any = None, dtype: Any = float32) -> DigitsSplit:
    """A seeded, stratified train/test split: in each class, round(test_fraction · count) rows (chosen by
    `np.random.default_rng(seed)`) go to the test set; both sets are then shuffled.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction}")
    pixels, labels = read_digits_csv()
    rng = np.random.default_rng(seed)
    test_idx, train_idx = [], []
    for c in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(test_fraction * len(rows)))
        test_idx.append(rows[:k])
        train_idx.append(rows[k:])
    tr = rng.permutation(np.concatenate(train_idx))
    te = rng.permutation(np.concatenate(test_idx))
    x = (pixels / 16.0).astype(as_dtype(dtype, "load_digits"))

    def t(a: np.ndarray) -> Tensor:
        # device None: the default device (set_default_device), as every constructor
        return Tensor._wrap(np.ascontiguousarray(a)).to(get_default_device() if device is None else device)

    return DigitsSplit(t(x[tr]), t(labels[tr]), t(x[te]), t(labels[te]))
