"""Higher-order derivatives: repeated grad(create_graph=True), Hessians, Jacobians, vjp/jvp/hvp.

Expected values come from closed forms, float64 central differences of plain numpy functions, and the
PyTorch numbers stored in rtxviz/reference/higher_order.json.
"""

import math

import numpy as np
import pytest

from rtxviz import BackwardFunction, ShapeError, Tensor, Variable, grad
from rtxviz.conformance import load_file, program, reference_path
from rtxviz.engine.functional import HessianComputer, JacobianComputer, hessian, hvp, jacobian, jvp, vjp
from rtxviz.engine.ops import REFERENCE
from tests.finite_differences import numeric_jacobian


def var(values, shape=None):
    a = np.asarray(values, dtype=np.float64)
    return Variable.from_tensor(Tensor(a if shape is None else a.reshape(shape)))


def t64(values, shape=None):
    a = np.asarray(values, dtype=np.float64)
    return Tensor(a if shape is None else a.reshape(shape))


# -- repeated grad with create_graph ---------------------------------------------------------------------------
def derivatives(f, x0, order):
    x = var([x0])
    y = f(x).sum()
    out = []
    for _ in range(order):
        (y,) = grad(y, x, create_graph=True)
        out.append(y.item())
        y = y.sum()
    return out


@pytest.mark.parametrize("x0", [0.7, -1.3, 2.0])
def test_third_derivative_of_x4(x0):
    d1, d2, d3 = derivatives(lambda x: x.pow(4), x0, 3)
    assert d1 == pytest.approx(4 * x0**3, rel=1e-12)
    assert d2 == pytest.approx(12 * x0**2, rel=1e-12)
    assert d3 == pytest.approx(24 * x0, rel=1e-12)


def test_third_derivative_of_x4_as_products():
    d1, d2, d3, d4 = derivatives(lambda x: x * x * x * x, 1.5, 4)
    assert (d1, d2, d3, d4) == pytest.approx((4 * 1.5**3, 12 * 1.5**2, 24 * 1.5, 24.0), rel=1e-12)


@pytest.mark.parametrize("x0", [0.4, 2.5])
def test_third_derivative_of_sin(x0):
    d1, d2, d3 = derivatives(lambda x: x.sin(), x0, 3)
    assert (d1, d2, d3) == pytest.approx((math.cos(x0), -math.sin(x0), -math.cos(x0)), rel=1e-12)


def test_mixed_partials_of_two_inputs():
    # f = x² y³ + sin(x y);  f_xy = 6 x y² + cos(xy) - x y sin(xy) = f_yx
    x0, y0 = 0.8, -1.1
    x, y = var([x0]), var([y0])
    f = (x * x * y.pow(3) + (x * y).sin()).sum()
    gx, gy = grad(f, [x, y], create_graph=True)
    (fxy,) = grad(gx.sum(), y, retain_graph=True)
    (fyx,) = grad(gy.sum(), x, retain_graph=True)
    (fxx,) = grad(gx.sum(), x, retain_graph=True)
    (fyy,) = grad(gy.sum(), y)
    want_xy = 6 * x0 * y0**2 + math.cos(x0 * y0) - x0 * y0 * math.sin(x0 * y0)
    assert fxy.item() == pytest.approx(want_xy, rel=1e-12)
    assert fyx.item() == pytest.approx(want_xy, rel=1e-12)
    assert fxx.item() == pytest.approx(2 * y0**3 - y0**2 * math.sin(x0 * y0), rel=1e-12)
    assert fyy.item() == pytest.approx(6 * x0**2 * y0 - x0**2 * math.sin(x0 * y0), rel=1e-12)


def test_backward_create_graph_then_grad_of_grad():
    x = var([0.5, -2.0])
    (x.pow(3).sum()).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    (h,) = grad(g.sum(), x)
    assert h.tolist() == pytest.approx([3.0, -12.0])


# -- the spec's two examples -------------------------------------------------------------------------------
def test_spec_hessian_of_sum_of_squares_is_2I():
    x = Variable.from_tensor(Tensor.from_slice([1.0, 2.0, 3.0], [3]))  # float32, as the spec
    H = HessianComputer.compute(lambda v: v.pow(2).sum(), x)
    assert H.shape == (3, 3) and H.dtype == np.float32
    assert H.numpy().tolist() == (2 * np.eye(3)).tolist()


