"""The graph machinery: the tape, user BackwardFunctions (the spec's MatMulBackward), deep chains, memory over
a long training loop, grad modes (incl. per thread), detach, retain_graph, and gradients of intermediates.
Expected numbers are closed forms computed here in numpy."""

from __future__ import annotations

import gc
import math
import threading

import numpy as np
import pytest

import rtxviz
from rtxviz import (
    AutogradTape,
    BackwardFunction,
    GraphError,
    TapeNode,
    Tensor,
    Variable,
    enable_grad,
    is_grad_enabled,
    no_grad,
    record_operation,
)

RNG = np.random.default_rng(1234)


def var(array: np.ndarray | list, requires_grad: bool = True) -> Variable:
    return Variable(np.asarray(array, dtype=np.float64), requires_grad=requires_grad)


# -- the tape ----------------------------------------------------------------------------------------------------
def test_tape_records_nodes_in_order() -> None:
    x, w = var([1.0, 2.0]), var([3.0, 4.0])
    with AutogradTape() as tape:
        y = x * w
        z = y.exp()
        s = z.sum()
    assert [n.name for n in tape.nodes] == ["mul", "exp", "sum"]
    assert tape.nodes == [y.grad_fn, z.grad_fn, s.grad_fn]
    assert [n.id for n in tape.nodes] == sorted(n.id for n in tape.nodes)
    assert all(isinstance(n, TapeNode) for n in tape)
    assert len(tape) == 3
    # edges: exp's input is mul's node; mul's inputs are the two leaves
    assert z.grad_fn.next[0] is y.grad_fn
    assert y.grad_fn.next[0] is x and y.grad_fn.next[1] is w


def test_tape_records_nothing_outside_its_scope_or_under_no_grad() -> None:
    x = var([1.0])
    with AutogradTape() as tape:
        with no_grad():
            x * 2.0
        (x + 1.0).sum()
    x * 3.0  # after the scope
    assert [n.name for n in tape.nodes] == ["add_scalar", "sum"]


def test_tape_skips_inputs_that_need_no_grad() -> None:
    x, c = var([1.0, 2.0]), var([5.0, 6.0], requires_grad=False)
    with AutogradTape() as tape:
        y = x * c
    (node,) = tape.nodes
    assert node.next[0] is x and node.next[1] is None
    assert node.needs_input_grad == (True, False)
    y.sum().backward()
    assert c.grad is None and x.grad.tolist() == [5.0, 6.0]


# -- user BackwardFunctions: the spec's MatMulBackward ---------------------------------------------------------------
class MatMulBackward(BackwardFunction):
    """Backward function for C = A @ B, written as the spec writes it: holds a and b, returns
    [grad @ bᵀ, aᵀ @ grad]."""

    def __init__(self, a: Tensor, b: Tensor) -> None:
        super().__init__()
        self.a = a
        self.b = b

    def backward(self, grad_output: Tensor) -> list:
        grad_a = grad_output.matmul(self.b.transpose(0, 1))
        grad_b = self.a.transpose(0, 1).matmul(grad_output)
        return [grad_a, grad_b]


def test_record_operation_with_spec_matmul_backward_matches_builtin() -> None:
    a_np, b_np, g_np = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal((3, 2))
    a, b = var(a_np), var(b_np)
    tape = AutogradTape()
    out = a.tensor.matmul(b.tensor)  # the forward, computed without a graph
    c = tape.record_operation([a, b], out, MatMulBackward(a.tensor, b.tensor))
    assert [n.name for n in tape.nodes] == ["MatMulBackward"] and c.grad_fn is tape.nodes[0]
    assert not c.is_leaf and c.requires_grad
    (c.tanh() * Tensor(g_np)).sum().backward()

    a2, b2 = var(a_np), var(b_np)
    (a2.matmul(b2).tanh() * Tensor(g_np)).sum().backward()

    g = g_np * (1 - np.tanh(a_np @ b_np) ** 2)  # closed form: d/dC of sum(tanh(C)·G)
    np.testing.assert_allclose(a.grad.numpy(), g @ b_np.T, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), a_np.T @ g, rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), b2.grad.numpy(), rtol=1e-12)


