"""Property tests for issue 13's one rule of operands (docs/engine.md, "Mixing Python, numpy and Tensors"):
every mix of Python numbers, numpy scalars, numpy arrays and Variables, on either side of every operator and
in numpy's ufuncs, records the op (the gradient checked against central differences by the engine's
`gradcheck`), or raises the clear DTypeError for a numpy array of another dtype.

The expected values are numpy's own, computed on the host from the same numbers; the expected gradients are
finite differences of the same expression. Under RTXVIZ_TEST_DEVICE=strict the Variables live on the strict
cupy stand-in, so these also check that host operands reach the device.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rtxviz import DTypeError, Tensor, Variable
from rtxviz.engine.gradcheck import gradcheck

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: every kind of operand a user mixes with a Variable: (name, make(value array) -> operand)
KINDS: dict[str, Callable[[np.ndarray], Any]] = {
    "python float": lambda v: float(v.reshape(-1)[0]),
    "python int": lambda v: int(np.ceil(v.reshape(-1)[0])),
    "np.float64": lambda v: np.float64(v.reshape(-1)[0]),
    "np.float32": lambda v: np.float32(v.reshape(-1)[0]),
    "np.int64": lambda v: np.int64(np.ceil(v.reshape(-1)[0])),
    "np.sqrt result": lambda v: np.sqrt(np.float64(v.reshape(-1)[0])),
    "numpy array": lambda v: v.copy(),
    "numpy row (broadcast)": lambda v: v.reshape(-1)[: v.shape[-1]].reshape(1, -1).copy(),
    "0-d numpy array": lambda v: np.asarray(v.reshape(-1)[0]),
    "Variable": lambda v: Variable(v.copy(), requires_grad=True),
}

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow,
    "np.add": np.add, "np.subtract": np.subtract, "np.multiply": np.multiply, "np.true_divide": np.true_divide,
    "np.power": np.power, "np.maximum": np.maximum, "np.minimum": np.minimum,
}
COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne, "np.less": np.less, "np.greater_equal": np.greater_equal, "np.equal": np.equal,
}
UNARY: dict[str, Callable[[Any], Any]] = {
    "np.sqrt": np.sqrt, "np.exp": np.exp, "np.log": np.log, "np.tanh": np.tanh, "np.sin": np.sin,
    "np.cos": np.cos, "np.negative": np.negative, "np.square": np.square, "np.absolute": np.absolute,
    "np.reciprocal": np.reciprocal, "np.log1p": np.log1p, "np.arctan": np.arctan,
}

# Values in [0.5, 2]: inside every op's domain (log, sqrt, a base of **), away from 0 (division).
shapes = st.sampled_from([(3,), (2, 3)])


def values(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    return st.lists(st.floats(0.5, 2.0), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))).map(
        lambda xs: np.asarray(xs, dtype=np.float64).reshape(shape))


@st.composite
def mixes(draw: st.DrawFn) -> tuple[np.ndarray, str, np.ndarray]:
    shape = draw(shapes)
    return draw(values(shape)), draw(st.sampled_from(sorted(KINDS))), draw(values(shape))


def _host(value: Any) -> Any:
    """The operand as numpy would see it: a Variable's values, anything else as it is."""
    return value.numpy() if isinstance(value, Tensor) else value


def _check_records_and_matches(expr: Callable[..., Any], x: np.ndarray, other: Any) -> None:
    """expr(Variable x) is a Variable on the graph with numpy's values; its gradient (in x, and in `other` when
    that is a Variable too) agrees with central differences."""
    y = expr(Variable(x.copy(), requires_grad=True), other)
    assert isinstance(y, Variable) and y.requires_grad and y.grad_fn is not None, (
        f"{type(y).__name__}: the graph was lost")
    expected = expr(x, _host(other))
    assert y.dtype == np.float64, f"a float64 Variable mixed with {type(other).__name__} gave {y.dtype}"
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-12, atol=1e-12)
    if isinstance(other, Variable):
        result = gradcheck(lambda a, b: expr(a, b), [x, other.numpy()])
    else:
        result = gradcheck(lambda a: expr(a, other), [x])
    assert result, str(result)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("side", ["variable left", "variable right"])
@SETTINGS
@given(mix=mixes())
def test_binary_operators_and_ufuncs_record_the_op_on_either_side(name: str, side: str,
                                                                  mix: tuple[np.ndarray, str, np.ndarray]) -> None:
    x, kind, c = mix
    other = KINDS[kind](c)
    fn = BINARY[name]
    if name in ("np.maximum", "np.minimum"):  # not differentiable at ties: keep them apart
        assume(np.all(np.abs(x - _host(other)) > 1e-3))
    expr = (lambda a, b: fn(a, b)) if side == "variable left" else (lambda a, b: fn(b, a))
    _check_records_and_matches(expr, x, other)


MATMUL_RIGHT = {"vector": (3,), "matrix": (3, 2)}
MATMUL_LEFT = {"vector": (2,), "matrix": (4, 2)}


