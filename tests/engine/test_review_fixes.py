"""Regression tests for the engine review: memory of ctx.state, hook replacement checks, retain_grad twice, pow
gradients at 0, numpy integer dims, node output shapes, lazy non-differentiable BackwardFunction errors.

Expected numbers are closed forms or PyTorch 2.13 (torch.autograd, float64), stored here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxviz
from rtxviz import BackwardFunction, GraphError, Tensor, Variable, record_operation
from rtxviz.engine import memory_stats
from rtxviz.engine.ops.nn_conv import conv2d
from rtxviz.engine.ops.nn_norm import dropout, layer_norm

RNG = np.random.default_rng(7)


def var(values, dtype=np.float64, requires_grad: bool = True) -> Variable:
    return Variable(np.asarray(values, dtype=dtype), requires_grad=requires_grad)


def current() -> int:
    return memory_stats(scan=False)["current"]


# -- 1. memory_stats counts the arrays an op keeps in ctx.state ----------------------------------------------------
def test_memory_counts_conv2d_im2col_columns_and_gives_them_back() -> None:
    x = var(RNG.standard_normal((8, 16, 32, 32)), np.float32)
    w = var(RNG.standard_normal((4, 16, 3, 3)), np.float32)
    base = current()
    y = conv2d(x, w, padding=1)
    # im2col columns: n · c · kh · kw · ho · wo float32 (x and w are leaves: not activations)
    assert current() - base == 8 * 16 * 3 * 3 * 32 * 32 * 4  # 4,718,592 bytes
    y.sum().backward()
    assert current() == base


def test_memory_counts_dropout_mask_and_layer_norm_xhat_and_frees_on_del() -> None:
    x = var(RNG.standard_normal((4, 10, 32)), np.float32)
    w = var(np.ones(32), np.float32)
    base = current()
    d = dropout(x, 0.3)
    assert current() - base == 4 * 10 * 32 * 4  # the float32 mask
    del d
    assert current() == base  # a graph dropped without backward gives its bytes back
    y = layer_norm(x, 32, weight=w)
    assert current() - base == 4 * 10 * 32 * 4 + 4 * 10 * 4  # x̂ and 1/σ per row
    del y
    assert current() == base


def test_memory_state_of_shapes_is_not_counted() -> None:
    a, b = var(np.ones((3, 4))), var(np.ones((1, 4)))
    base = current()
    c = a + b  # ctx.state is (shape, shape): nothing to count
    s = a.sum(dim=1)  # ctx.state is a shape
    assert current() == base
    del c, s


# -- 2. a hook may not change a gradient's shape, dtype or device -------------------------------------------------
def test_node_hook_changing_shape_raises() -> None:
    x = var([1.0, 2.0])
    y = x * 2

    def widen(g):
        return Tensor(np.ones(3))

    y.register_hook(widen)
    with pytest.raises(GraphError, match=r"hook .*widen.* size.*\(2,\).*\(3,\)"):
        y.sum().backward()


def test_leaf_hook_changing_dtype_raises() -> None:
    x = var([1.0, 2.0])
    x.register_hook(lambda g: g.to(dtype="float32"))
    with pytest.raises(GraphError, match=r"type .*float64.*float32"):
        (x * 2).sum().backward()


def test_hook_returning_plain_tensor_of_right_shape_replaces_gradient() -> None:
    x = var([1.0, 2.0])
    y = x * 3
    y.register_hook(lambda g: Tensor(np.array([1.0, -1.0])))
    y.sum().backward()
    assert x.grad.tolist() == [3.0, -3.0]  # d(3x)/dx · replaced upstream [1, -1]


def test_hook_returning_non_tensor_raises() -> None:
    x = var([1.0, 2.0])
    x.register_hook(lambda g: [1.0, 1.0])
    with pytest.raises(GraphError, match="must return a Tensor or None"):
        (x * 2).sum().backward()


# -- 3. retain_grad is idempotent -----------------------------------------------------------------------------------
def test_retain_grad_twice_does_not_double() -> None:
    x = var([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.retain_grad()
    y.sum().backward()
    assert y.grad.tolist() == [1.0, 1.0]
    assert x.grad.tolist() == [2.0, 2.0]


# -- 4. pow gradients at 0, as PyTorch ------------------------------------------------------------------------------
def test_pow_tensor_exponent_zero_at_base_zero() -> None:
    x, p = var([0.0, 2.0]), var(0.0)
    (x**p).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]  # torch: [0, 0]
    assert p.grad.item() == pytest.approx(0.6931471805599453)  # torch: ln 2 (the 0 base contributes 0)


def test_pow_tensor_exponent_two_at_base_zero() -> None:
    x, p = var([0.0, 2.0]), var(2.0)
    (x**p).sum().backward()
    assert x.grad.tolist() == [0.0, 4.0]
    assert p.grad.item() == pytest.approx(2.772588722239781)  # torch: 4 ln 2


def test_pow_elementwise_masks_match_torch() -> None:
    x, p = var([0.0, 0.0, 0.0, 3.0]), var([0.0, 2.0, -1.0, 0.5])
    with np.errstate(divide="ignore", invalid="ignore"):
        (x**p).sum().backward()
    # torch 2.13: x.grad [0, 0, -inf, 0.2887], p.grad [0, 0, -inf, 1.9029]
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, -np.inf, 0.28867513459481287])
    np.testing.assert_allclose(p.grad.numpy(), [0.0, 0.0, -np.inf, 1.902852301792692])


def test_pow_scalar_zero_exponent_at_zero() -> None:
    x = var([0.0, 2.0])
    (x**0.0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]  # torch: zeros


def test_rpow_scalar_zero_base() -> None:
    x = var([-1.0, 0.0, 2.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        (0.0**x).sum().backward()
    assert x.grad.tolist() == [-math.inf, 0.0, 0.0]  # torch: [-inf, 0, 0]


def test_pow_second_order_at_zero_base() -> None:
    x, p = var([0.0, 2.0]), var(3.0)
    gx, gp = rtxviz.grad((x**p).sum(), [x, p], create_graph=True)
    np.testing.assert_allclose(gx.numpy(), [0.0, 12.0])  # 3x²
    assert gp.item() == pytest.approx(8 * math.log(2))  # Σ x³ ln x, the 0 base contributes 0
    hx, hp = rtxviz.grad(gx.sum(), [x, p])
    np.testing.assert_allclose(hx.numpy(), [0.0, 12.0])  # torch: 6x
    assert hp.item() == pytest.approx(12.317766166719343)  # torch: Σ x² + 3x² ln x = 4 + 12 ln 2


# -- 5. numpy integer dims -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["sum", "mean", "var", "max", "min", "logsumexp"])
def test_reductions_accept_numpy_integer_dims(method: str) -> None:
    data = np.array([[1.0, 2.0, 6.0], [3.0, 5.0, 4.0]])
    expected = {"sum": [9.0, 12.0], "mean": [3.0, 4.0], "var": [7.0, 1.0], "max": [6.0, 5.0],
                "min": [1.0, 3.0], "logsumexp": [np.log(np.exp(data[0]).sum()), np.log(np.exp(data[1]).sum())]}
    x = var(data)
    for dim in (np.int64(1), np.int32(-1), np.array(1)):
        out = getattr(x, method)(dim)
        out = out.values if method in ("max", "min") else out  # over a dim: (values, indices), as PyTorch
        np.testing.assert_allclose(out.numpy(), expected[method])


def test_numpy_integer_dims_in_lists_and_argmax() -> None:
    x = var(np.arange(6.0).reshape(2, 3))
    assert x.sum([np.int64(0), np.int64(1)]).item() == 15.0
    assert x.argmax(np.int64(1)).tolist() == [2, 2]
    with pytest.raises(TypeError, match="dim must be an int"):
        x.sum(1.5)


# -- 6. nodes remember their output's shape and dtype ---------------------------------------------------------------
def test_node_remembers_output_shape_and_dtype_after_backward() -> None:
    x = var(np.ones((2, 3)), np.float32)
    w = var(np.ones((4, 3)), np.float32)
    y = x.matmul(w.transpose(0, 1)).sum(dim=1)
    node = y.grad_fn
    mm = node.next[0]
    y.sum().backward()
    assert (node.out_shape, str(node.out_dtype)) == ((2,), "float32")
    assert (mm.out_shape, str(mm.out_dtype)) == ((2, 4), "float32")


def test_record_operation_node_has_output_shape() -> None:
    class Double(BackwardFunction):
        def backward(self, g):
            return [g * 2.0]

    x = var([[1.0, 2.0, 3.0]])
    y = record_operation([x], Tensor(np.array([[2.0, 4.0, 6.0]])), Double())
    assert y.grad_fn.out_shape == (1, 3) and str(y.grad_fn.out_dtype) == "float64"


# -- 7. a non-differentiable BackwardFunction errs only when differentiated twice -----------------------------------
class Square(BackwardFunction):
    def forward(self, ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(self, grad_output):
        (x,) = self.ctx.saved_tensors
        return [grad_output * x * 2.0]


def test_non_differentiable_function_allows_create_graph_when_not_differentiated_again() -> None:
    x, w = var([1.5, -2.0]), var([0.5, 3.0])
    loss = (Square()(x) * w).sum() + (w * w * w).sum()
    gx, gw = rtxviz.grad(loss, [x, w], create_graph=True)
    np.testing.assert_allclose(gx.numpy(), 2 * np.array([1.5, -2.0]) * [0.5, 3.0])  # 2 x w
    np.testing.assert_allclose(gw.numpy(), np.array([1.5, -2.0]) ** 2 + 3 * np.array([0.5, 3.0]) ** 2)
    # a penalty on gw only: its derivative in w is 6w, and goes through Square's forward output only
    (h,) = rtxviz.grad(gw.sum(), w)
    np.testing.assert_allclose(h.numpy(), 6 * np.array([0.5, 3.0]))


def test_non_differentiable_function_raises_when_second_backward_reaches_it() -> None:
    x = var([1.5, -2.0])
    x2 = Square()(x)
    (x2 * x2).sum().backward(create_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([1.5, -2.0]) ** 3)
    with pytest.raises(GraphError, match="Square's backward is not differentiable.*differentiable = True"):
        x.grad.sum().backward()


def test_pow_masks_are_recomputed_by_a_graph_cache_replay() -> None:
    from rtxviz.engine.cache import cache_graph, init_graph_cache

    init_graph_cache()
    a, p = var([1.0, 2.0]), var(0.5)

    def step(x: Tensor) -> Variable:
        loss = ((a**p) * x).sum()
        loss.backward()
        return loss

    x = Tensor(np.ones(2))
    graph = cache_graph(step, x)  # captured where no mask is active
    a.data[:] = [0.0, 2.0]  # values changed in place, as an optimizer does
    p.data[...] = 0.0
    a.grad = p.grad = None
    with np.errstate(divide="ignore", invalid="ignore"):
        graph.execute(x)
    assert a.grad.tolist() == [0.0, 0.0]  # torch: [0, 0]
    assert p.grad.item() == pytest.approx(0.6931471805599453)  # torch: ln 2
    init_graph_cache()
