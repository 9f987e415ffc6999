"""Property tests: gradients of random programs (random shapes, broadcasting, 0-d) against central finite
differences in float64. Expected numbers come from finite differences only, never from the engine's backward.

Each family of ops has its own test so a missing or broken family names itself.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import rtxviz
from rtxviz import Tensor, Variable
from tests.finite_differences import numeric_grad

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Program = Callable[[dict], object]


# -- the checker -----------------------------------------------------------------------------------------------
def _value(t: object) -> np.ndarray:
    return np.asarray(t.numpy(), dtype=np.float64)


def check_gradients(program: Program, arrays: dict[str, np.ndarray], seed: int, eps: float = 1e-6,
                    rtol: float = 1e-5, atol: float = 1e-7) -> None:
    """d sum(program(x) * w)/dx by the engine vs central differences, for every input and element."""
    leaves = {k: Variable(a.copy(), requires_grad=True, dtype="float64") for k, a in arrays.items()}
    out = program(leaves)
    out_np = _value(out)
    assume(np.all(np.isfinite(out_np)) and np.max(np.abs(out_np), initial=0.0) < 1e6)
    w = np.random.default_rng(seed).standard_normal(out_np.shape)
    out.backward(Tensor(w, dtype="float64"))

    def scalar(env: dict[str, np.ndarray]) -> float:
        consts = {k: Tensor(a, dtype="float64") for k, a in env.items()}
        return float(np.sum(_value(program(consts)) * w))

    for name, a in arrays.items():
        leaf = leaves[name]
        got = np.zeros_like(a) if leaf.grad is None else leaf.grad.numpy()
        assert got.shape == a.shape, f"grad of {name}: shape {got.shape} != input shape {a.shape}"
        want = numeric_grad(lambda v, name=name: scalar({**arrays, name: v}), a, eps)
        scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale * 100,
                                   err_msg=f"gradient of input {name!r}")


# -- strategies ------------------------------------------------------------------------------------------------
shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@st.composite
def broadcast_partner(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape`: trailing dims kept or set to 1, maybe fewer or more dims."""
    keep = draw(st.integers(0, len(shape)))
    tail = [d if draw(st.booleans()) else 1 for d in shape[len(shape) - keep:]]
    # leading dims beyond `shape` only when every dim of `shape` is matched, or they would misalign
    extra = draw(st.lists(st.integers(1, 2), max_size=1 if keep == len(shape) < 3 else 0))
    return tuple(extra + tail)


