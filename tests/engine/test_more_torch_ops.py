"""The elementwise, shape and linalg functions PyTorch scripts reach for after the basics: sign, round, floor, ceil,
trunc, frac, rsqrt, lerp, nan_to_num, dot, mm, mv, addmm, baddbmm, diag, tile, repeat_interleave, hstack, vstack,
concat, meshgrid, nonzero, unique, count_nonzero, clamp_min and clamp_max.

Expected values are PyTorch 2.13's (CPU, float64; each pasted with the torch call that gave it) or finite
differences (tests/finite_differences.py), never this engine's own output.
"""

from __future__ import annotations

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, Variable
from rtxviz.engine.errors import DimError, DTypeError, ShapeError
from tests.finite_differences import numeric_grad_of


def _var(values: list, dtype: str = "float64") -> Variable:
    arr = np.array(values, dtype=dtype)
    return Variable.from_tensor(Tensor.from_slice(arr.ravel().tolist(), list(arr.shape), dtype=dtype))


def _grads(y: Variable, weight: list, *xs: Variable) -> list:
    """The gradients of sum(y · weight) in xs, as lists."""
    (y * Tensor(np.array(weight, dtype=np.float64))).sum().backward()
    return [x.grad.tolist() for x in xs]


# -- rounding: torch's values and its zero gradients --------------------------------------------------------------
@pytest.mark.parametrize(("fn", "expected"), [
    # torch.sign / floor / ceil / trunc of tensor([-2.5, -1.5, -0.3, 0.5, 1.5, 2.5, 0.7], float64)
    ("sign", [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0]),
    ("floor", [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 0.0]),
    ("ceil", [-2.0, -1.0, -0.0, 1.0, 2.0, 3.0, 1.0]),
    ("trunc", [-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 0.0]),
    ("round", [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 1.0]),
])
def test_piecewise_constant_functions_match_torch_with_zero_gradients(fn: str, expected: list) -> None:
    x = _var([-2.5, -1.5, -0.3, 0.5, 1.5, 2.5, 0.7])
    y = getattr(rtxviz, fn)(x)
    assert y.tolist() == expected
    assert np.signbit(y.numpy()).tolist() == np.signbit(np.array(expected)).tolist()  # torch's -0.0 too
    y.sum().backward()
    assert x.grad.tolist() == [0.0] * 7  # torch.autograd.grad(torch.<fn>(x).sum(), x): zeros
    assert getattr(x, fn)().tolist() == expected  # the Tensor method is the same function


def test_round_with_decimals_matches_torch_bits() -> None:
    # torch.round(tensor([0.125, 0.135, 1.2345, -2.675], float64), decimals=2); numpy.round agrees here, but
    # torch's rint(x·100)/100 is what is matched
    assert rtxviz.round(_var([0.125, 0.135, 1.2345, -2.675]), decimals=2).tolist() == [0.12, 0.14, 1.23, -2.68]
    # torch.round(tensor([1234.5, 1250.0, -1350.0], float64), decimals=-2)
    assert rtxviz.round(_var([1234.5, 1250.0, -1350.0]), decimals=-2).tolist() == [1200.0, 1200.0, -1400.0]
    # the same in float32
    got = rtxviz.round(_var([0.125, 0.135, 1.2345, -2.675], "float32"), decimals=2).tolist()
    assert got == [0.11999999731779099, 0.14000000059604645, 1.2300000190734863, -2.680000066757202]


def test_rounding_an_integer_tensor_keeps_it() -> None:
    x = Tensor(np.array([2, -3]))
    for fn in ("floor", "ceil", "trunc", "round", "sign"):
        y = getattr(rtxviz, fn)(x)
        assert y.dtype == x.dtype and y.tolist() == ([1, -1] if fn == "sign" else [2, -3]), fn
    assert rtxviz.sign(Tensor(np.array([True, False]))).tolist() == [True, False]  # torch.sign of bool


def test_frac_matches_torch_and_passes_the_gradient() -> None:
    x = _var([-2.75, -0.5, 0.0, 1.25])
    y = rtxviz.frac(x)
    assert y.tolist() == [-0.75, -0.5, 0.0, 0.25]  # torch.frac
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 1.0]  # torch's derivative of frac is 1


def test_rsqrt_matches_torch() -> None:
    x = _var([0.25, 1.5, 4.0])
    y = x.rsqrt()
    # torch.rsqrt(x) and grad of (y · [1, 2, 3]).sum()
    np.testing.assert_allclose(y.tolist(), [2.0, 0.8164965809277261, 0.5], rtol=1e-15)
    np.testing.assert_allclose(_grads(y, [1.0, 2.0, 3.0], x)[0], [-4.0, -0.5443310539518176, -0.1875], rtol=1e-14)
    assert rtxviz.rsqrt(Tensor(np.array([4, 1]))).dtype == rtxviz.float32  # torch: float32 for int64


