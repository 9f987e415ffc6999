"""random_split, Subset, ConcatDataset and StackDataset, with torch.utils.data's rules."""

from __future__ import annotations

import numpy as np
import pytest

from rtxviz import Tensor
from rtxviz.data import ConcatDataset, DataLoader, Dataset, StackDataset, Subset, TensorDataset, random_split
from rtxviz.engine.random import manual_seed


class Numbers(Dataset):
    """Item i is i (a plain Dataset: no batched `take`)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self.n:
            raise IndexError(index)
        return index

    def __len__(self) -> int:
        return self.n


def _tensors(n: int) -> TensorDataset:
    return TensorDataset(Tensor(np.arange(n * 2, dtype=np.float64).reshape(n, 2)), Tensor(np.arange(n)))


# The sizes torch.utils.data.random_split gives (PyTorch 2.13, computed with /tmp/torchvenv):
#   random_split(range(n), fractions, generator=torch.Generator().manual_seed(0)) -> [len(s) for s in ...]
# floor(n * fraction) each, then the remainder handed out one by one from the first split on.
TORCH_SIZES = [
    (10, [0.7, 0.2, 0.1], [7, 2, 1]),
    (11, [0.7, 0.2, 0.1], [8, 2, 1]),
    (101, [0.7, 0.2, 0.1], [71, 20, 10]),
    (3, [0.5, 0.5], [2, 1]),
    (10, [1 / 3, 1 / 3, 1 / 3], [4, 3, 3]),
    (7, [0.1, 0.1, 0.8], [1, 1, 5]),
    (5, [1.0], [5]),
    (4, [0.0, 1.0], [0, 4]),
]


@pytest.mark.parametrize(("n", "fractions", "sizes"), TORCH_SIZES)
def test_random_split_fraction_sizes_follow_torch(n: int, fractions: list[float], sizes: list[int]) -> None:
    parts = random_split(Numbers(n), fractions, generator=np.random.default_rng(0))
    assert [len(p) for p in parts] == sizes


@pytest.mark.parametrize("lengths", [[7, 2, 1], [0.7, 0.2, 0.1], [3, 0, 7]])
def test_random_split_parts_are_disjoint_and_cover_the_dataset(lengths: list) -> None:
    ds = Numbers(10)
    parts = random_split(ds, lengths, generator=np.random.default_rng(1))
    seen = [ds[i] for p in parts for i in p.indices]
    assert sorted(seen) == list(range(10))  # every item once: disjoint and complete
    for p in parts:
        assert isinstance(p, Subset) and p.dataset is ds
        assert [p[i] for i in range(len(p))] == list(p.indices)


def test_random_split_is_a_permutation_from_the_generator() -> None:
    parts = random_split(Numbers(10), [4, 6], generator=np.random.default_rng(7))
    order = np.random.default_rng(7).permutation(10).tolist()
    assert list(parts[0].indices) == order[:4] and list(parts[1].indices) == order[4:]


def test_random_split_same_seed_same_split() -> None:
    def split(seed: int) -> list[list[int]]:
        return [list(p.indices) for p in random_split(Numbers(50), [0.5, 0.3, 0.2],
                                                      generator=np.random.default_rng(seed))]

    assert split(3) == split(3)
    assert split(3) != split(4)
    # without a generator: rtxviz's own, seeded by manual_seed
    manual_seed(11)
    a = [list(p.indices) for p in random_split(Numbers(50), [25, 25])]
    manual_seed(11)
    b = [list(p.indices) for p in random_split(Numbers(50), [25, 25])]
    manual_seed(12)
    c = [list(p.indices) for p in random_split(Numbers(50), [25, 25])]
    assert a == b and a != c


def test_random_split_warns_about_an_empty_split_as_torch() -> None:
    with pytest.warns(UserWarning, match=r"random_split: split 1 has length 0"):
        parts = random_split(Numbers(2), [0.5, 0.25, 0.25], generator=np.random.default_rng(0))
    assert [len(p) for p in parts] == [2, 0, 0]  # torch: [2, 0, 0]


@pytest.mark.parametrize(("lengths", "error", "message"), [
    ([3, 3], ValueError, r"random_split: the lengths \[3, 3\] sum to 6, but the dataset has 10 items"),
    ([0.7, 0.2], ValueError, r"random_split: the lengths \[0\.7, 0\.2\] sum to 0\.9, but the dataset has 10 items"),
    ([0.5, 0.6], ValueError, r"random_split: the lengths \[0\.5, 0\.6\] sum to 1\.1, but the dataset has 10 items"),
    ([1.2, -0.2], ValueError, r"random_split: fraction 1\.2 at index 0 is not between 0 and 1"),
    ([12, -2], ValueError, r"random_split: length -2 at index 1 is negative"),
    ([2.5, 7.5], ValueError, r"random_split: length 2\.5 at index 0 is not an integer"),
])
def test_random_split_bad_lengths(lengths: list, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        random_split(Numbers(10), lengths, generator=np.random.default_rng(0))


def test_random_split_refuses_a_torch_generator_like_object() -> None:
    with pytest.raises(TypeError, match=r"random_split: generator must be a numpy Generator or None, got int"):
        random_split(Numbers(10), [5, 5], generator=0)  # type: ignore[arg-type]


def test_subset_indexing_and_loader_over_a_subset_of_tensors() -> None:
    ds = _tensors(10)
    sub = Subset(ds, [9, 2, 5, 0])
    assert sub.dataset is ds and sub.indices == [9, 2, 5, 0] and len(sub) == 4
    x, y = sub[1]
    assert x.tolist() == [4.0, 5.0] and y.item() == 2
    xs, ys = sub[[0, 3]]  # a list of positions, as torch's Subset
    assert ys.tolist() == [9, 0] and xs.tolist() == [[18.0, 19.0], [0.0, 1.0]]
    batches = [(xb.tolist(), yb.tolist()) for xb, yb in DataLoader(sub, batch_size=3)]
    assert batches == [([[18.0, 19.0], [4.0, 5.0], [10.0, 11.0]], [9, 2, 5]), ([[0.0, 1.0]], [0])]
    shuffled = [yb.tolist() for _, yb in DataLoader(sub, batch_size=2, shuffle=True, seed=0)]
    order = np.random.default_rng(0).permutation(4)
    assert sum(shuffled, []) == [[9, 2, 5, 0][i] for i in order]


def test_loader_over_random_split_parts_covers_the_dataset_once() -> None:
    ds = _tensors(23)
    train, val = random_split(ds, [0.8, 0.2], generator=np.random.default_rng(5))
    assert (len(train), len(val)) == (19, 4)  # torch: floor(18.4)=18, floor(4.6)=4, +1 to the first
    ys = []
    for part in (train, val):
        for xb, yb in DataLoader(part, batch_size=5, shuffle=True, seed=1):
            assert xb.numpy()[:, 0].tolist() == (yb.numpy() * 2).astype(np.float64).tolist()  # rows stay aligned
            ys += yb.tolist()
    assert sorted(ys) == list(range(23))


def test_loader_over_a_subset_of_a_plain_dataset() -> None:
    sub = Subset(Numbers(6), [5, 1, 3])
    assert [b.tolist() for b in DataLoader(sub, batch_size=2)] == [[5, 1], [3]]


def test_concat_dataset() -> None:
    ds = ConcatDataset([Numbers(3), Subset(Numbers(10), [7, 8]), Numbers(2)])
    assert len(ds) == 7 and ds.cumulative_sizes == [3, 5, 7]
    assert [ds[i] for i in range(7)] == [0, 1, 2, 7, 8, 0, 1]
    assert ds[-1] == 1 and ds[-7] == 0
    with pytest.raises(IndexError, match=r"ConcatDataset: index 7 is out of range for 7 items"):
        ds[7]
    with pytest.raises(IndexError, match=r"ConcatDataset: index -8 is out of range for 7 items"):
        ds[-8]
    with pytest.raises(ValueError, match=r"ConcatDataset: give at least one dataset"):
        ConcatDataset([])
    assert [b.tolist() for b in DataLoader(ds, batch_size=4)] == [[0, 1, 2, 7], [8, 0, 1]]


def test_stack_dataset_tuple_and_dict() -> None:
    a, b = Numbers(4), Subset(Numbers(10), [9, 8, 7, 6])
    pairs = StackDataset(a, b)
    assert len(pairs) == 4 and pairs[1] == (1, 8) and pairs.datasets == (a, b)
    named = StackDataset(x=a, y=b)
    assert named[2] == {"x": 2, "y": 7}
    batch = next(iter(DataLoader(named, batch_size=3)))
    assert batch["x"].tolist() == [0, 1, 2] and batch["y"].tolist() == [9, 8, 7]
    with pytest.raises(ValueError, match=r"StackDataset: the datasets have different lengths \[4, 3\]"):
        StackDataset(a, Numbers(3))
    with pytest.raises(ValueError, match=r"StackDataset: give datasets as positional or as keyword arguments"):
        StackDataset(a, y=b)
    with pytest.raises(ValueError, match=r"StackDataset: give at least one dataset"):
        StackDataset()
