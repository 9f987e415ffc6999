"""Shape and reduction ops: values against numpy closed forms, gradients and second derivatives against central
finite differences in float64, PyTorch's conventions (negative dims, 0-d, keepdim), and error messages."""

import numpy as np
import pytest

import rtxviz
from rtxviz import DimError, DTypeError, ShapeError, Tensor, Variable
from rtxviz.engine.ops.shape import cat, stack, where
from tests.finite_differences import numeric_grad

RNG = np.random.default_rng(0)


def leaf(arr):
    return Variable.from_tensor(Tensor(np.asarray(arr, dtype=np.float64)))


def check_grads(op, *arrays, seed=1, atol=1e-6):
    """grad of sum(op(*xs) * w) for every input against finite differences; returns the output value."""
    w = None

    def loss(xs, graph=False):
        nonlocal w
        vs = [leaf(a) for a in xs]
        out = op(*vs)
        if w is None:
            w = np.random.default_rng(seed).standard_normal(out.shape)
        total = (out * Tensor(w)).sum()
        return (total, vs) if graph else total.item()

    total, vs = loss(arrays, graph=True)
    grads = rtxviz.grad(total, vs)
    for i, (a, g) in enumerate(zip(arrays, grads, strict=True)):
        def f(ai, i=i):
            xs = list(arrays)
            xs[i] = ai
            return loss(xs)

        np.testing.assert_allclose(g.numpy(), numeric_grad(f, a), atol=atol, rtol=1e-5, err_msg=f"input {i}")
    return op(*[Tensor(np.asarray(a, dtype=np.float64)) for a in arrays]).numpy()


def check_second_order(op, x, seed=2):
    """d/dx <grad_x sum(op(x)³ · w), v> with create_graph twice, against finite differences of the first
    gradient (itself checked against finite differences of the function)."""
    rng = np.random.default_rng(seed)
    w = None

    def first_grad(xa, graph):
        nonlocal w
        v = leaf(xa)
        y = op(v)
        if w is None:
            w = rng.standard_normal(y.shape)
        total = (y * y * y * Tensor(w)).sum()
        (g,) = rtxviz.grad(total, [v], create_graph=graph)
        return g, v, total

    g, v, total = first_grad(x, True)
    # the first gradient against finite differences of the function
    np.testing.assert_allclose(
        g.numpy(), numeric_grad(lambda a: (op(Tensor(a)).numpy() ** 3 * w).sum(), x), atol=1e-5, rtol=1e-5)
    u = rng.standard_normal(np.shape(x))
    (h,) = rtxviz.grad((g * Tensor(u)).sum(), [v], create_graph=True)
    expected = numeric_grad(lambda a: (first_grad(a, False)[0].numpy() * u).sum(), x)
    np.testing.assert_allclose(h.numpy(), expected, atol=1e-5, rtol=1e-5)


def randn(*shape):
    return RNG.standard_normal(shape)


# -- reductions: values ---------------------------------------------------------------------------------------
X = randn(2, 3, 4)


@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (-1, True), ((0, 2), False),
                                         ([-1, 0], True)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_values(dim, keepdim, correction):
    axis = tuple(dim) if isinstance(dim, list) else dim
    got = Tensor(X).var(dim, keepdim=keepdim, correction=correction).numpy()
    mu = X.mean(axis=axis, keepdims=True)
    n = X.size if axis is None else int(np.prod([X.shape[d] for d in np.atleast_1d(axis)]))
    want = ((X - mu) ** 2).sum(axis=axis, keepdims=keepdim) / (n - correction)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_var_unbiased_flag_std_and_single_element():
    x = Tensor([1.0, 2.0, 3.0, 4.0])
    assert x.var().item() == pytest.approx(5 / 3)
    assert x.var(unbiased=False).item() == pytest.approx(1.25)
    assert x.std().item() == pytest.approx(np.sqrt(5 / 3))
    assert np.isnan(Tensor([2.0]).var().item())  # PyTorch: 0/0 quietly
    assert Tensor([2.0]).var(correction=0).item() == 0.0