def test_lerp_tensor_weight_matches_torch() -> None:
    a, b, w = _var([1.0, -2.0, 3.0]), _var([0.5, 4.0, -1.0]), _var([0.25, 0.75, 0.5])
    y = rtxviz.lerp(a, b, w)
    assert y.tolist() == [0.875, 2.5, 1.0]  # torch.lerp(a, b, w)
    # torch.autograd.grad((torch.lerp(a, b, w) * [1, 2, -1]).sum(), (a, b, w))
    assert _grads(y, [1.0, 2.0, -1.0], a, b, w) == [[0.75, 0.5, -0.5], [0.25, 1.5, -0.5], [-0.5, 12.0, 4.0]]


def test_lerp_scalar_weight_matches_torch() -> None:
    a, b = _var([1.0, -2.0, 3.0]), _var([0.5, 4.0, -1.0])
    y = a.lerp(b, 0.75)
    assert y.tolist() == [0.625, 2.5, 0.0]  # torch.lerp(a, b, 0.75)
    assert _grads(y, [1.0, 2.0, -1.0], a, b) == [[0.25, 0.5, -0.25], [0.75, 1.5, -0.75]]


def test_nan_to_num_matches_torch() -> None:
    x = _var([float("nan"), float("inf"), float("-inf"), 2.0])
    y = rtxviz.nan_to_num(x, nan=1.0, neginf=-5.0)
    assert y.tolist() == [1.0, 1.7976931348623157e308, -5.0, 2.0]  # torch.nan_to_num(x, nan=1.0, neginf=-5.0)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 1.0]  # torch's gradient: only where x is finite
    # torch.nan_to_num(tensor([inf, -inf])) in float32: float32's largest and lowest
    assert Tensor.from_slice([float("inf"), float("-inf")], [2]).nan_to_num().tolist() == \
        [3.4028234663852886e38, -3.4028234663852886e38]


def test_clamp_min_and_clamp_max() -> None:
    x = _var([-2.0, 0.5, 3.0])
    assert rtxviz.clamp_min(x, 0.0).tolist() == [0.0, 0.5, 3.0]
    y = x.clamp_max(1.0)
    assert y.tolist() == [-2.0, 0.5, 1.0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 0.0]  # torch.clamp_max's gradient: 0 where clipped
    with pytest.raises(ValueError, match="clamp_min: min must be"):
        rtxviz.clamp_min(x, None)


# -- products --------------------------------------------------------------------------------------------------
def _check_product_grads(fn, arrays: list[np.ndarray]) -> None:
    """Each input's gradient of sum(fn(...) · w) against central differences on numpy."""
    vs = [Variable.from_tensor(Tensor(a.copy())) for a in arrays]
    y = fn(*vs)
    w = np.linspace(0.5, 1.5, y.numpy().size).reshape(y.shape)
    (y * Tensor(w)).sum().backward()

    def f(*xs: np.ndarray) -> float:
        return float((fn(*(Tensor(x) for x in xs)).numpy() * w).sum())

    for i, v in enumerate(vs):
        np.testing.assert_allclose(v.grad.numpy(), numeric_grad_of(f, arrays, i), rtol=1e-6, atol=1e-8)


def test_dot_mm_mv_values_and_gradients() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    assert rtxviz.dot(Tensor(a), Tensor(b)).item() == pytest.approx(float(a @ b), rel=1e-14)
    _check_product_grads(rtxviz.dot, [a, b])
    _check_product_grads(rtxviz.mm, [rng.standard_normal((2, 3)), rng.standard_normal((3, 4))])
    _check_product_grads(rtxviz.mv, [rng.standard_normal((2, 3)), rng.standard_normal(3)])
    _check_product_grads(lambda i, x, y: rtxviz.baddbmm(i, x, y, beta=0.5, alpha=-2.0),
                         [rng.standard_normal((1, 4)), rng.standard_normal((2, 3, 2)), rng.standard_normal((2, 2, 4))])


