"""The LSTM layer's compiled step kernels (rtxviz/_native.c `lstm_forward_step` / `lstm_backward_step`, float32
on numpy): their exp, tanh and sigmoid against numpy's float64 functions; whole layers against PyTorch's float64
numbers (tests/nn/data/rnn_reference.json, run here in float32) and against the ufunc path (float64 on the same
inputs: test_rnn.py checks that path against PyTorch to 1e-10); sizes that are wrong are refused, not written
past."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rtxviz import Tensor, Variable, accel, nn
from rtxviz.engine import grad
from rtxviz.engine.ops import nn_recurrent
from rtxviz.engine.ops.nn_recurrent import lstm_layer

needs_native = pytest.mark.skipif(
    accel.lstm_forward_step is None and os.environ.get("RTXVIZ_REQUIRE_NATIVE") != "1",
    reason="rtxviz._native is not built (python setup.py build_ext --inplace)",
)
pytestmark = needs_native

F32_EPS = float(np.finfo(np.float32).eps)


def _native_module() -> Any:
    from rtxviz import _native
    return _native


@pytest.mark.parametrize("which, reference", [
    (0, np.exp),
    (1, np.tanh),
    (2, lambda x: 1.0 / (1.0 + np.exp(-x))),
], ids=["exp", "tanh", "sigmoid"])
def test_kernel_math_is_within_a_few_ulp_of_float64(which: int, reference: Any) -> None:
    # a dense grid over the gates' whole range, the polynomial's switch points (|x| = 0.625 for tanh) and the
    # vector loop's tail (an odd count)
    x = np.concatenate([np.linspace(-90, 88, 400_001), np.linspace(-1, 1, 100_003)]).astype(np.float32)
    out = np.empty_like(x)
    _native_module().lstm_math(which, x, out)
    with np.errstate(over="ignore"):
        expected = reference(x.astype(np.float64))
    normal = (np.abs(expected) > np.finfo(np.float32).tiny) & (np.abs(expected) < 1e38)
    rel = np.abs(out[normal] - expected[normal]) / np.abs(expected[normal])
    assert rel.max() < 4 * F32_EPS, f"max relative error {rel.max():.3g} at x = {x[normal][rel.argmax()]}"


def test_kernel_math_keeps_nan_and_saturates_at_infinity() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0], dtype=np.float32)
    out = np.empty_like(x)
    native = _native_module()
    native.lstm_math(1, x, out)
    assert np.isnan(out[0]) and out[1:].tolist() == [1.0, -1.0, 0.0]
    native.lstm_math(2, x, out)
    assert np.isnan(out[0]) and out[1] == 1.0 and 0.0 <= out[2] < 1e-37 and out[3] == 0.5


def test_a_nan_in_the_input_reaches_the_output() -> None:
    xw = np.zeros((3, 2, 8), dtype=np.float32)
    xw[1, 0, 5] = np.nan  # the forget gate of hidden unit 1, step 1, batch row 0
    y = lstm_layer(Tensor(xw), Tensor.zeros([2, 2]), Tensor.ones([2, 2]), Tensor.ones([8, 2])).numpy()
    assert np.isnan(y[1, 0]).any() and not np.isnan(y[0]).any() and not np.isnan(y[:, 1]).any()


def _reference_cases() -> list[dict]:
    data = json.loads((Path(__file__).parent / "data" / "rnn_reference.json").read_text())
    return [c for c in data["recurrent"] if c["module"] == "LSTM"]


@pytest.mark.parametrize("case", _reference_cases(), ids=lambda c: c["name"])
def test_float32_layer_matches_pytorch(case: dict) -> None:
    """PyTorch's float64 outputs and gradients, reached in float32 through the kernels (float32 rounding)."""
    module = nn.LSTM(**case["kwargs"]).float()
    module.load_state_dict({k: np.asarray(v, dtype=np.float32) for k, v in case["state"].items()})
    tensors = {k: Variable(np.asarray(s["data"], dtype=np.float32), requires_grad=True)
               for k, s in case["inputs"].items()}
    args = [tensors["x"]] + ([(tensors["h0"], tensors["c0"])] if "h0" in tensors else [])
    out, (h, c) = module(*args)
    loss = None
    for ours, theirs, w in zip([out, h, c], case["outputs"], case["weights"], strict=True):
        np.testing.assert_allclose(ours.numpy(), np.asarray(theirs), atol=2e-6, rtol=1e-5)
        term = (ours * Tensor(np.asarray(w, dtype=np.float32))).sum()
        loss = term if loss is None else loss + term
    wrt = {**tensors, **{"param:" + k: p for k, p in module.named_parameters()}}
    for key, g in zip(wrt, grad(loss, list(wrt.values())), strict=True):
        np.testing.assert_allclose(g.numpy(), np.asarray(case["grads"][key]), atol=1e-5, rtol=1e-4,
                                   err_msg=f"{case['name']}: gradient of {key}")