@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (-1, True), ((0, 2), False)])
def test_logsumexp_values(dim, keepdim):
    axis = tuple(dim) if isinstance(dim, tuple) else dim
    want = np.log(np.exp(X).sum(axis=axis, keepdims=keepdim))
    np.testing.assert_allclose(Tensor(X).logsumexp(dim, keepdim=keepdim).numpy(), want, rtol=1e-12)


def test_logsumexp_is_stable_and_keeps_float32():
    big = Tensor(np.array([1000.0, 1000.0, -1000.0], dtype=np.float32))
    out = big.logsumexp(0)
    assert out.dtype == np.float32
    assert out.item() == pytest.approx(1000.0 + np.log(2.0), rel=1e-6)
    assert Tensor(np.array([-1000.0, -1000.0])).logsumexp().item() == pytest.approx(-1000.0 + np.log(2.0))
    assert Tensor(np.array([-np.inf, -np.inf])).logsumexp().item() == -np.inf
    assert Tensor(np.array([1.0, np.inf])).logsumexp().item() == np.inf


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_values(name):
    f = getattr(np, name)
    t = Tensor(X)
    values, indices = getattr(t, name)(dim=1)  # (values, indices), as PyTorch
    np.testing.assert_array_equal(values.numpy(), f(X, axis=1))
    np.testing.assert_array_equal(indices.numpy(), getattr(np, "arg" + name)(X, axis=1))
    np.testing.assert_array_equal(getattr(t, name)(dim=-1, keepdim=True).values.numpy(), f(X, axis=-1, keepdims=True))
    assert getattr(t, name)().item() == f(X)
    assert getattr(t, name)().shape == ()
    assert getattr(Tensor(np.float64(3.0)), name)(dim=0).values.item() == 3.0  # 0-d with dim 0, as PyTorch


def test_max_with_tensor_argument_is_maximum():
    a, b = Tensor([1.0, 5.0]), Tensor([3.0, 2.0])
    assert a.max(b).tolist() == [3.0, 5.0] and a.min(b).tolist() == [1.0, 2.0]


def test_argmax_argmin():
    t = Tensor(X)
    am = t.argmax(dim=1)
    assert am.dtype == np.int64 and not isinstance(am, Variable)
    np.testing.assert_array_equal(am.numpy(), X.argmax(axis=1))
    np.testing.assert_array_equal(t.argmin(dim=-1, keepdim=True).numpy(), X.argmin(axis=-1)[..., None])
    assert t.argmax().item() == X.argmax() and t.argmax().shape == ()
    assert Tensor([3.0, 1.0, 3.0]).argmax().item() == 0  # first of a tie
    v = leaf(X)
    assert not v.argmax(0).requires_grad


def test_reductions_on_non_contiguous_input():
    base = randn(4, 5)
    t = Tensor(base).transpose(0, 1)  # a strided view
    np.testing.assert_allclose(t.var(0).numpy(), base.T.var(axis=0, ddof=1))
    np.testing.assert_allclose(t.max(dim=0).values.numpy(), base.T.max(axis=0))
    np.testing.assert_allclose(t.logsumexp(1).numpy(), np.log(np.exp(base.T).sum(axis=1)))


def test_zero_d_reductions():
    s = leaf(np.float64(1.5))
    assert s.sum(0).item() == 1.5 and s.mean(-1).item() == 1.5
    assert s.logsumexp(0).item() == 1.5
    (g,) = rtxviz.grad(s.max(dim=0).values, [s])
    assert g.item() == 1.0


# -- reductions: gradients ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (-1, True), ((0, 2), False)])
def test_var_grad(dim, keepdim):
    check_grads(lambda x: x.var(dim, keepdim=keepdim), X)
    check_grads(lambda x: x.var(dim, keepdim=keepdim, correction=0), X)


@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (-1, True), ((0, 2), False)])
def test_logsumexp_grad(dim, keepdim):
    check_grads(lambda x: x.logsumexp(dim, keepdim=keepdim), X)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_max_min_grad(name, dim, keepdim):
    def f(x):  # over a dim: (values, indices), as PyTorch
        out = getattr(x, name)(dim=dim, keepdim=keepdim)
        return out if dim is None else out.values

    check_grads(f, X)