def test_addmm_matches_torch() -> None:
    i, m1, m2 = _var([1.0, -1.0]), _var([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), _var([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])
    y = rtxviz.addmm(i, m1, m2, beta=0.5, alpha=2.0)
    assert y.tolist() == [[14.5, -2.5], [32.5, -2.5]]  # torch.addmm(i, m1, m2, beta=0.5, alpha=2.0)
    assert _grads(y, [[1.0, 2.0], [3.0, 4.0]], i, m1, m2) == [
        [2.0, 3.0], [[2.0, 4.0, 0.0], [6.0, 8.0, 4.0]], [[26.0, 36.0], [34.0, 48.0], [42.0, 60.0]]]
    # torch.addmm(tensor([nan, nan]), ones(2, 3), ones(3, 2), beta=0): the input is not read
    out = rtxviz.addmm(Tensor.from_slice([float("nan")] * 2, [2]), Tensor.ones([2, 3]), Tensor.ones([3, 2]), beta=0)
    assert out.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_products_refuse_the_wrong_ranks_and_shapes() -> None:
    m, v = Tensor.ones([2, 3]), Tensor.ones([3])
    with pytest.raises(ShapeError, match=r"dot: expected two 1-D tensors, got shapes \(2, 3\) and \(3,\)"):
        rtxviz.dot(m, v)
    with pytest.raises(ShapeError, match="dot: the vectors' lengths differ: 3 and 2"):
        rtxviz.dot(v, Tensor.ones([2]))
    with pytest.raises(ShapeError, match=r"mm: inner dimensions differ: \(2, 3\) @ \(2, 3\)"):
        rtxviz.mm(m, m)
    with pytest.raises(ShapeError, match=r"mm: expected two 2-D matrices"):
        rtxviz.mm(m, v)
    with pytest.raises(ShapeError, match=r"mv: the matrix \(2, 3\) and the vector \(2,\) do not fit"):
        rtxviz.mv(m, Tensor.ones([2]))
    with pytest.raises(DTypeError, match="dot: both operands must have the same dtype"):
        rtxviz.dot(v, Tensor.ones([3], dtype="float64"))
    with pytest.raises(ShapeError, match=r"addmm: input of shape \(3,\) does not broadcast"):
        rtxviz.addmm(Tensor.ones([3]), m, Tensor.ones([3, 2]))


# -- shapes ----------------------------------------------------------------------------------------------------
def test_diag_of_a_vector_matches_torch() -> None:
    v = _var([1.0, 2.0])
    y = rtxviz.diag(v, -1)
    assert y.tolist() == [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]  # torch.diag(v, -1)
    assert _grads(y, np.arange(9.0).reshape(3, 3).tolist(), v) == [[3.0, 7.0]]


def test_diag_of_a_matrix_matches_torch() -> None:
    m = _var(np.arange(12.0).reshape(3, 4).tolist())
    y = m.diag(1)
    assert y.tolist() == [1.0, 6.0, 11.0]  # torch.diag(arange(12.).reshape(3, 4), 1)
    assert _grads(y, [1.0, 2.0, 3.0], m) == [[[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 3.0]]]
    with pytest.raises(DimError, match=r"diag: expected a 1-D or 2-D tensor, got 3-D of shape \(1, 1, 1\)"):
        rtxviz.diag(Tensor.ones([1, 1, 1]))


def test_repeat_interleave_matches_torch() -> None:
    r = _var([[1.0, 2.0], [3.0, 4.0]])
    y = rtxviz.repeat_interleave(r, 3, dim=0)
    assert y.tolist() == [[1.0, 2.0]] * 3 + [[3.0, 4.0]] * 3  # torch.repeat_interleave(r, 3, dim=0)
    assert _grads(y, np.arange(12.0).reshape(6, 2).tolist(), r) == [[[6.0, 9.0], [24.0, 27.0]]]
    r2 = _var([[1.0, 2.0], [3.0, 4.0]])
    y = r2.repeat_interleave(2)
    assert y.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]  # torch.repeat_interleave(r, 2)
    assert _grads(y, np.arange(8.0).tolist(), r2) == [[[1.0, 5.0], [9.0, 13.0]]]
    with pytest.raises(ShapeError, match="repeat_interleave: repeats must be >= 0, got -1"):
        rtxviz.repeat_interleave(r, -1)


