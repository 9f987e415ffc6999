"""PyTorch training scripts ported with ``import rtxviz as torch``: each spelling below failed in such a port
(AttributeError, TypeError or a wrong value) before it was added. Expected values are closed forms, PyTorch's
documented results, or the inputs themselves (a save/load round trip)."""

from __future__ import annotations

import io
import math
import os

import numpy as np
import pytest

import rtxviz as torch
from rtxviz import nn, optim
from rtxviz.engine.errors import DTypeError, GraphError, ShapeError

# -- names a script reaches for on its first lines -------------------------------------------------------------


def test_device_and_cuda_namespace() -> None:
    """``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` opens most scripts."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert dev == torch.device(dev.kind)
    assert torch.zeros(2).to(torch.device("cpu")).device == torch.device("cpu")
    assert torch.cuda.is_available() is torch.cuda_is_available()
    assert torch.cuda.device_count() >= 0
    torch.cuda.manual_seed(3)
    torch.cuda.manual_seed_all(3)


def test_dtype_aliases() -> None:
    """torch.long / float / double / bool are the int64, float32, float64 and bool dtypes."""
    assert torch.tensor([1, 2], dtype=torch.long).dtype == np.dtype("int64")
    assert torch.tensor([1, 2], dtype=torch.float).dtype == np.dtype("float32")
    assert torch.tensor([1, 2], dtype=torch.double).dtype == np.dtype("float64")
    assert torch.tensor([1, 0], dtype=torch.bool).tolist() == [True, False]
    assert torch.zeros(2).to(torch.double).dtype == torch.float64


def test_small_top_level_names() -> None:
    """is_tensor, numel, as_tensor, inference_mode as torch spells them."""
    x = torch.ones(2, 3)
    assert torch.is_tensor(x) and not torch.is_tensor(np.ones(2))
    assert torch.numel(x) == 6
    a = np.arange(3.0)
    assert torch.as_tensor(a).tolist() == [0.0, 1.0, 2.0]
    assert torch.as_tensor([1, 2], dtype=torch.float32).dtype == torch.float32
    w = torch.ones(2, requires_grad=True)
    with torch.inference_mode():
        y = w * 2
    assert not y.requires_grad


# -- 0-d integer tensors as Python indices --------------------------------------------------------------------


def test_int_tensor_index() -> None:
    """``for i in torch.randint(...)``: each i is a 0-d int tensor used as a slice bound or a list index."""
    data = torch.arange(10)
    ix = torch.tensor([2, 5])
    rows = [data[i:i + 3].tolist() for i in ix]
    assert rows == [[2, 3, 4], [5, 6, 7]]
    assert ["a", "b", "c"][torch.tensor(1)] == "b"
    assert list(range(torch.tensor(3))) == [0, 1, 2]
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        ["a"][torch.tensor(0.0)]
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        ["a"][torch.tensor([0, 1])]


# -- comparisons and checks as methods and functions ----------------------------------------------------------


def test_comparison_methods() -> None:
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 2.0, 1.0])
    assert a.eq(b).tolist() == [False, True, False]
    assert a.ne(b).tolist() == [True, False, True]
    assert a.lt(b).tolist() == [True, False, False]
    assert a.le(2.0).tolist() == [True, True, False]
    assert a.gt(b).tolist() == [False, False, True]
    assert a.ge(b).tolist() == [False, True, True]
    assert torch.eq(a, b).tolist() == [False, True, False]


def test_all_any_and_nan_checks() -> None:
    x = torch.tensor([[1.0, float("nan")], [float("inf"), 0.0]])
    assert torch.isnan(x).tolist() == [[False, True], [False, False]]
    assert x.isinf().tolist() == [[False, False], [True, False]]
    assert torch.isfinite(x).tolist() == [[True, False], [False, True]]
    assert torch.isnan(x).any().item() is True
    assert torch.isnan(x).all().item() is False
    assert x.isfinite().any(dim=1).tolist() == [True, True]
    assert x.isfinite().all(dim=0).tolist() == [False, False]
    assert torch.all(torch.tensor([1, 2])).item() is True  # nonzero ints count as true, as in torch
    assert torch.any(torch.tensor([0.0, 0.0])).item() is False


def test_allclose_isclose_equal() -> None:
    """torch's rule: |a - b| <= atol + rtol·|b| (rtol=1e-5, atol=1e-8), NaN unequal unless equal_nan."""
    a = torch.tensor([1.0, 1e-9, float("nan")])
    b = torch.tensor([1.0 + 5e-6, 0.0, float("nan")])
    assert torch.isclose(a, b).tolist() == [True, True, False]
    assert torch.isclose(a, b, equal_nan=True).tolist() == [True, True, True]
    assert not torch.allclose(a, b)
    assert a.allclose(b, equal_nan=True)
    assert not torch.allclose(torch.tensor([1.0]), torch.tensor([1.0 + 2e-5]))
    assert torch.allclose(torch.tensor([1.0]), torch.tensor([1.0 + 2e-5]), rtol=1e-4)
    assert torch.equal(torch.tensor([1, 2]), torch.tensor([1, 2]))
    assert not torch.equal(torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert not torch.equal(torch.tensor([1, 2]), torch.tensor([[1, 2]]))  # shapes differ: False, as torch
    with pytest.raises(ShapeError, match="allclose"):
        torch.allclose(torch.ones(2), torch.ones(3))


# -- shape helpers a script uses without thinking -------------------------------------------------------------


def test_shape_helpers() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    assert x.t().tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert x.contiguous().tolist() == x.tolist()
    assert x.view_as(torch.zeros(3, 2)).shape == (3, 2)
    assert x.reshape_as(torch.zeros(6)).shape == (6,)
    assert torch.ones(1, 3).expand_as(x).shape == (2, 3)
    assert torch.tensor([1, 2]).type_as(x).dtype == torch.float32
    assert x.unbind(0)[1].tolist() == [3.0, 4.0, 5.0]
    assert [t.tolist() for t in torch.unbind(x, dim=1)] == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert x.is_contiguous() and not x.cpu().is_cuda
    with pytest.raises(ShapeError, match="t\\(\\)"):
        torch.zeros(2, 3, 4).t()


def test_new_constructors() -> None:
    """``x.new_zeros(shape)`` and friends take x's dtype and device."""
    x = torch.zeros(2, dtype=torch.float64)
    assert x.new_zeros(3).tolist() == [0.0, 0.0, 0.0] and x.new_zeros((2, 2)).dtype == torch.float64
    assert x.new_ones(2, 1).shape == (2, 1)
    assert x.new_full((2,), 7.0).tolist() == [7.0, 7.0]
    assert x.new_tensor([1, 2]).dtype == torch.float64
    assert x.new_empty(4).shape == (4,)


def test_shape_helpers_keep_the_graph() -> None:
    w = torch.ones(2, 3, requires_grad=True)
    (w.t() * torch.tensor([[1.0, 2.0]] * 3)).sum().backward()
    assert w.grad.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    v = torch.ones(3, requires_grad=True)
    a, b, c = v.unbind(0)
    (a + 2 * b + 3 * c).backward()
    assert v.grad.tolist() == [1.0, 2.0, 3.0]


# -- torch.multinomial (sampling a next token) -----------------------------------------------------------------


def test_multinomial() -> None:
    torch.manual_seed(0)
    probs = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 5.0]])  # unnormalised weights, as torch takes
    assert torch.multinomial(probs, 1).tolist() == [[1], [2]]
    assert probs.multinomial(num_samples=1).dtype == torch.int64
    draw = torch.multinomial(torch.tensor([1.0, 1.0, 1.0, 1.0]), 4)
    assert sorted(draw.tolist()) == [0, 1, 2, 3]  # without replacement: each index once
    many = torch.multinomial(torch.tensor([0.25, 0.75]), 4000, replacement=True)
    assert abs(many.float().mean().item() - 0.75) < 0.05
    with pytest.raises(ValueError, match="multinomial"):
        torch.multinomial(torch.tensor([1.0, 0.0]), 2)
    with pytest.raises(ValueError, match="multinomial"):
        torch.multinomial(torch.tensor([1.0, -1.0]), 1)
    torch.manual_seed(5)
    first = torch.multinomial(torch.ones(10), 3).tolist()
    torch.manual_seed(5)
    assert torch.multinomial(torch.ones(10), 3).tolist() == first