def test_max_gradient_goes_to_first_arg_max_and_ties_split_over_all():
    x = leaf([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    (g,) = rtxviz.grad(x.max(dim=1).values.sum(), [x])
    assert g.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]  # as PyTorch's max(dim): the returned index
    y = leaf([1.0, 3.0, 3.0])
    (g,) = rtxviz.grad(y.max(), [y])
    assert g.tolist() == [0.0, 0.5, 0.5]  # as PyTorch's max(): evenly among ties


def test_reduction_second_order():
    x = randn(3, 4)
    check_second_order(lambda v: v.var(1), x)
    check_second_order(lambda v: v.var(None, correction=0), x)
    check_second_order(lambda v: v.logsumexp(-1, keepdim=True), x)
    check_second_order(lambda v: v.logsumexp(), x)
    check_second_order(lambda v: v.max(dim=0).values, x)
    check_second_order(lambda v: v.min(dim=1, keepdim=True).values, x)


def test_logsumexp_hessian_is_softmax_jacobian():
    x = np.array([0.3, -1.2, 2.0, 0.5])
    v = leaf(x)
    (g,) = rtxviz.grad(v.logsumexp(), [v], create_graph=True)
    p = np.exp(x) / np.exp(x).sum()
    rows = [rtxviz.grad(g[i], [v], retain_graph=True)[0].numpy() for i in range(4)]
    np.testing.assert_allclose(np.array(rows), np.diag(p) - np.outer(p, p), atol=1e-12)


def test_reduction_errors():
    t = Tensor(X)
    with pytest.raises(DimError, match=r"var: dim 3 is out of range .* 3 dim"):
        t.var(3)
    with pytest.raises(DimError, match="logsumexp: dim .* repeats"):
        t.logsumexp((1, -2))
    with pytest.raises(DimError, match="max: dim -4"):
        t.max(dim=-4)
    with pytest.raises(DimError, match="argmin: dim 5"):
        t.argmin(5)
    with pytest.raises(ShapeError, match=r"max: cannot reduce an empty tensor of shape \(0,\)"):
        Tensor(np.zeros(0)).max()


# -- shape ops: values ---------------------------------------------------------------------------------------
def test_permute_values_and_forms():
    t = Tensor(X)
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), X.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.permute([1, -1, 0]).numpy(), X.transpose(1, 2, 0))
    np.testing.assert_array_equal(t.T.numpy(), X.T)
    np.testing.assert_array_equal(t.mT.numpy(), X.swapaxes(-1, -2))
    assert Tensor([1.0, 2.0]).T.shape == (2,)


def test_squeeze_flatten_narrow_values():
    t = Tensor(np.zeros((2, 1, 3, 1)))
    assert t.squeeze().shape == (2, 3)
    assert t.squeeze(1).shape == (2, 3, 1)
    assert t.squeeze(-1).shape == (2, 1, 3)
    assert t.squeeze(0).shape == (2, 1, 3, 1)  # not size 1: unchanged, as PyTorch
    assert t.squeeze((1, 3)).shape == (2, 3)
    assert Tensor([5.0]).squeeze(0).shape == ()
    assert Tensor(np.float64(2.0)).squeeze().shape == ()
    assert Tensor(X).flatten().shape == (24,)
    assert Tensor(X).flatten(1).shape == (2, 12)
    assert Tensor(X).flatten(0, -2).shape == (6, 4)
    assert Tensor(np.float64(2.0)).flatten().shape == (1,)
    np.testing.assert_array_equal(Tensor(X).narrow(-1, 1, 2).numpy(), X[..., 1:3])
    np.testing.assert_array_equal(Tensor(X).narrow(1, -2, 2).numpy(), X[:, 1:3])


def test_cat_stack_split_chunk_values():
    a, b = randn(2, 3), randn(1, 3)
    np.testing.assert_array_equal(cat([Tensor(a), Tensor(b)], 0).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(cat((Tensor(a), Tensor(a)), -1).numpy(), np.concatenate([a, a], -1))
    np.testing.assert_array_equal(stack([Tensor(a), Tensor(a)], -1).numpy(), np.stack([a, a], -1))
    np.testing.assert_array_equal(stack([Tensor(a), Tensor(a)], 1).numpy(), np.stack([a, a], 1))
    parts = Tensor(np.arange(7.0)).split(3)
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4, 5], [6]]
    parts = Tensor(np.arange(7.0)).split([2, 5])
    assert [p.shape for p in parts] == [(2,), (5,)]
    assert [p.shape for p in Tensor(np.zeros((2, 5))).chunk(3, dim=1)] == [(2, 2), (2, 2), (2, 1)]
    assert [p.shape for p in Tensor(np.zeros((6,))).chunk(4)] == [(2,), (2,), (2,)]  # fewer, as PyTorch


