"""Issue 13's silent-gradient bugs, each reproduced first: numpy values on the left of an operator or in a numpy
ufunc, leaves sharing one gradient array, and numpy arrays silently cast into another dtype."""

from __future__ import annotations

import numpy as np
import pytest

import rtxviz
from rtxviz import DTypeError, Tensor, Variable


def _leaf(values: list[float], dtype: str = "float64") -> Variable:
    return Variable(np.asarray(values, dtype=dtype), requires_grad=True)


# -- numpy on the left ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("left", [np.sqrt(2.0), np.float64(3.0), np.float32(3.0), np.int64(2)],
                         ids=["np.sqrt(2.0)", "np.float64", "np.float32", "np.int64"])
def test_a_numpy_scalar_on_the_left_records_the_op(left: object) -> None:
    x = _leaf([1.0, 2.0])
    y = left * x
    assert isinstance(y, Variable) and y.requires_grad, f"{type(y).__name__}: the graph was lost"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [float(left)] * 2)


def test_a_numpy_array_on_the_left_records_the_op() -> None:
    x = _leaf([1.0, 2.0])
    y = np.ones(2) + x
    assert isinstance(y, Variable) and y.requires_grad
    (np.array([2.0, 3.0]) * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 3.0])


def test_numpy_ufuncs_record_the_op() -> None:
    x = _leaf([0.5, 1.5])
    y = np.exp(x) + np.sin(x) * np.float64(2)
    assert isinstance(y, Variable) and y.requires_grad
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.5]) + 2 * np.cos([0.5, 1.5]))


def test_a_numpy_function_without_a_gradient_rule_raises_for_a_variable_that_requires_grad() -> None:
    x = _leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="numpy"):
        np.fft.fft(x)


# -- one gradient array per leaf ---------------------------------------------------------------------------------
def test_leaves_never_share_one_gradient_array() -> None:
    a, b, c = _leaf([1.0, 2.0]), _leaf([3.0, 4.0]), _leaf([5.0, 6.0])
    ((a + b) * c).sum().backward()
    assert a.grad is not b.grad and not np.shares_memory(a.grad.data, b.grad.data)
    a.grad.data *= 10.0  # scaling one leaf's gradient by hand (accumulation, clipping)
    np.testing.assert_allclose(b.grad.numpy(), [5.0, 6.0])


def test_a_leaf_gradient_never_aliases_the_grad_output_the_user_passed() -> None:
    x = _leaf([1.0, 2.0])
    g = Tensor(np.array([1.0, 1.0]))
    (x * 1.0).backward(g)  # mul_scalar's rule passes g on scaled (a new array)
    y = x + 0.0
    x.grad = None
    y.backward(g)  # add_scalar's rule passes g through unchanged
    assert not np.shares_memory(x.grad.data, g.data)


def test_a_leaf_gradient_never_aliases_a_retained_gradient() -> None:
    a = _leaf([1.0, 2.0])
    h = a * 2.0
    h.retain_grad()
    (h + 0.0).sum().backward()
    assert not np.shares_memory(a.grad.data, h.grad.data)


# -- dtypes ------------------------------------------------------------------------------------------------------
def test_a_float64_numpy_array_with_a_float32_variable_raises_like_a_float64_tensor() -> None:
    x = _leaf([1.0, 2.0], "float32")
    with pytest.raises(DTypeError, match="float32.*float64|float64.*float32") as arr_err:
        x + np.array([1.0, 2.0])
    with pytest.raises(DTypeError) as tensor_err:
        x + Tensor(np.array([1.0, 2.0]))
    assert type(arr_err.value) is type(tensor_err.value)


@pytest.mark.parametrize("scalar", [2.0, 2, np.float64(2.0), np.float32(2.0)])
def test_python_and_numpy_scalars_take_the_tensors_dtype(scalar: object) -> None:
    for dtype in ("float32", "float64"):
        x = _leaf([1.0, 2.0], dtype)
        assert (x * scalar).dtype == np.dtype(dtype) and (scalar * x).dtype == np.dtype(dtype)
        assert (x + scalar).dtype == np.dtype(dtype) and (scalar - x).dtype == np.dtype(dtype)


def test_the_rules_are_the_public_api() -> None:
    assert rtxviz.Variable is Variable
