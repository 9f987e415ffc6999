"""Dataset, TensorDataset, DataLoader and load_digits."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from rtxviz import ShapeError, Tensor
from rtxviz.data import DataLoader, Dataset, TensorDataset, default_collate, load_digits
from rtxviz.data.digits import DIGITS_PATH


def _dataset(n: int = 10) -> TensorDataset:
    return TensorDataset(Tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2)), Tensor(np.arange(n)))


def test_tensor_dataset_items_and_checks() -> None:
    ds = _dataset()
    assert len(ds) == 10
    x, y = ds[3]
    assert x.tolist() == [6.0, 7.0] and y.item() == 3
    with pytest.raises(ShapeError, match="same first dim"):
        TensorDataset(Tensor.ones([3, 2]), Tensor.ones([4]))


def test_loader_in_order_with_and_without_drop_last() -> None:
    ds = _dataset()
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].shape == (4, 2) and batches[0][1].dtype.name == "int64"
    kept = list(DataLoader(ds, batch_size=4, drop_last=True))
    assert [b[1].tolist() for b in kept] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(ds, batch_size=4)) == 3 and len(DataLoader(ds, batch_size=4, drop_last=True)) == 2


def test_shuffle_is_seeded_a_permutation_and_changes_per_epoch() -> None:
    ds = _dataset(20)

    def epochs(seed: int) -> list[list[int]]:
        loader = DataLoader(ds, batch_size=6, shuffle=True, seed=seed)
        return [sum((b[1].tolist() for b in loader), []) for _ in range(2)]

    a, b, c = epochs(0), epochs(0), epochs(1)
    assert a == b  # same seed, same order, epoch after epoch
    assert a != c
    assert a[0] != a[1]  # a new permutation each epoch
    assert sorted(a[0]) == list(range(20))
    # the order is numpy's Generator.permutation from that seed
    assert a[0] == np.random.default_rng(0).permutation(20).tolist()
    rows = [b for b in DataLoader(ds, batch_size=6, shuffle=True, seed=3)]
    for xb, yb in rows:  # inputs stay aligned with labels
        assert xb.numpy()[:, 0].tolist() == (yb.numpy() * 2).astype(np.float32).tolist()


class Squares(Dataset):
    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int) -> tuple:
        return Tensor([float(i), float(i * i)]), i


def test_generic_dataset_default_and_custom_collate() -> None:
    xb, yb = next(iter(DataLoader(Squares(), batch_size=3)))
    assert xb.tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 4.0]]
    assert yb.tolist() == [0, 1, 2]
    sums = [b for b in DataLoader(Squares(), batch_size=2, collate_fn=lambda items: sum(i for _, i in items))]
    assert sums == [1, 5, 4]
    with pytest.raises(ShapeError, match="different shapes"):
        default_collate([Tensor.ones([2]), Tensor.ones([3])])


def test_load_digits_split_is_stratified_seeded_and_scaled() -> None:
    with gzip.open(DIGITS_PATH, "rt") as fh:
        raw = np.loadtxt(fh, delimiter=",")
    assert raw.shape == (1797, 65)
    s = load_digits(test_fraction=0.2, seed=0)
    assert s.x_train.shape[0] + s.x_test.shape[0] == 1797
    assert s.x_train.dtype.name == "float32" and s.y_train.dtype.name == "int64"
    x = np.concatenate([s.x_train.numpy(), s.x_test.numpy()])
    assert x.min() == 0.0 and x.max() == 1.0
    counts = np.bincount(raw[:, 64].astype(int), minlength=10)
    test_counts = np.bincount(s.y_test.numpy(), minlength=10)
    np.testing.assert_array_equal(test_counts, np.round(0.2 * counts).astype(int))
    # rows keep their labels: every (pixels, label) pair of the split is a row of the file
    file_rows = {tuple(r) for r in raw.astype(int)}
    pixels = np.rint(s.x_test.numpy() * 16).astype(int)
    assert all((*p, lab) in file_rows for p, lab in zip(pixels, s.y_test.numpy(), strict=True))
    again = load_digits(test_fraction=0.2, seed=0)
    assert np.array_equal(again.y_test.numpy(), s.y_test.numpy())
    other = load_digits(test_fraction=0.2, seed=1)
    assert not np.array_equal(other.y_test.numpy(), s.y_test.numpy())
    assert load_digits(dtype="float64").x_train.dtype.name == "float64"
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits(test_fraction=1.5)


def test_digits_credit_ships_with_the_data() -> None:
    readme = (Path(DIGITS_PATH).parent / "README.md").read_text()
    assert "Alpaydin" in readme and "Kaynak" in readme and "CC BY 4.0" in readme


def test_loader_on_device(device: str) -> None:
    ds = TensorDataset(Tensor.ones([5, 2], device=device), Tensor.arange(5, device=device))
    xb, yb = next(iter(DataLoader(ds, batch_size=2, shuffle=True)))
    assert str(xb.device).startswith(device) and yb.shape == (2,)