# -- torch.save / torch.load ----------------------------------------------------------------------------------


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def test_save_load_state_dict_to_the_path_given(tmp_path: object) -> None:
    """``torch.save(model.state_dict(), "model.pt")`` writes model.pt itself, and torch.load reads it back."""
    torch.manual_seed(0)
    a, b = _model(), _model()
    path = os.path.join(str(tmp_path), "model.pt")
    torch.save(a.state_dict(), path)
    assert os.path.exists(path) and not os.path.exists(path + ".npz")
    state = torch.load(path)
    assert list(state) == list(a.state_dict())
    b.load_state_dict(state)
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert v.dtype == w.dtype and v.tolist() == w.tolist(), k


def test_save_load_a_training_checkpoint() -> None:
    """The tutorial checkpoint: a dict of epoch, model and optimizer state dicts and the loss, to a file object."""
    torch.manual_seed(0)
    model = _model()
    opt = optim.Adam(model.parameters(), lr=1e-2)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(5, 3)).pow(2).mean().backward()
        opt.step()
        sched.step()
    buf = io.BytesIO()
    torch.save({"epoch": 2, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "loss": 0.25, "note": None, "pair": (1, [2.5, "x"])}, buf)
    buf.seek(0)
    ck = torch.load(buf, map_location="cpu", weights_only=True)
    assert ck["epoch"] == 2 and ck["loss"] == 0.25 and ck["note"] is None and ck["pair"] == (1, [2.5, "x"])
    saved = opt.state_dict()
    assert ck["optimizer"]["param_groups"] == saved["param_groups"]
    assert set(ck["optimizer"]["state"]) == set(saved["state"]) == {0, 1, 2, 3, 4, 5}  # int keys stay ints
    assert np.array_equal(np.asarray(ck["optimizer"]["state"][0]["exp_avg"]), np.asarray(saved["state"][0]["exp_avg"]))
    opt2 = optim.Adam(_model().parameters(), lr=1e-2)
    opt2.load_state_dict(ck["optimizer"])
    assert opt2.state_dict()["state"][0]["step"] == saved["state"][0]["step"]
    assert ck["scheduler"] == sched.state_dict()