def _arr(seed: int, shape: tuple[int, ...], low: float | None = None, high: float | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if low is not None:
        return rng.uniform(low, high, size=shape)
    return rng.standard_normal(shape)


UNARY: dict[str, Callable] = {
    "tanh": lambda h: h.tanh(), "sigmoid": lambda h: h.sigmoid(), "sin": lambda h: h.sin(),
    "cos": lambda h: h.cos(), "silu": lambda h: h.silu(), "softplus": lambda h: h.softplus(),
    "neg": lambda h: h.neg(), "square": lambda h: h.square(), "exp_tanh": lambda h: h.tanh().exp(),
    "mul_scalar": lambda h: h.mul_scalar(-0.75), "add_scalar": lambda h: h.add_scalar(0.5),
    "pow_scalar3": lambda h: h.pow_scalar(3.0), "self_mul": lambda h: h * h, "self_add": lambda h: h + h,
    "log_softplus": lambda h: h.softplus().add_scalar(0.1).log(),
    "sqrt_softplus": lambda h: h.softplus().add_scalar(0.1).sqrt(),
    "reciprocal": lambda h: h.square().add_scalar(0.5).reciprocal(),
    "gelu": lambda h: h.gelu(), "gelu_tanh": lambda h: h.gelu(approximate="tanh"),
}

BINARY: dict[str, Callable] = {
    "add": lambda h, y: h + y, "sub": lambda h, y: h - y, "mul": lambda h, y: h * y,
    "div": lambda h, y: h / y.square().add_scalar(0.5),
    "pow": lambda h, y: h.sigmoid().add_scalar(0.5).pow(y.tanh()),
    "rsub": lambda h, y: y - h, "rdiv": lambda h, y: y / h.square().add_scalar(1.0),
}


@given(data=st.data())
@settings(SETTINGS, max_examples=60)
def test_random_elementwise_compositions(data: st.DataObject) -> None:
    """A chain of unary and broadcasting binary ops, each binary op bringing a new leaf of a partner shape."""
    base = data.draw(shapes, label="shape")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    steps = data.draw(st.lists(st.one_of(st.sampled_from(sorted(UNARY)).map(lambda n: ("u", n)),
                                         st.sampled_from(sorted(BINARY)).map(lambda n: ("b", n))),
                               min_size=1, max_size=4), label="steps")
    arrays = {"x": _arr(seed, base)}
    plan = []
    for i, (kind, name) in enumerate(steps):
        if kind == "b":
            other = data.draw(broadcast_partner(base), label=f"partner{i}")
            arrays[f"y{i}"] = _arr(seed + i + 1, other)
            plan.append((name, f"y{i}"))
        else:
            plan.append((name, None))

    def program(env: dict) -> object:
        h = env["x"]
        for name, other in plan:
            h = UNARY[name](h) if other is None else BINARY[name](h, env[other])
        return h

    check_gradients(program, arrays, seed)


REDUCTIONS: dict[str, Callable] = {
    "sum": lambda h, dims, keep: h.sum(dim=dims, keepdim=keep),
    "mean": lambda h, dims, keep: h.mean(dim=dims, keepdim=keep),
    "logsumexp": lambda h, dims, keep: h.logsumexp(dim=dims, keepdim=keep),
    "var": lambda h, dims, keep: h.var(dim=dims, keepdim=keep, correction=0),
}


@st.composite
def dims_for(draw: st.DrawFn, ndim: int) -> list[int] | None:
    if ndim == 0 or draw(st.booleans()):
        return None
    chosen = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return [d - ndim if draw(st.booleans()) else d for d in chosen]


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@given(data=st.data())
@SETTINGS
def test_random_reductions(reduction: str, data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(2, 3), min_size=1, max_size=3).map(tuple), label="shape")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    dims = data.draw(dims_for(len(shape)), label="dims")
    keep = data.draw(st.booleans(), label="keepdim")
    arrays = {"x": _arr(seed, shape)}
    check_gradients(lambda env: REDUCTIONS[reduction](env["x"].tanh() * 2.0, dims, keep), arrays, seed)


@given(data=st.data())
@SETTINGS
def test_random_matmul_with_broadcast_batches(data: st.DataObject) -> None:
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    n, k, m = (data.draw(st.integers(1, 3), label=c) for c in "nkm")
    batch = data.draw(st.lists(st.integers(1, 2), max_size=2).map(tuple), label="batch")
    a_shape = data.draw(st.sampled_from([(k,), (n, k), (*batch, n, k)]), label="a")
    b_batch = data.draw(broadcast_partner(batch), label="b_batch") if batch else ()
    b_shape = data.draw(st.sampled_from([(k,), (k, m), (*b_batch, k, m)]), label="b")
    arrays = {"a": _arr(seed, a_shape), "b": _arr(seed + 1, b_shape)}
    check_gradients(lambda env: env["a"].matmul(env["b"]).tanh(), arrays, seed)


SHAPE_OPS = ("reshape", "transpose", "expand", "unsqueeze", "permute", "narrow", "squeeze", "cat", "stack")