def _layer_inputs(seed: int, steps: int, n: int, hidden: int, proj: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    p = proj or hidden
    shapes = [(steps, n, 4 * hidden), (n, p), (n, hidden), (4 * hidden, p)] + ([(p, hidden)] if proj else [])
    scale = [1.5, 0.5, 0.5, 0.4, 0.4]
    return [(rng.standard_normal(s) * k) for s, k in zip(shapes, scale, strict=False)]


def _run(arrays: list[np.ndarray], dtype: Any, dy: np.ndarray) -> list[np.ndarray]:
    """The layer's output and the gradients of Σ y·dy in every input."""
    inputs = [Variable(a.astype(dtype), requires_grad=True) for a in arrays]
    y = lstm_layer(*inputs)
    grads = grad((y * Tensor(dy.astype(dtype))).sum(), inputs)
    return [y.numpy()] + [g.numpy() for g in grads]


@pytest.mark.parametrize("steps, n, hidden, proj", [(7, 3, 37, 0), (5, 2, 20, 11), (1, 1, 1, 0), (4, 5, 16, 0)])
def test_kernels_agree_with_the_ufunc_path(steps: int, n: int, hidden: int, proj: int) -> None:
    """Hidden sizes that exercise the vector loops and their tails; against float64 (the ufunc path, PyTorch's
    numbers in test_rnn.py) and against the float32 ufunc path (the same formulas, numpy's functions)."""
    arrays = _layer_inputs(0, steps, n, hidden, proj)
    p = proj or hidden
    dy = np.random.default_rng(1).standard_normal((steps, n, p + hidden))
    native = _run(arrays, np.float32, dy)
    exact = _run(arrays, np.float64, dy)
    saved = accel.lstm_forward_step
    accel.lstm_forward_step = None  # the switch `_native_lstm` reads: the float32 ufunc path
    try:
        ufuncs = _run(arrays, np.float32, dy)
    finally:
        accel.lstm_forward_step = saved
    names = ["y", "dxw", "dh0", "dc0", "dw_hh", "dw_hr"]
    for name, a, b, c in zip(names, native, exact, ufuncs, strict=False):
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, atol=2e-5 * scale, rtol=1e-4, err_msg=f"{name}: native vs float64")
        np.testing.assert_allclose(a, c, atol=2e-5 * scale, rtol=1e-4, err_msg=f"{name}: native vs ufuncs")


def test_the_native_path_is_taken_only_for_numpy_float32() -> None:
    f32 = np.zeros((2, 2), dtype=np.float32)
    assert nn_recurrent._native_lstm(f32, None, f32)
    assert not nn_recurrent._native_lstm(f32, f32.astype(np.float64))
    assert not nn_recurrent._native_lstm(f32, np.zeros((0, 2), dtype=np.float32))


def test_an_empty_batch_runs_forward_and_backward_in_float32() -> None:
    lstm = nn.LSTM(3, 4).float()
    x = Variable(np.zeros((5, 0, 3), dtype=np.float32), requires_grad=True)
    out, (h, c) = lstm(x)
    assert out.shape == (5, 0, 4) and h.shape == (1, 0, 4) and c.shape == (1, 0, 4)
    (out.sum() + c.sum()).backward()
    assert x.grad.shape == (5, 0, 3) and not np.any(lstm.weight_hh_l0.grad.numpy())


def test_second_order_through_the_float32_layer_matches_float64() -> None:
    """create_graph rebuilds the layer from ops (the kernels only run the first-order walk): the Hessian-vector
    product of the native float32 layer equals the float64 one."""
    arrays = _layer_inputs(2, 4, 2, 5, 0)

    def hvp(dtype: Any) -> np.ndarray:
        xw, h0, c0, w = (Variable(a.astype(dtype), requires_grad=True) for a in arrays)
        y = lstm_layer(xw, h0, c0, w)
        (gw,) = grad((y * y).sum(), [w], create_graph=True)
        (hv,) = grad((gw * Tensor(np.ones_like(arrays[3], dtype=dtype))).sum(), [xw])
        return hv.numpy()

    np.testing.assert_allclose(hvp(np.float32), hvp(np.float64), atol=1e-4, rtol=1e-3)


def test_wrong_sizes_are_refused_with_the_argument_named() -> None:
    native = _native_module()
    steps, n, hidden = 3, 2, 4
    gates = np.zeros((steps, n, 4 * hidden), dtype=np.float32)
    out = np.zeros((steps, n, 2 * hidden), dtype=np.float32)
    c0 = np.zeros((n, hidden), dtype=np.float32)
    hr = np.zeros((n, hidden), dtype=np.float32)
    short = np.zeros((steps, n, 4 * hidden - 1), dtype=np.float32)
    with pytest.raises(ValueError, match="xw has 90 elements, expected 96"):
        native.lstm_forward_step(gates, short, out, c0, hr, True, 0, steps, n, hidden, hidden)
    with pytest.raises(ValueError, match=r"bad step or sizes \(t=3, steps=3"):
        native.lstm_forward_step(gates, gates, out, c0, hr, True, 3, steps, n, hidden, hidden)
    with pytest.raises(TypeError, match="float32"):
        native.lstm_forward_step(gates, gates.astype(np.float64), out, c0, hr, True, 0, steps, n, hidden, hidden)
    with pytest.raises(ValueError, match="dz has 95 elements"):
        native.lstm_backward_step(gates, out, c0, out, c0, True, c0, gates.ravel()[1:], 0, steps, n, hidden,
                                  hidden)
    assert not out.any() and not gates.any()  # nothing was written