def test_save_refuses_what_it_cannot_store() -> None:
    with pytest.raises(TypeError, match="save: .*Sequential.*state_dict"):
        torch.save(_model(), io.BytesIO())
    with pytest.raises(TypeError, match=r"save: the object\['f'\] is a function"):
        torch.save({"f": lambda: 1}, io.BytesIO())


def test_load_reads_nn_save_files_and_refuses_others(tmp_path: object) -> None:
    """A file of rtxviz.nn.save (one array per key) loads as its state dict; a file that is no archive is refused."""
    model = _model()
    written = nn.save(model, os.path.join(str(tmp_path), "m"))
    state = torch.load(written)
    assert list(state) == list(model.state_dict())
    assert state["0.weight"].tolist() == model[0].weight.tolist()
    path = os.path.join(str(tmp_path), "x.pt")
    with open(path, "w") as fh:
        fh.write("not an archive")
    with pytest.raises(ValueError, match="load: .*not written by rtxviz.save"):
        torch.load(path)


# -- torch.autograd ---------------------------------------------------------------------------------------------


class _ClampedReLU(torch.autograd.Function):
    """min(max(x, 0), cap), with its backward written by hand, torch's way (static methods, apply)."""

    @staticmethod
    def forward(ctx, x, cap):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x)
        ctx.cap = cap
        return x.clamp(min=0, max=cap)

    @staticmethod
    def backward(ctx, grad_output):  # type: ignore[no-untyped-def]
        (x,) = ctx.saved_tensors
        inside = (x > 0) & (x < ctx.cap)
        return grad_output * inside.float(), None