@pytest.mark.parametrize("op", SHAPE_OPS)
@given(data=st.data())
@SETTINGS
def test_random_shape_ops(op: str, data: st.DataObject) -> None:
    """Each shape op with random arguments, sandwiched between smooth ops so gradients are not trivial."""
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), label="shape")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1), label="dim")
    arrays = {"x": _arr(seed, shape)}
    if op == "reshape":
        def f(h):
            return h.reshape((int(np.prod(shape)),))
    elif op == "transpose":
        d1 = data.draw(st.integers(-nd, nd - 1), label="dim1")

        def f(h):
            return h.transpose(dim, d1)
    elif op == "expand":
        target = (2, *[data.draw(st.sampled_from([s, 3])) if s == 1 else s for s in shape])

        def f(h):
            return h.expand(target)
    elif op == "unsqueeze":
        udim = data.draw(st.integers(-nd - 1, nd), label="udim")

        def f(h):
            return h.unsqueeze(udim)
    elif op == "permute":
        perm = data.draw(st.permutations(range(nd)), label="perm")

        def f(h):
            return h.permute(*perm)
    elif op == "narrow":
        size = shape[dim]
        start = data.draw(st.integers(0, size - 1), label="start")
        length = data.draw(st.integers(1, size - start), label="length")

        def f(h):
            return h.narrow(dim, start, length)
    elif op == "squeeze":
        shape = (*shape[:dim % nd], 1, *shape[dim % nd:]) if nd else (1,)
        arrays = {"x": _arr(seed, shape)}

        def f(h):
            return h.squeeze(dim % nd)
    else:  # cat / stack of x and a second leaf
        join = rtxviz.cat if op == "cat" else rtxviz.stack
        other = list(shape)
        if op == "cat":
            other[dim] = data.draw(st.integers(1, 2), label="other")
        arrays["y"] = _arr(seed + 1, tuple(other))
        sdim = data.draw(st.integers(-nd - 1, nd), label="sdim") if op == "stack" else dim

        def program(env: dict) -> object:
            return join([env["x"].sin(), env["y"].tanh()], dim=sdim).square()

        check_gradients(program, arrays, seed)
        return
    check_gradients(lambda env: f(env["x"].sin()).square(), arrays, seed)


NN_OPS = ("softmax", "log_softmax", "layer_norm")


@pytest.mark.parametrize("op", NN_OPS)
@given(data=st.data())
@SETTINGS
def test_random_nn_ops(op: str, data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(2, 4), min_size=1, max_size=3).map(tuple), label="shape")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    nd = len(shape)
    arrays = {"x": _arr(seed, shape)}
    if op == "layer_norm":
        k = data.draw(st.integers(1, nd), label="normalized_dims")
        norm_shape = list(shape[nd - k:])
        arrays["w"] = _arr(seed + 1, tuple(norm_shape))
        arrays["b"] = _arr(seed + 2, tuple(norm_shape))

        def program(env: dict) -> object:
            return rtxviz.nn.functional.layer_norm(env["x"], norm_shape, weight=env["w"], bias=env["b"], eps=1e-5)
    else:
        dim = data.draw(st.integers(-nd, nd - 1), label="dim")

        def program(env: dict) -> object:
            return getattr(env["x"], op)(dim)

    check_gradients(program, arrays, seed)


# -- 0-d tensors: each rule that builds a constant mask must keep it an ndarray ------------------------------
ZERO_D = {
    "abs": lambda x: x.abs(), "relu": lambda x: x.relu(), "elu": lambda x: x.elu(alpha=1.0),
    "leaky_relu": lambda x: x.leaky_relu(negative_slope=0.1), "maximum": lambda x: x.maximum(x * 0.5),
    "minimum": lambda x: x.minimum(x * 0.5), "clamp": lambda x: x.clamp(min=-1.0, max=1.0),
    "self_mul": lambda x: x * x, "pow_self": lambda x: x.pow(x), "mul_then_square": lambda x: (x * x).tanh() * x,
}
ZERO_D_GRAD = {  # closed forms at x = 0.7
    "abs": 1.0, "relu": 1.0, "elu": 1.0, "leaky_relu": 1.0, "maximum": 1.0, "minimum": 0.5, "clamp": 1.0,
    "self_mul": 1.4, "pow_self": 0.7**0.7 * (np.log(0.7) + 1.0),
    "mul_then_square": np.tanh(0.49) + 0.7 * (1 - np.tanh(0.49) ** 2) * 1.4,
}


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_zero_d_gradients_are_arrays(name: str) -> None:
    """A 0-d input's gradient is a 0-d Tensor with the closed-form value, and usable afterwards."""
    x = Variable(np.array(0.7), requires_grad=True, dtype="float64")
    ZERO_D[name](x).backward()
    assert isinstance(x.grad.data, np.ndarray) and x.grad.shape == ()
    assert x.grad.numpy().tolist() == pytest.approx(ZERO_D_GRAD[name], rel=1e-12)
    assert (x.grad * 2.0).item() == pytest.approx(2 * ZERO_D_GRAD[name], rel=1e-12)
