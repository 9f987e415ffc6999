"""Defects a try-as-a-PyTorch-user review found (eighteenth session), each reproduced here before its fix.

Expected numbers are closed forms (what PyTorch 2.13 gives for the same calls, checked by hand in float64).
"""

from __future__ import annotations

import numpy as np
import pytest

import rtxviz
from rtxviz import BackwardFunction, ShapeError, Tensor, Variable, nn, optim
from rtxviz.data import TensorDataset


def _leaf(values: list[float]) -> Variable:
    return Variable(np.asarray(values, dtype=np.float64), requires_grad=True)


# -- casts to an integer or bool dtype end the graph ---------------------------------------------------------------
@pytest.mark.parametrize(("cast", "constant"), [(lambda v: v.long(), [1.0, 2.0]),
                                                (lambda v: v.to(dtype="int64"), [1.0, 2.0]),
                                                (lambda v: v.to(dtype="bool"), [1.0, 1.0])],
                         ids=["long()", "to(int64)", "to(bool)"])
def test_a_cast_to_a_non_float_dtype_carries_no_gradient(cast: object, constant: list[float]) -> None:
    x = _leaf([1.5, 2.5])
    i = cast(x)  # type: ignore[operator]
    assert not i.requires_grad and getattr(i, "grad_fn", None) is None
    (i.to(dtype="float64") * x).sum().backward()
    # d/dx of (c(x) * x) is c(x): the cast value is a constant (PyTorch: [1, 2] for long, [1, 1] for bool)
    assert x.grad.tolist() == constant


def test_a_cast_between_float_dtypes_still_carries_the_gradient() -> None:
    x = _leaf([1.5, 2.5])
    y = x.to(dtype="float32")
    assert y.requires_grad
    (y * 2).sum().backward()
    assert x.grad.dtype == np.float64 and x.grad.tolist() == [2.0, 2.0]


def test_to_takes_a_dtype_as_its_first_argument() -> None:
    x = _leaf([1.5, 2.5])
    assert x.to(rtxviz.float32).dtype == np.float32
    assert Tensor.from_slice([1.0], [1]).to(rtxviz.float64).dtype == np.float64
    assert nn.Linear(2, 2).to(rtxviz.float64).weight.dtype == np.float64
    with pytest.raises(Exception, match="cpu"):
        x.to("nowhere")


# -- clamp with tensor bounds ---------------------------------------------------------------------------------------
def test_clamp_takes_tensor_bounds_and_sends_the_gradient_to_the_chosen_side() -> None:
    x = _leaf([-2.0, 0.5, 3.0, 1.0])
    lo = _leaf([-1.0, 0.0, 0.0, 1.0])  # the last: x == min, where the gradient goes to x (as PyTorch's)
    hi = _leaf([2.0, 2.0, 2.0, 2.0])
    y = x.clamp(min=lo, max=hi)
    assert y.tolist() == [-1.0, 0.5, 2.0, 1.0]
    (y * Tensor(np.array([1.0, 2.0, 3.0, 4.0]))).sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0, 4.0]
    assert lo.grad.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert hi.grad.tolist() == [0.0, 0.0, 3.0, 0.0]


def test_clamp_with_one_tensor_bound_and_clip_alike() -> None:
    x = _leaf([-2.0, 0.5])
    y = x.clip(Tensor(np.zeros(2)), None)
    assert y.tolist() == [0.0, 0.5]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0]
    assert rtxviz.tensor([5.0, -5.0]).clamp(max=rtxviz.tensor([1.0, 1.0])).tolist() == [1.0, -5.0]


def test_clamp_with_tensor_bounds_replays_from_the_graph_cache() -> None:
    """Its masks come from the compare op, so a replay recomputes them from the new input (a mask made with raw
    numpy made the capture refuse the function)."""
    from rtxviz.engine.cache.api import graph_cache_stats, init_graph_cache, run_cached

    init_graph_cache()
    lo, hi = Tensor(np.zeros(3)), Tensor(np.ones(3))

    def clamped(x: Tensor) -> Tensor:
        return x.clamp(min=lo, max=hi) * 1.0

    assert run_cached(clamped, Tensor(np.array([-1.0, 0.5, 2.0]))).tolist() == [0.0, 0.5, 1.0]
    assert run_cached(clamped, Tensor(np.array([0.25, -3.0, 0.75]))).tolist() == [0.25, 0.0, 0.75]
    assert graph_cache_stats()["hits"] == 1