def test_module_level_record_operation_and_only_needed_inputs() -> None:
    a, b = var(RNG.standard_normal((2, 2))), var(RNG.standard_normal((2, 2)), requires_grad=False)
    c = record_operation([a, b], a.tensor.matmul(b.tensor), MatMulBackward(a.tensor, b.tensor))
    c.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.ones((2, 2)) @ b.numpy().T)
    assert b.grad is None


class Square(BackwardFunction):
    rule = "dX = 2·X·dY"

    def forward(self, ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(self, grad_output):
        (x,) = self.ctx.saved_tensors
        return [grad_output * x * 2.0]


class DiffSquare(Square):
    differentiable = True


def test_backward_function_call_with_forward_ctx() -> None:
    x = var([1.5, -2.0, 0.25])
    y = Square()(x)
    assert y.tolist() == [2.25, 4.0, 0.0625]
    assert y.grad_fn.name == "Square" and y.grad_fn.rule == "dX = 2·X·dY"
    (y * Tensor(np.array([1.0, 2.0, 3.0]))).sum().backward()
    assert x.grad.tolist() == [3.0, -8.0, 1.5]


def test_non_differentiable_backward_function_under_create_graph_raises() -> None:
    # create_graph=True itself is fine (first-order uses); differentiating through Square's backward raises.
    x = var([1.5, -2.0])
    y = Square()(x).sum()
    (g1,) = rtxviz.grad(y, x, create_graph=True)
    assert g1.tolist() == [3.0, -4.0]
    with pytest.raises(GraphError, match="Square's backward is not differentiable.*differentiable = True"):
        rtxviz.grad(g1.sum(), x)
    assert is_grad_enabled()
    # first order still works on a fresh graph
    (g,) = rtxviz.grad(Square()(x).sum(), x)
    assert g.tolist() == [3.0, -4.0]


class SavedVariableSquare(BackwardFunction):
    """The spec's style (inputs held on the instance), differentiable: backward uses the input Variable."""

    differentiable = True

    def __init__(self, x: Variable) -> None:
        super().__init__()
        self.x = x

    def backward(self, grad_output):
        return [grad_output * self.x * 2.0]


def test_differentiable_backward_function_holding_variables_gives_second_derivative() -> None:
    x = var([1.5, -2.0])
    y = record_operation([x], x.tensor * x.tensor, SavedVariableSquare(x))
    (g,) = rtxviz.grad((y * y).sum(), x, create_graph=True)  # d/dx x⁴ = 4x³
    np.testing.assert_allclose(g.numpy(), 4 * np.array([1.5, -2.0]) ** 3)
    (h,) = rtxviz.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 12 * np.array([1.5, -2.0]) ** 2)


def test_differentiable_backward_function_gives_second_derivative() -> None:
    """ctx.save_for_backward inside forward(ctx, x) must keep the link to the input Variable when the
    function is differentiable, or the second derivative through the saved input is lost."""
    x = var([1.5, -2.0])
    (g,) = rtxviz.grad(DiffSquare()(x).sum(), x, create_graph=True)
    assert g.tolist() == [3.0, -4.0]
    (h,) = rtxviz.grad(g.sum(), x)
    assert h.tolist() == [2.0, 2.0]


def test_saved_tensors_freed_after_backward() -> None:
    x = var([1.0, 2.0])
    fn = Square()
    y = fn(x).sum()
    y.backward()
    with pytest.raises(GraphError):
        fn.ctx.saved_tensors  # noqa: B018
    with pytest.raises(GraphError, match="second time"):
        y.backward()


# -- deep graphs and memory ------------------------------------------------------------------------------------------
def test_100k_op_chain_backward_without_recursion() -> None:
    n = 100_000
    x = var([0.5, -1.0])
    y = x
    for _ in range(n):
        y = y.mul_scalar(1.00001)
    y.sum().backward()
    expected = 1.00001**n
    np.testing.assert_allclose(x.grad.numpy(), [expected, expected], rtol=1e-9)
    assert math.isclose(expected, math.e, rel_tol=1e-4)
    del y
    gc.collect()  # tearing the chain down must not recurse either