def test_index_select_values():
    idx = Tensor(np.array([2, 0, 2]))
    np.testing.assert_array_equal(Tensor(X).index_select(1, idx).numpy(), X[:, [2, 0, 2]])
    np.testing.assert_array_equal(Tensor(X).index_select(-1, Tensor([3])).numpy(), X[..., [3]])
    assert Tensor(np.float64(4.0)).index_select(0, Tensor([0])).item() == 4.0


def test_getitem_values():
    t = Tensor(X)
    cases = [
        (1,), (-1, 2), (slice(None), None, 1), (Ellipsis, slice(None, None, -1)), (slice(1, None), slice(None, 2)),
        (slice(None, None, -2), Ellipsis, None),
    ]
    for key in cases:
        np.testing.assert_array_equal(t[key].numpy(), X[key])
    np.testing.assert_array_equal(t[Tensor([1, 1, 0])].numpy(), X[[1, 1, 0]])
    np.testing.assert_array_equal(t[:, [0, 2], 1:3].numpy(), X[:, [0, 2], 1:3])
    np.testing.assert_array_equal(t[0, [1, 2], [0, 3]].numpy(), X[0, [1, 2], [0, 3]])
    np.testing.assert_array_equal(t[t > 0].numpy(), X[X > 0])
    np.testing.assert_array_equal(t[..., Tensor(np.array([True, False, True, False]))].numpy(), X[..., [0, 2]])
    s = Tensor(np.float64(2.0))
    assert s[()].item() == 2.0 and s[None].shape == (1,)
    assert [r.tolist() for r in Tensor([[1.0, 2.0], [3.0, 4.0]])] == [[1.0, 2.0], [3.0, 4.0]]


def test_where_masked_fill_values():
    a, b = randn(3, 4), randn(4)
    cond = a > 0
    np.testing.assert_array_equal(where(Tensor(cond), Tensor(a), Tensor(b)).numpy(), np.where(cond, a, b))
    np.testing.assert_array_equal(where(Tensor(cond), Tensor(a), 0.0).numpy(), np.where(cond, a, 0.0))
    np.testing.assert_array_equal(Tensor(a).where(Tensor(cond), Tensor(b)).numpy(), np.where(cond, a, b))
    np.testing.assert_array_equal(Tensor(a).masked_fill(Tensor(cond), -1.0).numpy(), np.where(cond, -1.0, a))
    f32 = Tensor(a.astype(np.float32))
    assert f32.masked_fill(Tensor(cond[0]), 2.0).dtype == np.float32  # mask broadcasts; dtype kept
    assert where(Tensor(cond), f32, 0.0).dtype == np.float32


def test_shape_ops_keep_float32():
    t = Tensor(X.astype(np.float32))
    for out in (t.permute(2, 1, 0), t.narrow(0, 0, 1), t.squeeze(), cat([t, t], 1), stack([t, t]),
                t.index_select(1, Tensor([0])), t[0, ::-1], t[t > 0], t.var(1), t.logsumexp(0), t.max(dim=2).values):
        assert out.dtype == np.float32


# -- shape ops: gradients --------------------------------------------------------------------------------------
def test_permute_squeeze_flatten_grads():
    check_grads(lambda x: x.permute(2, 0, 1), X)
    check_grads(lambda x: x.permute(1, -1, 0), X)
    check_grads(lambda x: x.T, X)
    check_grads(lambda x: x.mT, X)
    check_grads(lambda x: x.squeeze(1), randn(2, 1, 3))
    check_grads(lambda x: x.squeeze(), randn(1, 3, 1))
    check_grads(lambda x: x.flatten(1), X)


