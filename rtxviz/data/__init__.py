"""rtxviz.data: Dataset, TensorDataset, Subset, ConcatDataset, StackDataset, random_split, DataLoader (as
torch.utils.data's), and the shipped digits set.

>>> x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
>>> loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True, seed=0)
>>> xb, yb = next(iter(loader))
>>> xb.shape, yb.shape
((64, 64), (64,))
"""

from __future__ import annotations

from .dataset import ConcatDataset, Dataset, StackDataset, Subset, TensorDataset
from .digits import DigitsSplit, load_digits, read_digits_csv
from .loader import DataLoader, default_collate
from .split import random_split

__all__ = ["ConcatDataset", "DataLoader", "Dataset", "DigitsSplit", "StackDataset", "Subset", "TensorDataset",
           "default_collate", "load_digits", "random_split", "read_digits_csv"]