def test_100k_op_chain_grad_of_intermediate_and_create_graph() -> None:
    x = var([2.0])
    y = x
    for _ in range(50_000):
        y = y + 0.0
    z = y * y  # z = x², dz/dx = 2x, d²z/dx² = 2, through the whole chain
    for _ in range(50_000):
        z = z + 0.0
    (g,) = rtxviz.grad(z.sum(), x, create_graph=True)
    assert g.tolist() == [4.0]
    (h,) = rtxviz.grad(g.sum(), x)
    assert h.tolist() == [2.0]


def _live_nodes() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is TapeNode)


def test_training_loop_keeps_memory_flat() -> None:
    """10,000 steps of a tiny regression: live TapeNodes must not grow with the number of steps."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((16, 3))
    ys = xs @ np.array([1.0, -2.0, 0.5]) + 0.3
    x, y = Tensor(xs), Tensor(ys)
    w, b = var(np.zeros(3)), var(np.zeros(()))
    baseline = _live_nodes()
    counts = []
    for step in range(10_000):
        pred = x.matmul(w) + b
        loss = ((pred - y) * (pred - y)).mean()
        if step == 5:
            assert _live_nodes() >= baseline + 5  # the graph of this step is alive: the count can see it
        loss.backward()
        with no_grad():
            w.data -= 0.05 * w.grad.data
            b.data -= 0.05 * b.grad.data
        w.zero_grad()
        b.zero_grad()
        if step in (100, 9_999):
            del pred, loss
            counts.append(_live_nodes())
    assert counts[1] <= counts[0], f"live TapeNodes grew from {counts[0]} to {counts[1]}"
    assert counts[1] <= baseline + 2
    np.testing.assert_allclose(w.numpy(), [1.0, -2.0, 0.5], atol=1e-6)  # it did train
    assert b.item() == pytest.approx(0.3, abs=1e-6)


def test_nodes_drop_saved_arrays_after_backward() -> None:
    x = var(RNG.standard_normal((50, 50)))
    h = x.matmul(x).tanh()
    node = h.grad_fn
    assert node.saved_nbytes() > 0
    h.sum().backward()
    assert node.saved_nbytes() == 0


# -- grad modes -------------------------------------------------------------------------------------------------------
def test_no_grad_context_manager() -> None:
    x = var([1.0])
    with no_grad():
        assert not is_grad_enabled()
        y = x * 2.0
    assert is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


def test_no_grad_as_decorator() -> None:
    x = var([1.0])

    @no_grad
    def infer(v: Variable) -> Variable:
        assert not is_grad_enabled()
        return v * 2.0

    y = infer(x)
    assert infer.__name__ == "infer"
    assert not y.requires_grad and is_grad_enabled()

    @no_grad()
    def infer2(v: Variable) -> Variable:
        return v * 3.0

    assert not infer2(x).requires_grad and is_grad_enabled()


def test_no_grad_with_a_closure_runs_it() -> None:
    x = var([1.0, 2.0])
    y = no_grad(lambda: x * 2.0)
    assert y.tolist() == [2.0, 4.0] and not y.requires_grad
    assert is_grad_enabled()
    assert enable_grad(lambda: is_grad_enabled()) is True


def test_nested_no_grad_enable_grad() -> None:
    x = var([1.0])
    with no_grad():
        with enable_grad():
            assert is_grad_enabled()
            tracked = x * 2.0
        assert not is_grad_enabled()
        untracked = x * 2.0
        with no_grad():
            assert not is_grad_enabled()
        assert not is_grad_enabled()
    assert is_grad_enabled()
    assert tracked.requires_grad and not untracked.requires_grad
    # the spec's closure form, nested
    inner = no_grad(lambda: enable_grad(lambda: x * 3.0))
    assert inner.requires_grad
    tracked.sum().backward()
    assert x.grad.tolist() == [2.0]


def test_grad_mode_is_per_thread() -> None:
    inside = threading.Event()
    checked = threading.Event()
    seen: dict[str, object] = {}

    def worker() -> None:
        with no_grad():
            seen["worker"] = is_grad_enabled()
            inside.set()
            checked.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(5)
    try:
        seen["main"] = is_grad_enabled()
        x = var([3.0])
        y = (x * x).sum()
        y.backward()
        seen["grad"] = x.grad.tolist()
    finally:
        checked.set()
        t.join(5)
    assert seen == {"worker": False, "main": True, "grad": [6.0]}

    result: dict[str, object] = {}

    def fresh_thread() -> None:
        result["enabled"] = is_grad_enabled()

    with no_grad():  # a new thread starts with grad mode on, whatever this thread has
        t2 = threading.Thread(target=fresh_thread)
        t2.start()
        t2.join(5)
    assert result == {"enabled": True}


def test_grad_mode_restored_after_exception() -> None:
    with pytest.raises(ValueError, match="inside"):
        with no_grad():
            raise ValueError("inside")
    assert is_grad_enabled()

    @no_grad
    def failing() -> None:
        raise KeyError("decorated")

    with pytest.raises(KeyError):
        failing()
    assert is_grad_enabled()

    def boom() -> None:
        raise RuntimeError("closure")

    with pytest.raises(RuntimeError):
        no_grad(lambda: boom())
    assert is_grad_enabled()

    with no_grad():
        with pytest.raises(ZeroDivisionError):
            with enable_grad():
                1 / 0  # noqa: B018
        assert not is_grad_enabled()
    assert is_grad_enabled()


# -- detach, retain_graph, gradients of intermediates --------------------------------------------------------------
def test_detach_stops_the_gradient() -> None:
    x = var([1.0, 2.0])
    w = var([3.0, -1.0])
    h = x * x
    d = h.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert d.tolist() == h.tolist()
    assert np.shares_memory(d.numpy(), h.numpy())
    (d * w + h).sum().backward()
    assert w.grad.tolist() == [1.0, 4.0]  # d's value
    assert x.grad.tolist() == [2.0, 4.0]  # only through h, not through d


def test_retain_graph_and_accumulation() -> None:
    x = var([1.0, -3.0])
    y = (x * x * x).sum()
    y.backward(retain_graph=True)
    assert x.grad.tolist() == [3.0, 27.0]
    y.backward(retain_graph=True)
    assert x.grad.tolist() == [6.0, 54.0]
    x.zero_grad()
    y.backward()
    assert x.grad.tolist() == [3.0, 27.0]
    with pytest.raises(GraphError, match="retain_graph"):
        y.backward()


def test_grad_of_intermediate_values() -> None:
    x = var([1.0, 2.0])
    h = x * x
    out = (h.sin() * 3.0).sum()
    gh, gx = rtxviz.grad(out, [h, x], retain_graph=True)
    np.testing.assert_allclose(gh.numpy(), 3 * np.cos([1.0, 4.0]), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), 3 * np.cos([1.0, 4.0]) * 2 * np.array([1.0, 2.0]), rtol=1e-12)
    assert x.grad is None and h.grad is None  # rtxviz.grad touches no .grad
    (gh_only,) = rtxviz.grad(out, h)
    np.testing.assert_allclose(gh_only.numpy(), gh.numpy())


def test_grad_allow_unused_and_grad_outputs() -> None:
    x, unused = var([1.0, 2.0]), var([5.0])
    y = x * x
    with pytest.raises(GraphError, match="not used"):
        rtxviz.grad(y.sum(), [x, unused], retain_graph=True)
    gx, gu = rtxviz.grad(y, [x, unused], grad_outputs=Tensor(np.array([10.0, 1.0])), allow_unused=True)
    assert gx.tolist() == [20.0, 4.0] and gu is None


def test_retain_grad_on_intermediate() -> None:
    x = var([1.0, 2.0])
    h = x * 2.0
    h.retain_grad()
    (h * h).sum().backward()
    assert h.grad.tolist() == [4.0, 8.0]
    assert x.grad.tolist() == [8.0, 16.0]