# -- a BackwardFunction instance called twice ---------------------------------------------------------------------
class _Square(BackwardFunction):
    def forward(self, ctx, x):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x)
        return x * x

    def backward(self, g):  # type: ignore[no-untyped-def]
        (x,) = self.ctx.saved_tensors
        return [g * x * 2.0]


def test_one_backward_function_instance_called_twice_keeps_each_calls_saved_tensors() -> None:
    square = _Square()
    x, w = _leaf([1.0, 2.0]), _leaf([5.0, 7.0])
    a = square(x)
    b = square(w)
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]  # was [10, 14]: w's saved values
    b.sum().backward()
    assert w.grad.tolist() == [10.0, 14.0]


def test_one_backward_function_instance_twice_in_one_graph() -> None:
    square = _Square()
    x = _leaf([1.0, 2.0])
    (square(x) + square(x * 2.0)).sum().backward()  # was a GraphError: "saved tensors were freed"
    assert x.grad.tolist() == [2.0 + 8.0, 4.0 + 16.0]


# -- assigning .grad ----------------------------------------------------------------------------------------------
def test_assigning_a_grad_of_another_shape_is_refused_and_leaves_grad_as_it_was() -> None:
    p = nn.Parameter(rtxviz.randn(3))
    with pytest.raises(ShapeError, match=r"grad.*\(4,\).*\(3,\)"):
        p.grad = rtxviz.randn(4)
    assert p.grad is None
    with pytest.raises(TypeError, match="Tensor or None"):
        p.grad = np.ones(3)  # type: ignore[assignment]
    assert p.grad is None
    p.grad = rtxviz.ones(3)
    assert p.grad.tolist() == [1.0, 1.0, 1.0]


def test_adam_counts_only_the_steps_it_took() -> None:
    p = nn.Parameter(rtxviz.tensor([1.0, 2.0, 3.0]))
    opt = optim.Adam([p], lr=0.1)
    with pytest.raises(ShapeError):
        p.grad = rtxviz.randn(4)
    p.grad = rtxviz.ones(3)
    before = np.asarray(p.tolist())
    opt.step()
    # Adam's first step moves every coordinate by lr (bias-corrected m / sqrt(v) is 1): PyTorch's 0.1
    np.testing.assert_allclose(before - np.asarray(p.tolist()), [0.1, 0.1, 0.1], rtol=1e-5)
    assert opt.state[p]["step"] == 1  # PyTorch's habit: the state is looked up by the parameter
    assert p in opt.state and rtxviz.randn(1) not in opt.state


# -- TensorDataset items ------------------------------------------------------------------------------------------
def test_a_tensor_dataset_item_of_a_1d_tensor_is_a_working_0d_tensor() -> None:
    ds = TensorDataset(Tensor(np.arange(12.0).reshape(6, 2)), Tensor(np.arange(6)))
    x, y = ds[2]
    assert x.tolist() == [4.0, 5.0]
    assert y.shape == () and y.item() == 2 and (y + 1).item() == 3 and y.tolist() == 2
    assert repr(ds[-1][1]).startswith("Tensor(5, dtype=int64")  # (the device pass adds its device)


# -- Python's operators and protocols ------------------------------------------------------------------------------
def test_bool_masks_combine_with_and_or_xor_not_as_numpy_does() -> None:
    a = np.array([-1.0, 2.0, 3.0, 0.5])
    x = rtxviz.tensor(a, requires_grad=True)
    m, n = x > 0, x < 2.5
    assert (m & n).tolist() == ((a > 0) & (a < 2.5)).tolist()
    assert (m | n).tolist() == ((a > 0) | (a < 2.5)).tolist()
    assert (m ^ n).tolist() == ((a > 0) ^ (a < 2.5)).tolist()
    assert (~m).tolist() == (~(a > 0)).tolist() and (True & m).tolist() == (a > 0).tolist()
    assert (True ^ m).tolist() == (True ^ (a > 0)).tolist() and (False | m).tolist() == (a > 0).tolist()
    i = rtxviz.tensor([6, 3, 0])
    assert (i & 3).tolist() == [2, 3, 0] and (~i).tolist() == [-7, -4, -1]
    assert i.logical_not().tolist() == [False, False, True]
    with pytest.raises(rtxviz.DTypeError, match="&: defined for bool and int64 tensors, got float"):
        x & m


def test_abs_format_and_backward_gradient_keyword() -> None:
    x = _leaf([-1.5, 2.0])
    y = abs(x)
    y.backward(gradient=Tensor(np.array([1.0, 3.0])))
    assert y.tolist() == [1.5, 2.0] and x.grad.tolist() == [-1.0, 3.0]
    loss = (x * x).sum()
    assert f"{loss:.3f}" == "6.250" and f"{loss}" == str(loss)
    with pytest.raises(TypeError, match="one-element tensor, got shape"):
        f"{x:.2f}"


