"""PyTorch's names and habits where its users reach for them (issue 13), beside the seed spec's names."""

from __future__ import annotations

import numpy as np
import pytest

import rtxviz
from rtxviz import DimError, Tensor, Variable


def test_max_over_a_dim_unpacks_into_values_and_indices() -> None:
    """Reproduces the bug: `v, i = x.max(1)` used to unpack the rows of the values silently."""
    data = np.array([[1.0, 7.0, 3.0], [9.0, 2.0, 4.0], [0.0, 0.5, 8.0]])
    x = Variable(data, requires_grad=True)
    v, i = x.max(1)
    np.testing.assert_array_equal(v.numpy(), data.max(1))
    np.testing.assert_array_equal(i.numpy(), data.argmax(1))
    assert i.dtype == np.int64 and not i.requires_grad
    v.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (data == data.max(1, keepdims=True)).astype(float))
    lo = x.min(dim=0)
    np.testing.assert_array_equal(lo.values.numpy(), data.min(0))
    np.testing.assert_array_equal(lo.indices.numpy(), data.argmin(0))
    assert x.max().shape == ()  # over everything: one value, as PyTorch


def test_size_is_the_shape_and_numel_the_count() -> None:
    t = rtxviz.zeros(2, 3, 4)
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4 and t.numel() == 24
    with pytest.raises(DimError, match="size: dim 3"):
        t.size(3)


def test_constructors_take_pytorchs_arguments() -> None:
    rtxviz.manual_seed(0)
    assert rtxviz.zeros((2, 3)).shape == rtxviz.ones(2, 3).shape == (2, 3)
    assert rtxviz.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert rtxviz.arange(3).tolist() == [0, 1, 2] and rtxviz.arange(0.0, 1.0, 0.5).tolist() == [0.0, 0.5]
    x = rtxviz.tensor([[1.0, 2.0]], requires_grad=True)
    assert isinstance(x, Variable) and x.is_leaf and x.requires_grad
    y = rtxviz.tensor(np.arange(3.0))
    assert type(y) is Tensor and y.dtype == np.float64  # numpy arrays keep their dtype
    src = np.arange(4.0)
    assert np.shares_memory(rtxviz.from_numpy(src).data, src)
    assert not np.shares_memory(rtxviz.tensor(src).data, src)  # tensor copies, as torch.tensor
    for like in (rtxviz.zeros_like, rtxviz.ones_like, rtxviz.randn_like, rtxviz.rand_like, rtxviz.empty_like):
        z = like(y)
        assert z.shape == (3,) and z.dtype == np.float64
    assert rtxviz.full_like(y, 2.0).tolist() == [2.0] * 3
    rtxviz.manual_seed(0)
    a, b = rtxviz.randn(2, 2), rtxviz.randn(2, 2)
    rtxviz.manual_seed(0)
    np.testing.assert_array_equal(rtxviz.randn(2, 2).numpy(), a.numpy())
    assert not np.array_equal(a.numpy(), b.numpy())


def test_set_default_dtype_changes_python_values_and_constructors() -> None:
    try:
        rtxviz.set_default_dtype("float64")
        assert rtxviz.get_default_dtype() == np.float64
        assert rtxviz.tensor([1.0]).dtype == np.float64 and rtxviz.zeros(2).dtype == np.float64
        assert Tensor(np.ones(2, dtype=np.float32)).dtype == np.float32  # numpy arrays keep theirs
    finally:
        rtxviz.set_default_dtype("float32")
    assert rtxviz.zeros(2).dtype == np.float32
    with pytest.raises(rtxviz.DTypeError):
        rtxviz.set_default_dtype("int64")


def test_sort_and_topk_values_indices_and_gradients() -> None:
    data = np.array([[0.3, -1.2, 2.5, 0.9], [1.1, 0.2, -0.4, 3.0]])
    x = Variable(data, requires_grad=True)
    values, indices = x.sort(dim=1, descending=True)
    np.testing.assert_array_equal(indices.numpy(), np.argsort(-data, axis=1))
    np.testing.assert_array_equal(values.numpy(), -np.sort(-data, axis=1))
    top = x.topk(2, dim=1)
    np.testing.assert_array_equal(top.values.numpy(), -np.sort(-data, axis=1)[:, :2])
    weights = Tensor(np.array([[1.0, 10.0], [100.0, 1000.0]]))
    (top.values * weights).sum().backward()
    want = np.zeros_like(data)
    for r in range(2):
        for c, w in zip(np.argsort(-data[r])[:2], weights.numpy()[r], strict=True):
            want[r, c] = w
    np.testing.assert_array_equal(x.grad.numpy(), want)
    assert rtxviz.argsort(x, 1).tolist() == np.argsort(data, axis=1).tolist()
    with pytest.raises(rtxviz.ShapeError, match="topk: k=5"):
        x.topk(5)


def test_clone_is_a_differentiable_copy() -> None:
    x = Variable(np.array([1.0, 2.0]), requires_grad=True)
    c = x.clone()
    assert c.grad_fn.name == "clone" and not np.shares_memory(c.data, x.data)
    c.add_(1.0)
    assert x.tolist() == [1.0, 2.0]
    (c * 3.0).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_item_tolist_view_and_the_seed_specs_names_still_work() -> None:
    t = Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2])
    assert t.view(4).tolist() == [1.0, 2.0, 3.0, 4.0] and t[1, 1].item() == 4.0
    x = Variable.from_tensor(t)
    assert x.multiply(x).sum().item() == 30.0