def test_spec_narrow_add_jacobian():
    x = Variable.from_tensor(Tensor.randn([3]))
    J = JacobianComputer.compute(lambda v: v.narrow(0, 0, 2).add(v.narrow(0, 1, 2)), x)
    assert J.shape == (2, 3)
    assert J.numpy().tolist() == [[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]


# -- Hessians and Jacobians against closed forms ---------------------------------------------------------------
RNG = np.random.default_rng(7)
W = RNG.standard_normal((6, 5)) / 2
X5 = RNG.standard_normal(5)


def tanh_hessian(w, x):
    t = np.tanh(w @ x)
    return w.T @ np.diag(-2 * t * (1 - t * t)) @ w


@pytest.mark.parametrize("batched", [True, False])
def test_hessian_of_sum_tanh_Wx_closed_form(batched):
    Wt = Tensor(W)
    H = HessianComputer.compute(lambda v: (Wt @ v).tanh().sum(), t64(X5), batched=batched)
    np.testing.assert_allclose(H.numpy(), tanh_hessian(W, X5), rtol=1e-12, atol=1e-14)


def test_hessian_with_matrix_input_and_broadcasting():
    # f(X) = sum_ij b_j tanh((X A)_ij), X [2,3], A [3,4], b [4] broadcast over rows.
    # d²f/dX_ik dX_lm = δ_il Σ_j b_j (-2 t_ij (1 - t_ij²)) A_kj A_mj
    Xm, A, b = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    At, bt = Tensor(A), Tensor(b)
    H = HessianComputer.compute(lambda v: ((v @ At).tanh() * bt).sum(), t64(Xm))
    t = np.tanh(Xm @ A)
    want = np.zeros((2, 3, 2, 3))
    for i in range(2):
        want[i, :, i, :] = (A * (b * -2 * t[i] * (1 - t[i] ** 2))) @ A.T
    assert H.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(H.numpy(), want, rtol=1e-12, atol=1e-14)
    flat = HessianComputer.compute(lambda v: ((v @ At).tanh() * bt).sum(), t64(Xm), flatten=True)
    np.testing.assert_allclose(flat.numpy(), want.reshape(6, 6), rtol=1e-12, atol=1e-14)


def test_hessian_of_a_rich_function_against_finite_differences():
    # mean / sum over dims, expand by broadcasting, division, exp, sigmoid, transpose, batched matmul
    A = RNG.standard_normal((2, 3, 4)) / 2
    x0 = RNG.standard_normal((4, 3))
    At = Tensor(A)

    def f(v):
        h = (At @ v).sigmoid()                    # [2,3,3]
        s = h.sum(dim=0) / (v.transpose(0, 1).exp().mean(dim=1, keepdim=True) + 1.0)
        return (s * s).mean()

    def f_np(v):
        h = 1 / (1 + np.exp(-(A @ v)))
        s = h.sum(0) / (np.exp(v.T).mean(1, keepdims=True) + 1.0)
        return (s * s).mean()

    def grad_np(v):
        return numeric_jacobian(f_np, v, 1e-5)

    H = HessianComputer.compute(f, t64(x0))
    want = numeric_jacobian(grad_np, x0, 1e-4)
    np.testing.assert_allclose(H.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H.numpy(), HessianComputer.compute(f, t64(x0), batched=False).numpy(), atol=1e-6)


def test_jacobian_closed_forms():
    Wt = Tensor(W)
    J = JacobianComputer.compute(lambda v: Wt @ v, t64(X5))
    np.testing.assert_allclose(J.numpy(), W, rtol=0, atol=1e-15)
    t = np.tanh(X5)
    J = jacobian(lambda v: v.tanh() * v, t64(X5))
    np.testing.assert_allclose(J.numpy(), np.diag((1 - t * t) * X5 + t), rtol=1e-12)


def test_jacobian_shapes_follow_pytorch():
    x = t64(RNG.standard_normal((2, 3)))
    J = JacobianComputer.compute(lambda v: v.sum(dim=1) * 2.0, x)
    assert J.shape == (2, 2, 3)
    want = np.zeros((2, 2, 3))
    want[0, 0, :] = want[1, 1, :] = 2.0
    np.testing.assert_array_equal(J.numpy(), want)
    assert JacobianComputer.compute(lambda v: v.sum(dim=1) * 2.0, x, flatten=True).shape == (2, 6)
    s = JacobianComputer.compute(lambda v: (v * v).sum(), x)  # one-element output: J has x's shape
    np.testing.assert_allclose(s.numpy(), 2 * x.numpy())


def test_jacobian_of_batched_matmul_against_finite_differences():
    A = RNG.standard_normal((3, 2, 4))
    B = RNG.standard_normal((4, 5))
    At = Tensor(A)
    J = JacobianComputer.compute(lambda v: (At @ v).sin(), t64(B))
    np.testing.assert_allclose(J.numpy(), numeric_jacobian(lambda v: np.sin(A @ v), B), rtol=1e-6, atol=1e-8)
    Bt = Tensor(B)
    J = JacobianComputer.compute(lambda v: (v @ Bt).sin(), t64(A))
    np.testing.assert_allclose(J.numpy(), numeric_jacobian(lambda v: np.sin(v @ B), A), rtol=1e-6, atol=1e-8)


def test_hessian_of_a_linear_function_is_zero_and_vector_output_is_refused():
    x = t64([1.0, 2.0])
    assert HessianComputer.compute(lambda v: (v * 3.0).sum(), x).numpy().tolist() == [[0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(ShapeError, match="one element"):
        hessian(lambda v: v * v, x)


class Cube(BackwardFunction):
    """x³ with a differentiable backward (it keeps the Variable x, as the spec's `MatMulBackward { a, b }`).
    No batched rule knows it, so the batched walk runs its rule once per row."""

    differentiable = True

    def __init__(self, x):
        super().__init__()
        self.x = x

    def forward(self, ctx, x):
        return x * x * x

    def backward(self, g):
        return [g * 3.0 * self.x * self.x]


def test_hessian_through_an_unbatchable_op_falls_back_per_row():
    x0 = np.array([0.5, -1.0, 2.0])
    J = JacobianComputer.compute(lambda v: Cube(v)(v) * 2.0, t64(x0))  # the Cube node is on the walked path
    np.testing.assert_allclose(J.numpy(), np.diag(6 * x0**2), rtol=1e-12)
    H = HessianComputer.compute(lambda v: (Cube(v)(v) * 2.0).sum(), t64(x0))
    np.testing.assert_allclose(H.numpy(), np.diag(12 * x0), rtol=1e-12)


def test_hessian_with_a_hook_on_the_path_uses_the_unbatched_walk():
    seen = []

    def f(v):
        h = v * v
        h.register_hook(lambda g: seen.append(g.shape))
        return (h * v).sum()

    x0 = np.array([1.0, -2.0])
    H = HessianComputer.compute(f, t64(x0))
    np.testing.assert_allclose(H.numpy(), np.diag(6 * x0), rtol=1e-12)
    assert seen and all(s == (2,) for s in seen)


# -- vjp / jvp / hvp ---------------------------------------------------------------------------------------
def test_vjp_jvp_hvp_closed_forms():
    Wt, u, v5 = Tensor(W), RNG.standard_normal(6), RNG.standard_normal(5)
    t = np.tanh(W @ X5)
    y, g = vjp(lambda a: (Wt @ a).tanh(), t64(X5), t64(u))
    np.testing.assert_allclose(y.numpy(), t, rtol=1e-14)
    np.testing.assert_allclose(g.numpy(), W.T @ ((1 - t * t) * u), rtol=1e-12)
    y, jv = jvp(lambda a: (Wt @ a).tanh(), t64(X5), t64(v5))
    np.testing.assert_allclose(jv.numpy(), (1 - t * t) * (W @ v5), rtol=1e-12)
    y, hv = hvp(lambda a: (Wt @ a).tanh().sum(), t64(X5), t64(v5))
    np.testing.assert_allclose(hv.numpy(), tanh_hessian(W, X5) @ v5, rtol=1e-12)


def test_vjp_of_one_element_output_defaults_v_to_one():
    _, g = vjp(lambda a: (a * a).sum(), t64([1.0, -3.0]))
    assert g.numpy().tolist() == [2.0, -6.0]
    with pytest.raises(ShapeError, match="v is required"):
        vjp(lambda a: a * a, t64([1.0, -3.0]))


# -- PyTorch's numbers: rtxviz/reference/higher_order.json -------------------------------------------------
HIGHER = [c for name in ("higher_order.json", "ops_v2.json") for c in load_file(reference_path(name))["cases"]
          if "hessian" in c["expect"] or "jacobian" in c["expect"]]


@pytest.mark.parametrize("case", HIGHER, ids=[c["name"] for c in HIGHER])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "loop"])
def test_higher_order_reference(case, batched):
    missing = [op for op in program.ops_of(case) if op not in REFERENCE]
    if missing:
        pytest.skip(f"op(s) {missing} not in the registry (rtxviz.engine.ops.REFERENCE) yet")
    names, fn = program.build(case)
    kind = "hessian" if "hessian" in case["expect"] else "jacobian"
    spec = case["expect"][kind]
    k = names.index(spec["wrt"])
    values = [program.tensor(case["inputs"][n], np.float64) for n in names]

    def f(v):
        args = list(values)
        args[k] = v
        return fn(*args)

    computer = HessianComputer if kind == "hessian" else JacobianComputer
    got = computer.compute(f, values[k], flatten=True, batched=batched)
    want = np.asarray(spec["data"]).reshape(spec["shape"])
    np.testing.assert_allclose(got.numpy(), want, rtol=case["tol"]["rtol"], atol=case["tol"]["atol"])
