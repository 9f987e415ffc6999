"""Gaps a second try-as-a-PyTorch-user review found (nineteenth session), each reproduced here before its fix:
// and %, torch's dtype promotion for int and bool tensors, the missing constructors, the top-level function
forms, and requires_grad_/detach/grad on a plain Tensor.

Expected numbers are PyTorch 2.13's (CPU), pasted with the call that gave them, or closed forms and central
differences (tests/finite_differences.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rtxviz
from rtxviz import DTypeError, Tensor, Variable
from tests.finite_differences import numeric_grad_of

A = [5.5, -5.5, 3.25, -2.2, 7.0, -0.3]
B = [2.0, 2.0, -1.5, -0.7, 2.5, 0.4]
W = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # a non-uniform output weight, so that each gradient element is told apart


def _leaf(values: list[float]) -> Variable:
    return Variable(np.asarray(values, dtype=np.float64), requires_grad=True)


def _ints(values: list[int]) -> Tensor:
    return Tensor(np.asarray(values, dtype=np.int64))


# -- // and % ------------------------------------------------------------------------------------------------------
# torch.floor_divide(a, b) / torch.remainder(a, b) / torch.fmod(a, b) / torch.div(a, b, rounding_mode="trunc") on
# float64 tensors of A and B
FLOAT_VALUES = {
    "floor_divide": [2.0, -3.0, -3.0, 3.0, 2.0, -1.0],
    "remainder": [1.5, 0.5, -1.25, -0.10000000000000031, 2.0, 0.10000000000000003],
    "fmod": [1.5, -1.5, 0.25, -0.10000000000000031, 2.0, -0.3],
    "trunc": [2.0, -2.0, -2.0, 3.0, 2.0, -0.0],
}
SPELLINGS: dict[str, list[Callable[[Any, Any], Any]]] = {
    "floor_divide": [lambda a, b: a // b, lambda a, b: rtxviz.floor_divide(a, b), lambda a, b: a.floor_divide(b),
                     lambda a, b: a.div(b, rounding_mode="floor"), lambda a, b: rtxviz.div(a, b, rounding_mode="floor"),
                     lambda a, b: np.floor_divide(a, b)],
    "remainder": [lambda a, b: a % b, lambda a, b: rtxviz.remainder(a, b), lambda a, b: a.remainder(b),
                  lambda a, b: np.remainder(a, b)],
    "fmod": [lambda a, b: rtxviz.fmod(a, b), lambda a, b: a.fmod(b), lambda a, b: np.fmod(a, b)],
    "trunc": [lambda a, b: a.div(b, rounding_mode="trunc"), lambda a, b: a.divide(b, rounding_mode="trunc")],
}


@pytest.mark.parametrize(("op", "i"), [(op, i) for op, fns in SPELLINGS.items() for i in range(len(fns))])
def test_floor_division_remainder_and_fmod_give_pytorchs_values(op: str, i: int) -> None:
    a, b = _leaf(A), _leaf(B)
    y = SPELLINGS[op][i](a, b)
    assert y.dtype == np.float64 and y.tolist() == pytest.approx(FLOAT_VALUES[op], abs=1e-15)


# torch.autograd.grad((f(a, b) * W).sum(), (a, b)) for f = torch.remainder / torch.fmod: dA = g,
# dB = -g·floor(a/b) (remainder) and -g·trunc(a/b) (fmod)
GRADS = {"remainder": ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [-2.0, 6.0, 9.0, -12.0, -10.0, 6.0]),
         "fmod": ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [-2.0, 4.0, 6.0, -12.0, -10.0, 0.0])}


@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_remainder_and_fmod_gradients_are_pytorchs_and_the_finite_differences(op: str) -> None:
    a, b = _leaf(A), _leaf(B)
    w = Tensor(np.asarray(W))
    (getattr(rtxviz, op)(a, b) * w).sum().backward()
    assert a.grad.tolist() == GRADS[op][0] and b.grad.tolist() == GRADS[op][1]
    numpy_op = getattr(np, op)
    for k, leaf in enumerate((a, b)):
        fd = numeric_grad_of(lambda x, y: float((numpy_op(x, y) * np.asarray(W)).sum()),
                             [np.asarray(A), np.asarray(B)], k)
        np.testing.assert_allclose(leaf.grad.numpy(), fd, atol=1e-6)


@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_remainder_and_fmod_have_second_derivatives(op: str) -> None:
    """d/db of (dy/db) = d/db(-floor(a/b)) is 0 almost everywhere: the recorded backward is differentiable."""
    a, b = _leaf(A), _leaf(B)
    (gb,) = rtxviz.grad(getattr(rtxviz, op)(a, b).sum(), b, create_graph=True)
    (gbb,) = rtxviz.grad((gb * gb).sum(), b, allow_unused=True)
    assert gbb is None or gbb.tolist() == [0.0] * 6


def test_remainder_and_fmod_broadcast_and_sum_the_gradient_back() -> None:
    a = Variable(np.array([[5.5, -5.5, 3.25], [-2.2, 7.0, -0.3]]), requires_grad=True)
    # torch.remainder / torch.fmod of that [2, 3] tensor and a [3] tensor [2.0, -1.5, 0.4], then .sum().backward()
    for op, value, gb in [
        ("remainder", [[1.5, -1.0, 0.04999999999999982], [1.7999999999999998, -0.5, 0.10000000000000003]],
         [0.0, 2.0, -7.0]),
        ("fmod", [[1.5, -1.0, 0.04999999999999982], [-0.20000000000000018, 1.0, -0.3]], [-1.0, 1.0, -8.0])]:
        b = _leaf([2.0, -1.5, 0.4])
        y = getattr(rtxviz, op)(a, b)
        np.testing.assert_allclose(y.numpy(), value, atol=1e-15)
        y.sum().backward()
        assert b.grad.tolist() == gb


def test_floor_division_has_a_zero_gradient_as_torch_div_with_rounding_mode() -> None:
    """torch.div(a, b, rounding_mode="floor" or "trunc") gives zero gradients (its derivative almost everywhere);
    torch.floor_divide raises "derivative for aten::floor_divide is not implemented". rtxviz gives the zeros."""
    for f in (lambda a, b: a // b, lambda a, b: a.div(b, rounding_mode="trunc")):
        a, b = _leaf(A), _leaf(B)
        y = f(a, b)
        assert y.requires_grad
        (y * 3.0).sum().backward()
        assert a.grad.tolist() == [0.0] * 6 and b.grad.tolist() == [0.0] * 6


def test_python_numbers_on_either_side() -> None:
    x = Tensor(np.array([5.5, -5.5, 3.25], dtype=np.float32))
    # torch.tensor([5.5, -5.5, 3.25]) // 2, % 2, 10 // t, 10 % t, torch.fmod(t, -2): float32
    assert (x // 2).tolist() == [2.0, -3.0, 1.0] and (x // 2).dtype == np.float32
    assert (x % 2).tolist() == [1.5, 0.5, 1.25]
    assert (10 // x).tolist() == [1.0, -2.0, 3.0] and (10 % x).tolist() == [4.5, -1.0, 0.25]
    assert rtxviz.fmod(x, -2).tolist() == [1.5, -1.5, 1.25]
    v = _leaf([5.5, -5.5])
    (7.0 % v).sum().backward()  # d/dv (7 mod v) = -floor(7 / v) (torch has no derivative for a number on the left)
    assert v.grad.tolist() == [-1.0, 2.0]


def test_integer_floor_division_and_remainder_stay_int64() -> None:
    i, j = _ints([7, -7, 7, -7, 0, 9]), _ints([2, 2, -2, -2, 3, 4])
    # torch: i // j, i % j, torch.fmod(i, j), torch.div(i, j, rounding_mode="trunc"), all int64
    for got, want in [(i // j, [3, -4, -4, 3, 0, 2]), (i % j, [1, 1, -1, -1, 0, 1]),
                      (rtxviz.fmod(i, j), [1, -1, 1, -1, 0, 1]),
                      (i.div(j, rounding_mode="trunc"), [3, -3, -3, 3, 0, 2]),
                      (i // 2, [3, -4, 3, -4, 0, 4]), (i % 3, [1, 2, 1, 2, 0, 0]),
                      (7 // j, [3, 3, -4, -4, 2, 1]), (7 % j, [1, 1, -1, -1, 1, 3])]:
        assert got.dtype == np.int64 and got.tolist() == want
    # torch: i // 2.5 and i % 2.5 are float32
    assert (i // 2.5).dtype == np.float32 and (i // 2.5).tolist() == [2.0, -3.0, 2.0, -3.0, 0.0, 3.0]
    assert (i % 2.5).tolist() == [2.0, 0.5, 2.0, 0.5, 0.0, 1.5]


@pytest.mark.parametrize("f", [lambda i, j: i // j, lambda i, j: i % j, lambda i, j: rtxviz.fmod(i, j)],
                         ids=["//", "%", "fmod"])
def test_integer_division_by_zero_raises_as_pytorch(f: Callable[[Any, Any], Any]) -> None:
    with pytest.raises(ZeroDivisionError, match="int64.*division by zero"):
        f(_ints([7, 1]), _ints([2, 0]))


def test_div_refuses_an_unknown_rounding_mode() -> None:
    with pytest.raises(ValueError, match="div: rounding_mode must be None, 'trunc' or 'floor', got 'round'"):
        Tensor(np.ones(2)).div(2.0, rounding_mode="round")


def test_floor_divide_and_remainder_in_place() -> None:
    x = Tensor(np.array([5.5, -5.5]))
    alias = x
    x //= 2
    x %= 2.0  # torch: [2.0, -3.0] then [0.0, 1.0]
    assert x is alias and x.tolist() == [0.0, 1.0]


# -- dtype promotion: torch's result_type for int64 and bool tensors ----------------------------------------------
I, F, BOOL = [1, 2, 3], [1.0, 2.0, 3.0], [True, False, True]
# (expression, torch's dtype, torch's values): what torch 2.13 gives for i = torch.tensor([1, 2, 3]),
# f = torch.tensor([1., 2., 3.]) (float32), b = torch.tensor([True, False, True])
PROMOTIONS: list[tuple[str, str, list[Any]]] = [
    ("i + 1.5", "float32", [2.5, 3.5, 4.5]),
    ("i - 1.5", "float32", [-0.5, 0.5, 1.5]),
    ("1.5 - i", "float32", [0.5, -0.5, -1.5]),
    ("i * 2.0", "float32", [2.0, 4.0, 6.0]),
    ("i * np.float64(2.5)", "float32", [2.5, 5.0, 7.5]),
    ("i / i", "float32", [1.0, 1.0, 1.0]),
    ("i / 2", "float32", [0.5, 1.0, 1.5]),
    ("2.0 / i", "float32", [2.0, 1.0, 0.6666666865348816]),
    ("2 / i", "float32", [2.0, 1.0, 0.6666666865348816]),
    ("i ** 0.5", "float32", [1.0, 1.4142135381698608, 1.7320507764816284]),
    ("2.0 ** i", "float32", [2.0, 4.0, 8.0]),
    ("f + i", "float32", [2.0, 4.0, 6.0]),
    ("i + f", "float32", [2.0, 4.0, 6.0]),
    ("f * b", "float32", [1.0, 0.0, 3.0]),
    ("rtxviz.maximum(i, f)", "float32", [1.0, 2.0, 3.0]),
    ("rtxviz.atan2(i, i)", "float32", [0.7853981852531433] * 3),
    ("i.exp()", "float32", [2.7182817459106445, 7.389056205749512, 20.08553695678711]),
    ("i.sqrt()", "float32", [1.0, 1.4142135381698608, 1.7320507764816284]),
    ("i.sin()", "float32", [0.8414709568023682, 0.9092974066734314, 0.14112000167369843]),
    ("i.log()", "float32", [0.0, 0.6931471824645996, 1.0986123085021973]),
    ("i.sigmoid()", "float32", [0.7310585975646973, 0.8807970285415649, 0.9525741338729858]),
    ("i.reciprocal()", "float32", [1.0, 0.5, 0.3333333432674408]),
    ("b.exp()", "float32", [2.7182817459106445, 1.0, 2.7182817459106445]),
    ("i.clamp(0.5)", "float32", [1.0, 2.0, 3.0]),
    ("i + 1", "int64", [2, 3, 4]),
    ("i * 2", "int64", [2, 4, 6]),
    ("i ** 2", "int64", [1, 4, 9]),
    ("2 ** i", "int64", [2, 4, 8]),
    ("i // 2", "int64", [0, 1, 1]),
    ("i % 2", "int64", [1, 0, 1]),
    ("i.abs()", "int64", [1, 2, 3]),
    ("-i", "int64", [-1, -2, -3]),
    ("i.relu()", "int64", [1, 2, 3]),
    ("i.square()", "int64", [1, 4, 9]),
    ("i.clamp(1)", "int64", [1, 2, 3]),
    ("i.sum()", "int64", 6),
    ("b + i", "int64", [2, 2, 4]),
    ("i * b", "int64", [1, 0, 3]),
    ("b + 1", "int64", [2, 1, 2]),
    ("b + 1.5", "float32", [2.5, 1.5, 2.5]),
    ("b & b", "bool", [True, False, True]),
    ("b + b", "bool", [True, False, True]),
    ("b * b", "bool", [True, False, True]),
]


@pytest.mark.parametrize(("expr", "dtype", "values"), PROMOTIONS, ids=[p[0] for p in PROMOTIONS])
def test_int_and_bool_tensors_promote_as_torch(expr: str, dtype: str, values: Any) -> None:
    env = {"i": rtxviz.tensor(I), "f": rtxviz.tensor(F), "b": rtxviz.tensor(BOOL), "rtxviz": rtxviz, "np": np}
    y = eval(expr, env)  # the table's expressions
    assert y.dtype == np.dtype(dtype), f"{expr}: {y.dtype}, torch gives {dtype}"
    assert y.tolist() == pytest.approx(values, rel=1e-6)


def test_the_table_agrees_with_torch() -> None:
    torch = pytest.importorskip("torch")
    env = {"i": torch.tensor(I), "f": torch.tensor(F), "b": torch.tensor(BOOL), "np": np,
           "rtxviz": type("T", (), {"maximum": staticmethod(torch.maximum), "atan2": staticmethod(torch.atan2)})}
    for expr, dtype, values in PROMOTIONS:
        y = eval(expr, env)
        assert str(y.dtype) == f"torch.{dtype}" and y.tolist() == pytest.approx(values, rel=1e-6), expr


def test_float_widths_still_do_not_mix() -> None:
    """torch gives float64 for float32 + float64; rtxviz keeps its documented rule (docs/engine.md): no silent
    promotion between float widths, a DTypeError naming both."""
    with pytest.raises(DTypeError, match="float32.*float64"):
        rtxviz.tensor(F) + rtxviz.tensor(F, dtype="float64")


def test_an_int_tensor_meets_a_float_variable_with_the_gradient_kept() -> None:
    v = Variable(np.array([0.5, 1.5, 2.5], dtype=np.float32), requires_grad=True)
    y = (v * rtxviz.tensor(I)).sum()
    assert y.dtype == np.float32
    y.backward()
    assert v.grad.dtype == np.float32 and v.grad.tolist() == [1.0, 2.0, 3.0]


def test_a_set_default_dtype_is_what_ints_promote_to() -> None:
    rtxviz.set_default_dtype("float64")
    try:
        assert (rtxviz.tensor(I) / 2).dtype == np.float64 and rtxviz.tensor(I).exp().dtype == np.float64
    finally:
        rtxviz.set_default_dtype("float32")


# -- constructors ---------------------------------------------------------------------------------------------------
def test_linspace_logspace_and_eye_give_torchs_values() -> None:
    # torch.linspace(0, 1, 5), torch.linspace(-1, 1, 1), torch.linspace(3, 7, 3, dtype=torch.int64)
    assert rtxviz.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert rtxviz.linspace(0, 1, 5).dtype == np.float32 and rtxviz.linspace(-1, 1, 1).tolist() == [-1.0]
    assert rtxviz.linspace(3, 7, 3, dtype="int64").tolist() == [3, 5, 7]
    # torch.logspace(0, 2, 3), torch.logspace(0, 3, 4, base=2)
    assert rtxviz.logspace(0, 2, 3).tolist() == pytest.approx([1.0, 10.0, 100.0])
    assert rtxviz.logspace(0, 3, 4, base=2).tolist() == [1.0, 2.0, 4.0, 8.0]
    # torch.eye(2), torch.eye(2, 3)
    assert rtxviz.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]] and rtxviz.eye(2).dtype == np.float32
    assert rtxviz.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    w = rtxviz.eye(3, dtype="float64", requires_grad=True)
    assert isinstance(w, Variable) and w.requires_grad and w.dtype == np.float64


def test_randint_takes_both_torch_overloads_and_follows_the_seed() -> None:
    rtxviz.manual_seed(5)
    a = rtxviz.randint(10, (200,))
    b = rtxviz.randint(3, 6, (4, 50))
    rtxviz.manual_seed(5)
    assert rtxviz.randint(10, (200,)).tolist() == a.tolist() and rtxviz.randint(3, 6, (4, 50)).tolist() == b.tolist()
    assert a.dtype == np.int64 and a.shape == (200,) and set(a.tolist()) == set(range(10))
    assert b.shape == (4, 50) and set(np.asarray(b.tolist()).ravel()) == {3, 4, 5}
    assert rtxviz.randint(low=2, high=4, size=(30,)).tolist() != [] and rtxviz.randint(0, 2, (3,), dtype="float32"
                                                                                       ).dtype == np.float32
    like = rtxviz.randint_like(rtxviz.zeros(2, 3), 4)
    assert like.shape == (2, 3) and like.dtype == np.float32 and set(np.asarray(like.tolist()).ravel()) <= {0, 1, 2, 3}
    assert set(np.asarray(rtxviz.randint_like(rtxviz.zeros(100), 7, 9).tolist())) == {7.0, 8.0}


def test_randperm_is_a_seeded_permutation() -> None:
    rtxviz.manual_seed(1)
    p = rtxviz.randperm(20)
    rtxviz.manual_seed(1)
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(20)) and rtxviz.randperm(20).tolist() == p.tolist()


@pytest.mark.parametrize(("call", "message"), [
    (lambda: rtxviz.randint(5, 3, (2,)), r"randint: low \(5\) must be less than high \(3\)"),
    (lambda: rtxviz.randint(5), "randint: give the size"),
    (lambda: rtxviz.linspace(0, 1, -1), "linspace: steps must be non-negative, got -1"),
    (lambda: rtxviz.randperm(-2), "randperm: n must be non-negative, got -2"),
    (lambda: rtxviz.eye(-1), "eye: n and m must be non-negative, got n=-1, m=-1"),
    (lambda: rtxviz.randint(3, (2,), requires_grad=True), "only floating-point tensors can require grad"),
])
def test_constructors_refuse_bad_arguments_naming_them(call: Callable[[], Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError, DTypeError), match=message):
        call()


# -- top-level function forms -------------------------------------------------------------------------------------
_M = [[0.5, 1.5, 2.5], [0.25, 0.75, 1.25]]  # positive, no ties: fine for log, sqrt, max...
_SQ = [[2.0, 0.5], [0.25, 3.0]]
_IDX = [[0, 2], [1, 0]]
# name -> (positional arguments after the tensor, keywords); the first argument is x = tensor(_M) unless noted
FUNCTION_FORMS: dict[str, tuple[tuple, dict]] = {
    **{n: ((), {}) for n in ["abs", "arctan", "atan", "cos", "cosh", "erf", "exp", "expm1", "log", "log1p",
                             "reciprocal", "relu", "sigmoid", "sin", "sinh", "sqrt", "square", "tan", "tanh", "neg",
                             "negative", "flatten", "trace", "mean", "sum", "prod", "max", "min", "amax", "amin",
                             "argmax", "argmin", "norm", "std", "var", "logsumexp", "squeeze", "tril", "triu",
                             "diagonal"]},
    **{n: ((2.0,), {}) for n in ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "pow", "maximum",
                                 "minimum", "atan2", "arctan2", "hypot", "xlogy", "floor_divide", "remainder", "fmod",
                                 "true_divide"]},
    "sum_dim": ((), {"dim": 1}), "mean_dim": ((), {"dim": 0, "keepdim": True}), "max_dim": ((1,), {}),
    "clamp": ((), {"min": 0.6, "max": 1.3}), "clip": ((0.6, 1.3), {}), "softmax": ((), {"dim": 1}),
    "log_softmax": ((1,), {}), "cumsum": ((1,), {}), "cumprod": ((0,), {}), "logcumsumexp": ((1,), {}),
    "transpose": ((0, 1), {}), "reshape": ((3, 2), {}), "permute": ((1, 0), {}), "unsqueeze": ((0,), {}),
    "flip": ((0,), {}), "roll": ((1,), {"dims": 1}), "narrow": ((1, 0, 2), {}), "chunk": ((3, 1), {}),
    "split": ((1, 1), {}), "broadcast_to": ((2, 2, 3), {}), "matmul": ((Tensor(np.ones((3, 2))),), {}),
    "outer": ((), {}), "bmm": ((), {}), "det": ((), {}), "inverse": ((), {}), "slogdet": ((), {}),
    "gather": ((1, Tensor(np.array(_IDX))), {}), "index_select": ((1, Tensor(np.array([2, 0]))), {}),
    "masked_fill": ((Tensor(np.array([[True, False, True], [False, False, True]])), 0.0), {}),
    "scatter_add": ((1, Tensor(np.array(_IDX)), Tensor(np.ones((2, 2)))), {}),
    "index_add": ((0, Tensor(np.array([1, 0])), Tensor(np.ones((2, 3)))), {}),
    "logical_and": ((), {}), "logical_or": ((), {}), "logical_not": ((), {}), "bitwise_and": ((), {}),
    "bitwise_or": ((), {}), "bitwise_xor": ((), {}), "bitwise_not": ((), {}),
}


def _subject(name: str) -> Any:
    if name in ("det", "inverse", "slogdet"):
        return Tensor(np.array(_SQ))
    if name == "outer":
        return Tensor(np.array([1.0, 2.0]))
    if name == "bmm":
        return Tensor(np.ones((2, 2, 3)))
    if name.startswith(("logical", "bitwise")):
        return Tensor(np.array([True, False, True]))
    return Tensor(np.array(_M))


def _second(name: str, x: Any) -> tuple:
    """The second tensor operand of a two-tensor function (outer, bmm, the logical ones)."""
    if name == "outer":
        return (Tensor(np.array([3.0, 4.0, 5.0])),)
    if name == "bmm":
        return (Tensor(np.ones((2, 3, 4))),)
    if name in ("logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor"):
        return (Tensor(np.array([True, True, False])),)
    return ()


def _values(y: Any) -> Any:
    if isinstance(y, Tensor):
        return (str(y.dtype), y.tolist())
    return [_values(v) for v in y]  # tuples of tensors (chunk, split, max with a dim, slogdet)


@pytest.mark.parametrize("key", sorted(FUNCTION_FORMS))
def test_torch_function_forms_compute_what_the_method_does(key: str) -> None:
    name = key.split("_dim")[0] if key.endswith("_dim") else key
    args, kwargs = FUNCTION_FORMS[key]
    x = _subject(name)
    args = _second(name, x) + args
    fn = getattr(rtxviz, name)
    assert callable(fn)
    assert _values(fn(x, *args, **kwargs)) == _values(getattr(x, name)(*args, **kwargs))


def test_the_function_forms_are_the_op_functions_and_star_importable() -> None:
    names = {k.split("_dim")[0] if k.endswith("_dim") else k for k in FUNCTION_FORMS}
    for name in names:
        assert getattr(rtxviz, name) is getattr(Tensor, name), name  # the same object: no wrapper
        assert name in rtxviz.__all__, name
    # and the ones that were there before
    for name in ("cat", "stack", "where", "einsum"):
        assert callable(getattr(rtxviz, name))


# -- requires_grad_, detach and grad on a plain Tensor ---------------------------------------------------------------
def test_requires_grad_turns_a_plain_tensor_into_a_leaf_in_place_as_pytorch() -> None:
    """PyTorch's ``x.requires_grad_()``, its result unused: the same object becomes a leaf that requires grad (the
    port of four tutorial scripts found it the most common habit left), over the same buffer."""
    x = rtxviz.randn(3)
    buffer = x.data
    assert x.requires_grad_(False) is x and not x.requires_grad  # asking for no gradient is already true
    x.requires_grad_()
    assert isinstance(x, Variable) and x.requires_grad and x.is_leaf and x.grad is None and x.data is buffer
    (x * x).sum().backward()
    assert x.grad.tolist() == pytest.approx((2 * x.numpy()).tolist())  # d/dx Σx² = 2x
    y = rtxviz.zeros(2).requires_grad_()  # the chained spelling
    (y * 3.0).sum().backward()
    assert y.grad.tolist() == [3.0, 3.0]
    with pytest.raises(DTypeError, match=r"requires_grad_: only floating-point tensors can require grad, got dtype "
                                         r"int64 \(shape \(2,\)\)"):
        rtxviz.tensor([1, 2]).requires_grad_()


def test_a_tensor_made_a_leaf_after_use_as_a_constant_leaves_the_old_graph_alone() -> None:
    c = rtxviz.tensor([2.0, 3.0])
    w = Variable.from_tensor(rtxviz.tensor([1.0, 1.0]), name="w")
    old = (w * c).sum()  # c recorded as a constant
    c.requires_grad_()
    old.backward()
    assert w.grad.tolist() == [2.0, 3.0] and c.grad is None  # the constant got no gradient from the old graph
    (w * c).sum().backward()
    assert c.grad.tolist() == [1.0, 1.0]


def test_detach_and_grad_on_a_plain_tensor() -> None:
    x = rtxviz.randn(3)
    d = x.detach()
    assert type(d) is Tensor and d is not x and d.data is x.data  # the same buffer
    assert x.grad is None and d.grad is None


# -- the lead's additions: what h1's review left in files outside its list ------------------------------------------
def test_mean_of_an_int_tensor_is_refused_as_pytorch_refuses_it() -> None:
    # torch: "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype"
    with pytest.raises(DTypeError, match=r"mean: the input must be a float tensor, got int64 \(shape \(3,\)\)"):
        Tensor(np.arange(3)).mean()
    assert Tensor(np.arange(3)).float().mean().item() == 1.0


def test_where_cat_and_stack_promote_ints_and_bools_as_torch() -> None:
    i = Tensor(np.array([1, 2]))
    f = Variable.from_tensor(Tensor(np.array([0.5, 0.25], dtype=np.float32)), name="f")
    b = Tensor(np.array([True, False]))
    w = rtxviz.where(b, i, f)  # torch.where(b, int64, float32) -> float32 [1.0, 0.25]
    assert (w.dtype.name, w.tolist()) == ("float32", [1.0, 0.25])
    w.sum().backward()
    assert f.grad.tolist() == [0.0, 1.0]
    c = rtxviz.cat([i, f])  # torch.cat([int64, float32]) -> float32
    assert (c.dtype.name, c.tolist()) == ("float32", [1.0, 2.0, 0.5, 0.25])
    s = rtxviz.stack([i, b])  # torch.stack([int64, bool]) -> int64
    assert (s.dtype.name, s.tolist()) == ("int64", [[1, 2], [1, 0]])
    with pytest.raises(DTypeError):  # float widths still never mix silently
        rtxviz.cat([f, Tensor(np.array([1.0]))])