def test_narrow_split_chunk_grads():
    check_grads(lambda x: x.narrow(1, 1, 2), X)
    check_grads(lambda x: x.narrow(-1, 0, 3) * x.narrow(-1, 1, 3), X)  # overlapping windows add up
    check_grads(lambda x: cat(list(x.split([1, 3], dim=-1))[::-1], -1), X)
    check_grads(lambda x: stack(list(x.chunk(2, dim=2)), 0), X)


def test_cat_stack_grads():
    a, b, c = randn(2, 3), randn(1, 3), randn(3, 3)
    check_grads(lambda x, y, z: cat([x, y, z], 0), a, b, c)
    check_grads(lambda x, y: cat([x, y * y], -1), randn(2, 1), randn(2, 3))
    check_grads(lambda x, y, z: stack([x, y, z], 1), a, a + 1, a - 1)
    check_grads(lambda x, y: stack([x, y], -1), a, a * 2)


def test_cat_skips_inputs_without_grad():
    x = leaf(randn(2, 2))
    const = Tensor(randn(1, 2))
    (g,) = rtxviz.grad((cat([const, x], 0) * 2.0).sum(), [x])
    np.testing.assert_array_equal(g.numpy(), np.full((2, 2), 2.0))


def test_index_select_grad_accumulates_repeats():
    check_grads(lambda x: x.index_select(0, Tensor([4, 0, 2, 0])), randn(5, 3))
    check_grads(lambda x: x.index_select(-1, Tensor([1, 1, 1])), X)
    x = leaf(np.zeros(3))
    (g,) = rtxviz.grad(x.index_select(0, Tensor([2, 2, 0, 2])).sum(), [x])
    assert g.tolist() == [1.0, 0.0, 3.0]


@pytest.mark.parametrize("key", [
    (1,), (slice(None), None, slice(None, None, -1)), (Ellipsis, 2), (slice(None, None, -2), slice(1, 3)),
    ([1, 1, 0],), (slice(None), [0, 2, 0], slice(1, 3)), (0, [1, 2, 1], [3, 3, 0]),
])
def test_getitem_grad(key):
    check_grads(lambda x: x[key], X)


def test_getitem_grad_with_masks_and_tensor_indices():
    mask = X > 0
    check_grads(lambda x: x[Tensor(mask)], X)
    check_grads(lambda x: x[:, Tensor(mask[0, :, 0])], X)
    check_grads(lambda x: x[Tensor(np.array([1, 1]))], X)


def test_where_and_masked_fill_grads():
    a, b = randn(3, 4), randn(4)
    cond = Tensor(a > 0)
    check_grads(lambda x, y: where(cond, x, y), a, b)
    check_grads(lambda x: where(cond, x, 0.0), a)
    check_grads(lambda x: x.masked_fill(Tensor(a < 0.3), 5.0), a)
    check_grads(lambda x: x.masked_fill(Tensor((a < 0.3)[0]), 5.0), a)


def test_where_gradient_is_masked_not_multiplied():
    # 0 * inf would be nan: where passes exact zeros to the side not chosen
    x = leaf([1.0, -1.0])
    y = where(Tensor(np.array([True, False])), x, x * 0.0).sum()
    (g,) = rtxviz.grad(y, [x])
    assert g.tolist() == [1.0, 0.0]


def test_shape_second_order():
    x = randn(2, 3, 4)
    check_second_order(lambda v: v.permute(2, 0, 1), x)
    check_second_order(lambda v: cat([v, v.narrow(1, 0, 2)], 1), x)
    check_second_order(lambda v: stack([v, v], 0), x)
    check_second_order(lambda v: v.index_select(0, Tensor([1, 0, 1])), x)
    check_second_order(lambda v: v[:, ::-1, None], x)
    check_second_order(lambda v: v[Tensor([1, 1, 0]), :, [0, 3, 3]], x)
    check_second_order(lambda v: v[Tensor(x > 0)], x)
    check_second_order(lambda v: where(Tensor(x > 0), v, v * 2.0), x)


def test_backward_of_shape_ops_on_float32_keeps_dtype():
    x = Variable.from_tensor(Tensor(X.astype(np.float32)))
    (g,) = rtxviz.grad((x[0, ::-1] * 2.0).sum() + x.index_select(2, Tensor([0, 0])).sum(), [x])
    assert g.dtype == np.float32