@pytest.mark.parametrize("how", ["@", "np.matmul"])
@pytest.mark.parametrize("other_kind", ["numpy array", "Variable"])
@pytest.mark.parametrize("side", ["variable left", "variable right"])
@pytest.mark.parametrize("rank", ["vector", "matrix"])
@SETTINGS
@given(data=st.data())
def test_matmul_with_numpy_arrays_and_variables_on_either_side(how: str, other_kind: str, side: str, rank: str,
                                                               data: st.DataObject) -> None:
    x = data.draw(values((2, 3)))
    c = data.draw(values(MATMUL_RIGHT[rank] if side == "variable left" else MATMUL_LEFT[rank]))
    other = KINDS[other_kind](c)
    fn = operator.matmul if how == "@" else np.matmul
    expr = (lambda a, b: fn(a, b)) if side == "variable left" else (lambda a, b: fn(b, a))
    _check_records_and_matches(expr, x, other)


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(x=shapes.flatmap(values))
def test_numpy_unary_ufuncs_record_the_op(name: str, x: np.ndarray) -> None:
    fn = UNARY[name]
    _check_records_and_matches(lambda a, _b: fn(a), x, None)


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(mix=mixes())
def test_unary_ufuncs_of_mixed_expressions_keep_the_graph(name: str, mix: tuple[np.ndarray, str, np.ndarray]) -> None:
    """A ufunc of an expression that mixes a numpy value in (np.exp(np.float64(2) * x), np.sqrt(x + np.ones(3))):
    the ufunc's gradient composes with the operator's."""
    x, kind, c = mix
    other = KINDS[kind](c)
    fn = UNARY[name]
    _check_records_and_matches(lambda a, b: fn(b * a + b), x, other)


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@pytest.mark.parametrize("side", ["variable left", "variable right"])
@SETTINGS
@given(mix=mixes())
def test_comparisons_give_numpys_booleans_and_no_gradient(name: str, side: str,
                                                          mix: tuple[np.ndarray, str, np.ndarray]) -> None:
    x, kind, c = mix
    if kind.startswith("python int") or kind == "np.int64":
        c = np.round(c)  # equal values occur, so == and != are exercised both ways
        x = np.where(x > 1.2, np.round(x), x)
    other = KINDS[kind](c)
    fn = COMPARISONS[name]
    v = Variable(x.copy(), requires_grad=True)
    y = fn(v, other) if side == "variable left" else fn(other, v)
    expected = fn(x, _host(other)) if side == "variable left" else fn(_host(other), x)
    assert isinstance(y, Tensor) and not y.requires_grad and y.dtype == np.bool_
    np.testing.assert_array_equal(y.numpy(), expected)


# -- the dtype rule ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variable_dtype, array_dtype", [("float32", "float64"), ("float64", "float32")])
@pytest.mark.parametrize("name", ["+", "-", "*", "/", "**", "np.add", "np.multiply", "np.maximum"])
@pytest.mark.parametrize("side", ["variable left", "variable right"])
@settings(max_examples=5, deadline=None)
@given(x=shapes.flatmap(values))
def test_a_numpy_array_of_another_dtype_raises_naming_both_dtypes(variable_dtype: str, array_dtype: str, name: str,
                                                                  side: str, x: np.ndarray) -> None:
    v = Variable(x.astype(variable_dtype), requires_grad=True)
    arr = x.astype(array_dtype)
    fn = BINARY[name]
    with pytest.raises(DTypeError) as info:
        fn(v, arr) if side == "variable left" else fn(arr, v)
    message = str(info.value)
    assert variable_dtype in message and array_dtype in message, message


@pytest.mark.parametrize("variable_dtype", ["float32", "float64"])
@pytest.mark.parametrize("scalar", ["python float", "python int", "np.float64", "np.float32", "np.int64"])
@pytest.mark.parametrize("name", ["+", "-", "*", "/", "**", "np.add", "np.multiply", "np.maximum"])
@pytest.mark.parametrize("side", ["variable left", "variable right"])
@settings(max_examples=5, deadline=None)
@given(mix=mixes())
def test_python_and_numpy_scalars_take_the_variables_dtype(variable_dtype: str, scalar: str, name: str, side: str,
                                                           mix: tuple[np.ndarray, str, np.ndarray]) -> None:
    x, _, c = mix
    v = Variable(x.astype(variable_dtype), requires_grad=True)
    s = KINDS[scalar](c)
    fn = BINARY[name]
    y = fn(v, s) if side == "variable left" else fn(s, v)
    assert isinstance(y, Variable) and y.requires_grad and y.dtype == np.dtype(variable_dtype), (
        f"{variable_dtype} Variable {name} {scalar}: {type(y).__name__} of {y.dtype}")
    y.sum().backward()
    assert v.grad is not None and v.grad.dtype == np.dtype(variable_dtype)
