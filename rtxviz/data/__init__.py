"""rtxviz.data: Dataset, TensorDataset, DataLoader, and the shipped digits set.

>>> x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
>>> loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True, seed=0)
>>> xb, yb = next(iter(loader))
>>> xb.shape, yb.shape
((64, 64), (64,))
"""

from __future__ import annotations

from .dataset import Dataset, TensorDataset
from .digits import DigitsSplit, load_digits, read_digits_csv
from .loader import DataLoader, default_collate

__all__ = ["DataLoader", "Dataset", "DigitsSplit", "TensorDataset", "default_collate", "load_digits",
           "read_digits_csv"]