def test_tile_hstack_vstack_concat() -> None:
    x = Tensor.arange(4).reshape(2, 2)
    assert rtxviz.tile(x, (2, 1, 2)).shape == (2, 2, 4)  # torch.tile(x, (2, 1, 2)).shape
    assert x.tile((2,)).tolist() == [[0, 1, 0, 1], [2, 3, 2, 3]]  # torch: dims padded in front with ones
    assert rtxviz.hstack([Tensor.ones([2, 1]), Tensor.zeros([2, 2])]).shape == (2, 3)
    assert rtxviz.hstack([Tensor.from_slice([1.0], []), Tensor.from_slice([2.0, 3.0], [2])]).tolist() == [1.0, 2.0, 3.0]
    assert rtxviz.vstack([Tensor.from_slice([1.0, 2.0], [2]), Tensor.from_slice([3.0, 4.0, 5.0, 6.0], [2, 2])]
                         ).tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert rtxviz.vstack([Tensor.from_slice([1.0], []), Tensor.from_slice([2.0], [])]).shape == (2, 1)
    assert rtxviz.concat([x, x], dim=1).tolist() == rtxviz.concatenate([x, x], 1).tolist() == \
        [[0, 1, 0, 1], [2, 3, 2, 3]]


def test_meshgrid_matches_torch() -> None:
    p, q = _var([1.0, 2.0]), _var([3.0, 4.0, 5.0])
    gx, gy = rtxviz.meshgrid(p, q, indexing="xy")
    # torch.meshgrid(p, q, indexing="xy")
    assert gx.tolist() == [[1.0, 2.0]] * 3 and gy.tolist() == [[3.0, 3.0], [4.0, 4.0], [5.0, 5.0]]
    (gx * Tensor(np.arange(6.0).reshape(3, 2))).sum().__add__((gy * gy).sum()).backward()
    assert p.grad.tolist() == [6.0, 9.0] and q.grad.tolist() == [12.0, 16.0, 20.0]
    ix, iy = rtxviz.meshgrid([p, q])  # one list, "ij"
    assert ix.tolist() == [[1.0] * 3, [2.0] * 3] and iy.tolist() == [[3.0, 4.0, 5.0]] * 2
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'ij' or 'xy', got 'yx'"):
        rtxviz.meshgrid(p, q, indexing="yx")
    with pytest.raises(DimError, match=r"meshgrid: expects 0-D or 1-D tensors, got tensor 1 of shape \(2, 2\)"):
        rtxviz.meshgrid(p, Tensor.ones([2, 2]))


# -- selections without gradient ---------------------------------------------------------------------------------
def test_nonzero_matches_torch() -> None:
    x = Tensor.from_slice([0.0, 3.0, 0.0, 1.0, 0.0, -2.0], [2, 3])
    assert x.nonzero().tolist() == [[0, 1], [1, 0], [1, 2]]  # torch.nonzero(x)
    rows, cols = rtxviz.nonzero(x, as_tuple=True)
    assert rows.tolist() == [0, 1, 1] and cols.tolist() == [1, 0, 2]
    assert rtxviz.nonzero(Tensor.from_slice([5.0], [])).shape == (1, 0)  # torch.nonzero(tensor(5.0))
    assert rtxviz.nonzero(Tensor.zeros([2, 2])).shape == (0, 2)
    assert rtxviz.nonzero(x).dtype == rtxviz.int64


def test_unique_and_count_nonzero_match_torch() -> None:
    x = Tensor.from_slice([2.5, -1.0, 2.5, 0.0], [2, 2])
    values, inverse, counts = rtxviz.unique(x, return_inverse=True, return_counts=True)
    # torch.unique(x, return_inverse=True, return_counts=True)
    assert values.tolist() == [-1.0, 0.0, 2.5] and inverse.tolist() == [[2, 0], [2, 1]] and counts.tolist() == [1, 1, 2]
    assert x.unique().tolist() == [-1.0, 0.0, 2.5]
    y = Tensor.from_slice([0.0, 3.0, 0.0, 1.0, 0.0, -2.0], [2, 3])
    assert rtxviz.count_nonzero(y, dim=1).tolist() == [1, 2]  # torch.count_nonzero(y, dim=1)
    assert y.count_nonzero(dim=(0, 1)).tolist() == 3 and y.count_nonzero().dtype == rtxviz.int64
    with pytest.raises(NotImplementedError, match="unique: dim=0 is not supported"):
        rtxviz.unique(x, dim=0)


def test_bad_dtypes_and_arguments_are_named() -> None:
    with pytest.raises(DTypeError, match="frac: needs a float tensor, got int64"):
        rtxviz.frac(Tensor(np.array([1, 2])))
    with pytest.raises(DTypeError, match="round: decimals=1 needs a float tensor, got int64"):
        rtxviz.round(Tensor(np.array([1, 2])), decimals=1)
    with pytest.raises(TypeError, match="round: decimals must be an int, got 0.5"):
        rtxviz.round(Tensor.ones([2]), decimals=0.5)
    with pytest.raises(TypeError, match="repeat_interleave: repeats must be an int"):
        rtxviz.repeat_interleave(Tensor.ones([2]), [1, 2])