# -- errors ---------------------------------------------------------------------------------------------------
def test_shape_errors():
    t = Tensor(X)
    with pytest.raises(DimError, match=r"permute: dims \[0, 1\] has 2 entries .* 3 dims"):
        t.permute(0, 1)
    with pytest.raises(DimError, match="permute: dim .* repeats"):
        t.permute(0, 1, -2)
    with pytest.raises(DimError, match="squeeze: dim 4 is out of range"):
        t.squeeze(4)
    with pytest.raises(DimError, match="narrow: dim 3 is out of range"):
        t.narrow(3, 0, 1)
    with pytest.raises(ShapeError, match=r"narrow: start 2 \+ length 3 exceeds dim 1 of size 3"):
        t.narrow(1, 2, 3)
    with pytest.raises(DimError, match="narrow: start 7 is out of range for dim 2 of size 4"):
        t.narrow(2, 7, 0)
    with pytest.raises(DimError, match="flatten: start_dim 2 comes after end_dim 1"):
        t.flatten(2, 1)
    with pytest.raises(ShapeError, match=r"split: sizes \[1, 1\] do not add up to dim 1 of size 3"):
        t.split([1, 1], 1)


def test_cat_stack_errors():
    a = Tensor(np.zeros((2, 3)))
    with pytest.raises(ShapeError, match=r"cat: tensor 1 has shape \(2, 4\) but tensor 0 has shape \(2, 3\).*"
                                         r"except in dim 0"):
        cat([a, Tensor(np.zeros((2, 4)))], 0)
    with pytest.raises(ShapeError, match=r"cat: tensor 1 has shape \(3,\)"):
        cat([a, Tensor(np.zeros(3))], 0)
    with pytest.raises(DTypeError, match="cat: inputs have different dtypes"):
        cat([a, Tensor(np.zeros((2, 3), dtype=np.float32))], 0)
    with pytest.raises(ShapeError, match="cat: expected a non-empty list"):
        cat([], 0)
    with pytest.raises(DimError, match="cat: dim 2 is out of range"):
        cat([a, a], 2)
    with pytest.raises(DimError, match="cat: zero-dimensional"):
        cat([Tensor(np.float64(1.0))], 0)
    with pytest.raises(ShapeError, match=r"stack: tensor 1 has shape \(3, 2\) but tensor 0 has shape \(2, 3\)"):
        stack([a, Tensor(np.zeros((3, 2)))])
    with pytest.raises(DimError, match="stack: dim 3 is out of range"):
        stack([a, a], 3)


def test_index_errors():
    t = Tensor(X)
    with pytest.raises(DimError, match="index_select: index 5 is out of range for dim 2 of size 4"):
        t.index_select(2, Tensor([0, 5]))
    with pytest.raises(DimError, match="index_select: index -1 is out of range"):
        t.index_select(0, Tensor([-1]))
    with pytest.raises(DTypeError, match="index_select: indices must be integers"):
        t.index_select(0, Tensor([0.0]))
    with pytest.raises(ShapeError, match="index_select: index must be 1-D"):
        t.index_select(0, Tensor([[0]]))
    with pytest.raises(DimError, match="getitem: index 3 is out of range for dim 1 of size 3"):
        t[0, 3]
    with pytest.raises(DimError, match="getitem: index -3 is out of range for dim 0 of size 2"):
        t[-3]
    with pytest.raises(DimError, match="getitem: index 9 is out of range for dim 2 of size 4"):
        t[:, :, Tensor([0, 9])]
    with pytest.raises(DimError, match=r"getitem: too many indices \(4\)"):
        t[0, 0, 0, 0]
    with pytest.raises(ShapeError, match=r"getitem: boolean mask of shape \(3,\) does not match"):
        t[Tensor(np.array([True, False, True]))]
    with pytest.raises(IndexError):  # DimError is an IndexError: iteration and except IndexError work
        t[2]
    with pytest.raises(DTypeError, match="where: the condition/mask must be a bool tensor"):
        where(Tensor([1.0]), t, t)
    with pytest.raises(ShapeError, match=r"masked_fill: mask of shape \(5,\) does not broadcast"):
        t.masked_fill(Tensor(np.zeros(5, dtype=bool)), 0.0)
