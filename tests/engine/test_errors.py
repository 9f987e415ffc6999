"""Misuse raises a clear rtxviz error that names the op and the offending values, and leaves the engine
working: grad mode on, later graphs and backward passes correct."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from rtxviz import (
    DeviceError,
    DimError,
    DTypeError,
    GraphError,
    RtxvizError,
    ShapeError,
    Tensor,
    Variable,
    cuda_is_available,
    is_grad_enabled,
)


def f64(shape: tuple[int, ...], fill: float = 1.0) -> Variable:
    return Variable(np.full(shape, fill), requires_grad=True, dtype="float64")


def f32(shape: tuple[int, ...], fill: float = 1.0) -> Variable:
    return Variable(np.full(shape, fill, dtype=np.float32), requires_grad=True)


def assert_engine_still_works() -> None:
    """After an error: grad mode is on, a fresh graph records, and backward gives the hand-computed grads."""
    assert is_grad_enabled()
    x = Variable(np.array([1.0, 2.0, 3.0]), requires_grad=True, dtype="float64")
    w = Variable(np.array([0.5, -1.0, 2.0]), requires_grad=True, dtype="float64")
    loss = (x * w).sum() + (x * x).sum()
    loss.backward()
    assert loss.item() == pytest.approx(4.5 + 14.0)
    assert x.grad.tolist() == [2.5, 3.0, 8.0]
    assert w.grad.tolist() == [1.0, 2.0, 3.0]


def _softmax_bad_dim() -> object:
    return f64((2, 3)).softmax(dim=5)


CASES: dict[str, tuple[Callable[[], object], type, list[str]]] = {
    "add_shape_mismatch": (lambda: f64((2, 3)) + f64((4,)), ShapeError, ["add", "(2, 3)", "(4,)"]),
    "mul_shape_mismatch": (lambda: f64((2, 3)) * f64((3, 2)), ShapeError, ["mul", "(2, 3)", "(3, 2)"]),
    "matmul_inner_dims": (lambda: f64((2, 3)).matmul(f64((4, 5))), ShapeError, ["matmul", "(2, 3)", "(4, 5)"]),
    "matmul_batched": (lambda: f64((2, 2, 3)).matmul(f64((3, 3, 4))), ShapeError, ["matmul", "(2, 2, 3)",
                                                                                    "(3, 3, 4)"]),
    "matmul_0d": (lambda: f64(()).matmul(f64((3,))), ShapeError, ["matmul", "()", "(3,)"]),
    "reshape_numel": (lambda: f64((2, 3)).reshape((4, 2)), ShapeError, ["reshape", "(2, 3)", "(4, 2)"]),
    "expand_bad": (lambda: f64((2, 3)).expand((2, 4)), ShapeError, ["expand", "(2, 3)", "(2, 4)"]),
    "sum_bad_dim": (lambda: f64((2, 3)).sum(dim=2), DimError, ["sum", "dim 2", "2 dim"]),
    "mean_bad_neg_dim": (lambda: f64((2, 3)).mean(dim=-3), DimError, ["mean", "dim -3"]),
    "sum_repeated_dim": (lambda: f64((2, 3)).sum(dim=[1, -1]), DimError, ["sum", "repeats"]),
    "transpose_bad_dim": (lambda: f64((2, 3)).transpose(0, 3), DimError, ["transpose", "dim 3"]),
    "unsqueeze_bad_dim": (lambda: f64((2, 3)).unsqueeze(4), DimError, ["unsqueeze", "dim 4"]),
    "softmax_bad_dim": (_softmax_bad_dim, DimError, ["softmax", "dim 5"]),
    "add_dtype_mix": (lambda: f32((2,)) + f64((2,)), DTypeError, ["add", "float32", "float64"]),
    "matmul_dtype_mix": (lambda: f64((2, 2)).matmul(f32((2, 2))), DTypeError, ["matmul", "float64", "float32"]),
    "int_requires_grad": (lambda: Variable(np.array([1, 2, 3]), requires_grad=True), DTypeError,
                          ["requires_grad", "int64"]),
    "int_requires_grad_method": (lambda: Variable(Tensor.arange(3), requires_grad=False).requires_grad_(),
                                 DTypeError, ["requires_grad", "int64"]),
    "backward_non_scalar": (lambda: (f64((2, 3)) * 2.0).backward(), GraphError,
                            ["backward", "grad_output", "(2, 3)"]),
    "backward_wrong_grad_shape": (lambda: (f64((2, 3)) * 2.0).backward(Tensor.ones([3, 2], dtype="float64")),
                                  GraphError, ["backward", "grad_output", "(3, 2)", "(2, 3)"]),
    "backward_wrong_grad_dtype": (lambda: (f64((2,)) * 2.0).backward(Tensor.ones([2], dtype="float32")),
                                  GraphError, ["backward", "float32", "float64"]),
    "backward_of_constant": (lambda: Variable(np.ones(2)).sum().backward(), GraphError,
                             ["backward", "require"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_names_op_and_values(name: str) -> None:
    fn, exc_type, fragments = CASES[name]
    with pytest.raises(exc_type) as info:
        fn()
    assert isinstance(info.value, RtxvizError), f"{type(info.value).__name__} is not an RtxvizError"
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from {message!r}"
    assert_engine_still_works()


def test_error_mid_graph_keeps_earlier_graph_usable() -> None:
    """A failing op in the middle of a forward pass does not break the part of the graph already built."""
    x = f64((2, 3), 2.0)
    h = (x * x).sum(dim=1)
    with pytest.raises(ShapeError):
        h + f64((3,))
    h.sum().backward()
    assert x.grad.tolist() == [[4.0] * 3] * 2
    assert_engine_still_works()


def test_error_inside_backward_restores_grad_mode() -> None:
    from rtxviz import BackwardFunction, record_operation

    class Broken(BackwardFunction):
        def backward(self, grad_output):
            raise RuntimeError("boom in backward")

    x = f64((2,))
    y = record_operation([x], Tensor.ones([2], dtype="float64"), Broken())
    with pytest.raises(RuntimeError, match="boom in backward"):
        (y * 3.0).sum().backward()
    assert_engine_still_works()


def test_wrong_gradient_count_from_backward_function() -> None:
    from rtxviz import BackwardFunction, record_operation

    class TooMany(BackwardFunction):
        def backward(self, grad_output):
            return [grad_output, grad_output]

    y = record_operation([f64((2,))], Tensor.ones([2], dtype="float64"), TooMany())
    with pytest.raises(GraphError, match=re.escape("TooMany.backward returned 2 gradient(s) for 1 input(s)")):
        y.sum().backward()
    assert_engine_still_works()


@pytest.mark.skipif(not cuda_is_available(), reason="needs cupy and a CUDA GPU")
def test_device_mix() -> None:
    cpu = f32((2, 3))
    gpu = Variable(Tensor.ones([2, 3]).cuda(), requires_grad=True)
    with pytest.raises(DeviceError) as info:
        cpu + gpu
    message = str(info.value)
    assert "add" in message and "cpu" in message and "cuda" in message
    with pytest.raises(DeviceError) as info:
        cpu.matmul(gpu.transpose(0, 1))
    assert "matmul" in str(info.value)
    y = (gpu * gpu).sum()
    y.backward()
    assert gpu.grad.device.kind == "cuda" and gpu.grad.tolist() == [[2.0] * 3] * 2
    assert_engine_still_works()


def test_device_error_without_gpu_says_why() -> None:
    if cuda_is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(DeviceError, match="cupy|CUDA"):
        Tensor.ones([2]).cuda()
    assert_engine_still_works()