def test_autograd_function_apply() -> None:
    x = torch.tensor([-1.0, 0.5, 2.0, 7.0], requires_grad=True)
    y = _ClampedReLU.apply(x, 6.0)
    assert y.tolist() == [0.0, 0.5, 2.0, 6.0]
    assert y.requires_grad and not y.is_leaf
    (y * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 3.0, 0.0]


def test_autograd_function_second_derivative() -> None:
    """A backward written in differentiable ops differentiates again, as torch's (no once_differentiable)."""

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    x = torch.tensor([2.0], requires_grad=True)
    (gx,) = torch.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert gx.tolist() == [12.0]  # 3x²
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    assert ggx.tolist() == [12.0]  # 6x


def test_autograd_function_wrong_gradients() -> None:
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):  # type: ignore[no-untyped-def]
            return x * k

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            return g

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(GraphError, match="Bad.backward returned 1 gradient.*2 argument"):
        Bad.apply(x, 2.0).sum().backward()

    class NotNone(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):  # type: ignore[no-untyped-def]
            return x * k

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            return g, g

    with pytest.raises(GraphError, match="NotNone.backward.*argument 1.*not a Tensor"):
        NotNone.apply(x, 2.0).sum().backward()
    with pytest.raises(TypeError, match="Function.*apply"):
        _ClampedReLU()(x, 1.0)


def test_autograd_namespace() -> None:
    """torch.autograd.grad with a gradient penalty, torch.autograd.backward, torch.autograd.functional."""
    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    w = torch.tensor([[0.3], [0.4]], requires_grad=True)
    out = (x @ w).tanh()
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    penalty = (gx.norm(2, dim=1) - 1).pow(2).sum()
    penalty.backward()
    # closed form: gx = (1 - t²)·wᵀ with t = tanh(1.1); the penalty (0.5·(1 - t²) - 1)² reaches w
    t = math.tanh(1.1)
    assert gx.tolist()[0] == pytest.approx([(1 - t * t) * 0.3, (1 - t * t) * 0.4], rel=1e-5)
    assert w.grad is not None
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    torch.autograd.backward((a * a).sum())
    assert a.grad.tolist() == [2.0, 4.0]
    jac = torch.autograd.functional.jacobian(lambda v: v * v, torch.tensor([1.0, 3.0]))
    assert jac.tolist() == [[2.0, 0.0], [0.0, 6.0]]
    from rtxviz.autograd import Function, grad  # noqa: F401 - the import spelling works too


def test_errors_name_the_function() -> None:
    with pytest.raises(DTypeError, match="as_tensor"):
        torch.as_tensor([1.0], dtype="float16")


def test_autograd_backward_inputs_and_inference_mode_decorator() -> None:
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0], requires_grad=True)
    torch.autograd.backward((a * b).sum(), inputs=[a])
    assert a.grad.tolist() == [3.0, 3.0] and b.grad is None  # only the leaves in `inputs` get a gradient

    @torch.inference_mode()
    def f(x):  # type: ignore[no-untyped-def]
        return x * 2

    @torch.inference_mode
    def g(x):  # type: ignore[no-untyped-def]
        return x * 2

    assert not f(a).requires_grad and not g(a).requires_grad
    with torch.inference_mode(False):
        assert (a * 2).requires_grad
