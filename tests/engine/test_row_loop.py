"""The row-by-row Jacobian/Hessian loop, which walks one retained graph once per row with a reused plan."""

from __future__ import annotations

import numpy as np

from rtxviz import Tensor, Variable
from rtxviz.engine.backward import run_backward
from rtxviz.engine.functional import HessianComputer, JacobianComputer


def test_jacobian_row_loop_matches_the_closed_form_with_an_unused_input_entry() -> None:
    # f(x) = [x0 * x1, sin(x1)]: x2 is unused, so its column is zero.
    x0 = np.array([0.5, -1.5, 2.0])

    def f(v: Variable) -> Variable:
        a, b = v.narrow(0, 0, 1), v.narrow(0, 1, 1)
        return a * b * Tensor(np.array([1.0, 0.0])) + b.sin() * Tensor(np.array([0.0, 1.0]))

    J = JacobianComputer.compute(f, Tensor(x0), batched=False).numpy()
    expected = np.array([[x0[1], x0[0], 0.0], [0.0, np.cos(x0[1]), 0.0]])
    np.testing.assert_allclose(J, expected, atol=1e-12)


def test_hessian_row_loop_matches_the_closed_form() -> None:
    # f(x) = sum(tanh(W x)): H = Wᵀ diag(-2 t (1 - t²)) W with t = tanh(W x).
    rng = np.random.default_rng(3)
    W = rng.standard_normal((5, 4)) / 2
    x0 = rng.standard_normal(4)
    Wt = Tensor(W)
    H = HessianComputer.compute(lambda v: (Wt @ v).tanh().sum(), Tensor(x0), batched=False).numpy()
    t = np.tanh(W @ x0)
    np.testing.assert_allclose(H, W.T @ np.diag(-2 * t * (1 - t * t)) @ W, atol=1e-12)


def test_a_reused_plan_gives_each_cotangent_its_own_gradient() -> None:
    # y = [3 x0, x0 x1] at x = (2, 5): the Jacobian rows are (3, 0) and (x1, x0) = (5, 2); the second walk runs
    # on the plan the first one stored.
    x = Variable.from_tensor(Tensor(np.array([2.0, 5.0])), requires_grad=True)
    y = x * Tensor(np.array([3.0, 0.0])) + x.narrow(0, 0, 1) * x.narrow(0, 1, 1) * Tensor(np.array([0.0, 1.0]))
    plan: dict = {}
    rows = []
    for cot in (np.array([1.0, 0.0]), np.array([0.0, 1.0])):
        (g,) = run_backward([y], [Tensor(cot)], True, False, [x], False, plan)
        rows.append(g.numpy())
        assert plan["order"]
    np.testing.assert_allclose(np.stack(rows), [[3.0, 0.0], [5.0, 2.0]])