# -- in-place writes that reach another Variable through a shared buffer --------------------------------------------
_ALIASED = {
    "h[:1].zero_(), then h": lambda h: (h[:1].zero_(), h)[1],
    "h.narrow(1, 0, 2).mul_(3), then h": lambda h: (h.narrow(1, 0, 2).mul_(3), h)[1],
    "h.view(-1).mul_(2), then h": lambda h: (h.view(-1).mul_(2), h)[1],
    "v = h.T, h.mul_(2), then v": lambda h: (lambda v: (h.mul_(2), v)[1])(h.T),
    "v = h[0], h.add_(h), then v": lambda h: (lambda v: (h.add_(h), v)[1])(h[0]),
}


@pytest.mark.parametrize("write", list(_ALIASED.values()), ids=list(_ALIASED))
def test_a_variable_outdated_by_an_in_place_write_through_an_alias_is_refused(write: object) -> None:
    """These gave silently wrong gradients (the values held the write, the graph did not; PyTorch's gradient
    includes it). Each now raises, naming the op, the input and where the write was."""
    x = Variable(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    h = x * 1.0
    used = write(h)  # type: ignore[operator]
    with pytest.raises(rtxviz.engine.versions.InplaceError, match=r"input 0 .* written in place .*test_user_review"):
        (used * 1.0).sum()


def test_in_place_writes_that_keep_the_graph_whole_still_work() -> None:
    """The written Variable itself, h[i] = v and h[i] += v (setitem on h), a view made after the write, and
    writes outside the graph (no_grad, an optimizer) are not refused, and their gradients are PyTorch's."""
    x = Variable(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    h = x * 1.0
    h.mul_(2)
    h[0] += 1.0
    v = h.T  # after the writes
    (v * v).sum().backward()
    expected = 2 * (2 * np.asarray(x.tolist()) + np.array([[1.0], [0.0]])) * 2
    np.testing.assert_allclose(x.grad.numpy(), expected)
    w = nn.Parameter(rtxviz.tensor([1.0, 2.0]))
    opt = optim.SGD([w], lr=0.5)
    wt = w * 1.0
    (w * w).sum().backward()
    opt.step()  # writes w's buffer, outside any graph
    (wt * 2.0).sum().backward()
    assert w.grad.tolist() == [2.0 + 2.0, 4.0 + 2.0]


# -- PyTorch keyword arguments -----------------------------------------------------------------------------------
def test_add_and_sub_take_alpha() -> None:
    a, b = _leaf([1.0, 2.0]), _leaf([10.0, 20.0])
    y = a.add(b, alpha=2).sub(b, alpha=0.5)
    y.sum().backward()
    assert y.tolist() == [1.0 + 20.0 - 5.0, 2.0 + 40.0 - 10.0]
    assert a.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [1.5, 1.5]
    assert a.add(1.0, alpha=3).tolist() == [4.0, 5.0]


def test_checkpoint_takes_use_reentrant_and_a_data_loader_takes_num_workers() -> None:
    from rtxviz.data import DataLoader

    x = _leaf([1.0, -1.0])
    rtxviz.checkpoint(lambda t: t.relu() * 3.0, x, use_reentrant=False).sum().backward()
    assert x.grad.tolist() == [3.0, 0.0]
    ds = TensorDataset(Tensor(np.arange(6.0).reshape(6, 1)))
    batches = [b[0].tolist() for b in DataLoader(ds, batch_size=4, num_workers=0, pin_memory=False)]
    assert batches == [[[0.0], [1.0], [2.0], [3.0]], [[4.0], [5.0]]]
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got None"):
        DataLoader(ds, batch_size=None)  # type: ignore[arg-type]


def test_checkpoint_sequential_takes_pytorchs_argument_order() -> None:
    """Review: (layers, 2, x) failed with "strategy must be a CheckpointStrategy, got Variable(...)"."""
    layers = [lambda t: t * 2.0] * 4
    x = _leaf([2.0])
    y = rtxviz.checkpoint_sequential(layers, 2, x, use_reentrant=False)
    y.sum().backward()
    assert y.tolist() == [32.0] and x.grad.tolist() == [16.0]
    with pytest.raises(TypeError, match=r"\(layers, segments, input\)"):
        rtxviz.checkpoint_sequential(layers, x, "sqrt")
