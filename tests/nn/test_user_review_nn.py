"""A user review's nn gaps, beyond the PyTorch numbers of test_modules_reference.py (whose cases cover the values
and gradients of unbatched convolutions and poolings, MaxPool1d/AvgPool1d, InstanceNorm1d/2d/3d, Upsample and
F.interpolate in float64): the errors for a wrong number of dims, in PyTorch's terms and naming the op and the
shape; unbatched output shapes (PyTorch's); the same reference cases in float32; gradients of every order and a
graph-cache replay through interpolate's constants; reprs and state-dict keys as PyTorch's."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, Variable, grad, nn, no_grad
from rtxviz.engine.cache import cache_graph, graph_cache_stats, init_graph_cache
from rtxviz.engine.errors import ShapeError
from rtxviz.nn import functional as F
from tests.finite_differences import numeric_grad_of
from tests.nn.make_module_reference import FUNCTIONAL_CASES, MODULE_CASES, resolve

REFERENCE = json.loads((Path(__file__).parent / "data" / "module_reference.json").read_text())
RECORDS = {r["name"]: r for r in REFERENCE["modules"]}
FRECORDS = {r["name"]: r for r in REFERENCE["functional"]}
RNG = np.random.default_rng(19)


def ones(*shape: int) -> Tensor:
    return Tensor.ones(list(shape), dtype="float64")


def leaf(a: np.ndarray) -> Variable:
    return Variable(np.array(a), requires_grad=True)


def decode(d: dict, dtype: Any = None) -> np.ndarray:
    return np.array(d["data"], dtype=dtype or d["dtype"]).reshape(d["shape"])


# -- wrong numbers of dims: PyTorch's "3D (unbatched) or 4D (batched)", naming the op and the shape --------------
@pytest.mark.parametrize("call,match", [
    (lambda: nn.Conv2d(3, 4, 3)(ones(2, 3)),
     r"Conv2d: expected 3D or 4D input \(\[C, H, W\] unbatched or \[N, C, H, W\] batched\), got 2D input of shape "
     r"\(2, 3\)"),
    (lambda: nn.Conv2d(3, 4, 3)(ones(1, 1, 3, 5, 5)), r"Conv2d: expected 3D or 4D input .* got 5D input of shape"),
    (lambda: nn.Conv1d(3, 4, 3)(ones(3)),
     r"Conv1d: expected 2D or 3D input \(\[C, L\] unbatched or \[N, C, L\] batched\), got 1D input of shape \(3,\)"),
    (lambda: nn.ConvTranspose2d(3, 4, 3)(ones(3, 5)), r"ConvTranspose2d: expected 3D or 4D input .* got 2D input"),
    (lambda: nn.MaxPool2d(2)(ones(4, 4)), r"MaxPool2d: expected 3D or 4D input .* got 2D input of shape \(4, 4\)"),
    (lambda: nn.AvgPool2d(2)(ones(1, 1, 1, 4, 4)), r"AvgPool2d: expected 3D or 4D input .* got 5D input"),
    (lambda: nn.MaxPool1d(2)(ones(4)), r"MaxPool1d: expected 2D or 3D input \(\[C, L\] unbatched or \[N, C, L\] "
                                       r"batched\), got 1D input of shape \(4,\)"),
    (lambda: nn.AvgPool1d(2)(ones(1, 3, 4, 4)), r"AvgPool1d: expected 2D or 3D input .* got 4D input"),
    (lambda: nn.InstanceNorm1d(3)(ones(3)), r"InstanceNorm1d: expected 2D or 3D input .* got 1D input"),
    (lambda: nn.InstanceNorm1d(3)(ones(2, 3, 4, 5)), r"InstanceNorm1d: expected 2D or 3D input .* got 4D input"),
    (lambda: nn.InstanceNorm2d(3)(ones(3, 4)), r"InstanceNorm2d: expected 3D or 4D input .* got 2D input"),
    (lambda: F.conv2d(ones(2, 3), ones(4, 3, 3, 3)),
     r"conv2d: input must be 3D \(unbatched, \[C, H, W\]\) or 4D \(batched, \[N, C, H, W\]\), got 2D input of "
     r"shape \(2, 3\)"),
    (lambda: F.conv1d(ones(2), ones(4, 3, 3)),
     r"conv1d: input must be 2D \(unbatched, \[C, L\]\) or 3D \(batched, \[N, C, L\]\), got 1D input of shape"),
    (lambda: F.conv_transpose2d(ones(3, 5), ones(3, 4, 3, 3)), r"conv_transpose2d: input must be 3D \(unbatched"),
    (lambda: F.max_pool2d(ones(4, 4), 2), r"max_pool2d: input must be 3D \(unbatched, \[C, H, W\]\) or 4D"),
    (lambda: F.avg_pool2d(ones(1, 1, 1, 4, 4), 2), r"avg_pool2d: input must be 3D .* got 5D input of shape"),
    (lambda: F.max_pool1d(ones(4), 2), r"max_pool1d: input must be 2D \(unbatched, \[C, L\]\) or 3D \(batched, "
                                       r"\[N, C, L\]\), got 1D input of shape \(4,\)"),
    (lambda: F.avg_pool1d(ones(1, 3, 4, 4), 2), r"avg_pool1d: input must be 2D .* got 4D input"),
])
def test_a_wrong_number_of_dims_is_refused_naming_the_op_and_shape(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("call,match", [
    (lambda: nn.Conv2d(3, 4, 3)(ones(2, 5, 5)),
     r"Conv2d\(3, 4\): input has 2 channels \(input shape \(2, 5, 5\)\), expected 3"),
    (lambda: nn.Conv1d(3, 4, 3)(ones(4, 5)), r"Conv1d\(3, 4\): input has 4 channels \(input shape \(4, 5\)\)"),
    (lambda: nn.InstanceNorm2d(3, affine=True)(ones(2, 4, 4, 5)),
     r"InstanceNorm2d\(3\): input has 4 channels in dim 1 \(input shape \(2, 4, 4, 5\)\), expected 3"),
    (lambda: nn.InstanceNorm1d(3, affine=True)(ones(4, 5)), r"InstanceNorm1d\(3\): input has 4 channels in dim 0"),
    (lambda: F.max_pool1d(ones(2, 3), 5), r"max_pool1d: kernel 5 is larger than the padded input 3"),
    (lambda: F.max_pool1d(ones(2, 8), 2, padding=2), r"max_pool1d: padding 2 must be at most half the kernel size 2"),
])
def test_channels_and_windows_that_do_not_fit_name_the_values(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_instance_norm_without_affine_only_warns_about_num_features_as_pytorch() -> None:
    with pytest.warns(UserWarning, match=r"InstanceNorm1d\(3\): input has 4 channels .*not used when affine=False"):
        out = nn.InstanceNorm1d(3)(Tensor(RNG.standard_normal((2, 4, 5))))
    assert out.shape == (2, 4, 5)


def test_instance_norm_needs_more_than_one_position() -> None:
    with pytest.raises(ValueError, match=r"instance_norm: expected more than 1 spatial element"):
        nn.InstanceNorm1d(3)(ones(2, 3, 1))
    with pytest.raises(ValueError, match=r"instance_norm: expected more than 1 spatial element"):
        nn.InstanceNorm1d(3)(ones(3, 1))  # unbatched [C, L] with L = 1


@pytest.mark.parametrize("call,match", [
    (lambda: F.interpolate(ones(3, 4), scale_factor=2),
     r"interpolate: input must be \[N, C, \*space\] with 1 to 3 spatial dims .* got 2D input of shape \(3, 4\)"),
    (lambda: F.interpolate(ones(1, 3, 4), scale_factor=2, mode="bilinear"),
     r"interpolate: got 3D input of shape \(1, 3, 4\), but mode 'bilinear' needs 4D input"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), scale_factor=2, mode="linear"), r"mode 'linear' needs 3D input"),
    (lambda: F.interpolate(ones(1, 1, 2, 2, 2), size=3, mode="area"), r"mode 'area' needs 3D or 4D input"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), size=3, scale_factor=2), r"only one of size or scale_factor"),
    (lambda: F.interpolate(ones(1, 3, 4, 4)), r"either size or scale_factor should be defined"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), size=(3,)),
     r"same number of spatial dimensions, but got input with spatial dimensions of \[4, 4\] and output size \(3,\)"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), size=3, mode="bicubic"), r"mode must be one of .*got 'bicubic'"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), size=3, align_corners=True),
     r"align_corners option can only be set with the interpolating modes.*got mode 'nearest'"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), scale_factor=0.1),
     r"input and output sizes should be greater than 0, got input \(4, 4\) and output \(0, 0\)"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), size=2, recompute_scale_factor=True),
     r"recompute_scale_factor is not meaningful with an explicit size"),
    (lambda: F.interpolate(ones(1, 3, 4, 4), size=2, mode="bilinear", antialias=True),
     r"antialias=True is not supported"),
    (lambda: nn.Upsample(), r"Upsample: either size or scale_factor should be defined"),
    (lambda: nn.Upsample(size=2, mode="cubic"), r"Upsample: mode must be one of .*got 'cubic'"),
])
def test_interpolate_refuses_what_pytorch_refuses(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_interpolate_size_must_be_ints() -> None:
    with pytest.raises(TypeError, match=r"interpolate: size must be an int or a sequence of 2 ints, got \(2.5, 3\)"):
        F.interpolate(ones(1, 1, 4, 4), size=(2.5, 3))


# -- unbatched inputs: PyTorch's shapes, a batch of one underneath ----------------------------------------------
@pytest.mark.parametrize("module,shape,expected", [
    (nn.Conv1d(3, 4, 3), (3, 5), (4, 3)),
    (nn.Conv1d(3, 4, 3, padding=1, padding_mode="reflect"), (3, 5), (4, 5)),
    (nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), (3, 5, 5), (4, 5, 5)),
    (nn.Conv2d(3, 4, 3, padding="same"), (3, 6, 5), (4, 6, 5)),
    (nn.ConvTranspose2d(3, 4, 3), (3, 5, 5), (4, 7, 7)),
    (nn.MaxPool2d(2), (3, 4, 4), (3, 2, 2)),
    (nn.AvgPool2d(3, stride=2, padding=1), (3, 5, 5), (3, 3, 3)),
    (nn.MaxPool1d(2), (3, 4), (3, 2)),
    (nn.AvgPool1d(2, ceil_mode=True), (3, 5), (3, 3)),
    (nn.AdaptiveAvgPool2d(2), (3, 5, 4), (3, 2, 2)),
    (nn.InstanceNorm1d(3), (3, 4), (3, 4)),
    (nn.InstanceNorm2d(3, affine=True), (3, 4, 5), (3, 4, 5)),
    (nn.InstanceNorm3d(2), (2, 3, 2, 2), (2, 3, 2, 2)),
    (nn.Linear(3, 2), (3,), (2,)),
])
def test_unbatched_input_gives_the_batch_of_one_without_its_batch_dim(module: nn.Module, shape: tuple,
                                                                      expected: tuple) -> None:
    module = module.double()
    x0 = RNG.standard_normal(shape)
    x, xb = leaf(x0), leaf(x0[None])
    out, outb = module(x), module(xb)
    assert out.shape == expected and outb.shape == (1, *expected)
    np.testing.assert_array_equal(out.numpy(), outb.numpy()[0])
    w = RNG.standard_normal(expected)
    (out * Tensor(w)).sum().backward()
    (outb * Tensor(w[None])).sum().backward()
    assert x.grad.shape == shape
    np.testing.assert_array_equal(x.grad.numpy(), xb.grad.numpy()[0])


def test_conv_transpose2d_output_size_takes_an_unbatched_input() -> None:
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1).double()
    assert m(ones(2, 4, 4), output_size=[8, 8]).shape == (3, 8, 8)
    assert m(ones(2, 4, 4), output_size=[3, 8, 8]).shape == (3, 8, 8)  # (C, H, W) given: the last 2 count


def test_batch_norm_has_no_unbatched_form_as_pytorch() -> None:
    # PyTorch's BatchNorm1d reads [N, C] (a 2-D input is a batch) and BatchNorm2d needs 4 dims
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected 2D or 3D input .* got 1D input of shape \(3,\)"):
        nn.BatchNorm1d(3)(ones(3))
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input .* got 3D input of shape \(3, 4, 4\)"):
        nn.BatchNorm2d(3)(ones(3, 4, 4))


# -- the reference cases again, in float32 ---------------------------------------------------------------------
FLOAT32_CASES = [c for c in MODULE_CASES if c["name"].startswith(("upsample", "instancenorm"))
                 or "unbatched" in c["name"] or c["module"] in ("MaxPool1d", "AvgPool1d")]


@pytest.mark.parametrize("c", FLOAT32_CASES, ids=lambda c: c["name"])
def test_module_cases_in_float32_match_pytorchs_float64_numbers(c: dict) -> None:
    rec = RECORDS[c["name"]]
    m = getattr(nn, c["module"])(*c["args"], **c["kwargs"])  # float32, the default dtype
    state = {k: decode(v, np.int64 if v["dtype"] == "int64" else np.float32) for k, v in rec["state"].items()}
    m.load_state_dict(state)
    steps = [[decode(a, np.float32) for a in s] for s in rec["steps"]]
    for arrays in steps[:-1]:
        m(*[leaf(a) for a in arrays])
    xs = [leaf(a) for a in steps[-1]]
    out = m(*xs)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), decode(rec["out"]), rtol=1e-4, atol=1e-4)
    (out * Tensor(decode(rec["out_weight"], np.float32))).sum().backward()
    assert xs[0].grad.dtype == np.float32
    np.testing.assert_allclose(xs[0].grad.numpy(), rec["grads"]["input0"], rtol=1e-4, atol=1e-4)
    for name, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), rec["grads"][name], rtol=1e-4, atol=1e-4)
    for key, value in rec["state_after"].items():
        np.testing.assert_allclose(m.state_dict()[key].numpy(), decode(value), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("c", [c for c in FUNCTIONAL_CASES if c["fn"] == "interpolate"], ids=lambda c: c["name"])
def test_interpolate_cases_in_float32(c: dict) -> None:
    rec = FRECORDS[c["name"]]
    xs = [leaf(decode(a, np.float32)) for a in rec["inputs"]]
    out = F.interpolate(*[resolve(a, xs) for a in c["args"]], **c["kwargs"])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), decode(rec["out"]), rtol=1e-5, atol=1e-5)
    (out * Tensor(decode(rec["out_weight"], np.float32))).sum().backward()
    np.testing.assert_allclose(xs[0].grad.numpy(), rec["grads"]["input0"], rtol=1e-5, atol=1e-5)


# -- interpolate: closed forms, every order of gradient --------------------------------------------------------
def test_bilinear_matches_the_half_pixel_formula() -> None:
    # align_corners=False: output j of 2 -> 4 reads source max((j + 0.5)/2 - 0.5, 0) = 0, 0.25, 0.75, 1 (clamped)
    x = np.array([[1.0, 3.0], [5.0, 11.0]])
    got = F.interpolate(Tensor(x.reshape(1, 1, 2, 2)), scale_factor=2, mode="bilinear").numpy()[0, 0]
    a = np.array([[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]])  # rows: the weights of the two sources
    np.testing.assert_allclose(got, a @ x @ a.T, rtol=0, atol=1e-15)
    # align_corners=True: 2 -> 3 reads 0, 0.5, 1
    got = F.interpolate(Tensor(x.reshape(1, 1, 2, 2)), size=3, mode="bilinear", align_corners=True).numpy()[0, 0]
    b = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    np.testing.assert_allclose(got, b @ x @ b.T, rtol=0, atol=1e-15)


def test_nearest_reads_floor_of_dst_times_in_over_out() -> None:
    x = np.arange(7.0)
    got = F.interpolate(Tensor(x.reshape(1, 1, 7)), size=3).numpy().ravel()
    np.testing.assert_array_equal(got, x[[0, 2, 4]])  # floor(j·7/3)
    got = F.interpolate(Tensor(x.reshape(1, 1, 7)), size=3, mode="nearest-exact").numpy().ravel()
    np.testing.assert_array_equal(got, x[[1, 3, 5]])  # floor((j + 0.5)·7/3)


def test_nearest_1d_at_the_input_size_copies_as_the_2d_rule() -> None:
    # PyTorch's 1-D nearest forward reads floor(dst / scale_factor) here ([x0, x0]) while its backward (and its
    # 2-D forward) copies: we copy, so that the gradient is this output's
    x = leaf(np.array([[[2.0, 5.0]]]))
    y = F.interpolate(x, scale_factor=1.2)
    assert y.tolist() == [[[2.0, 5.0]]]
    assert F.interpolate(Tensor(x.numpy().reshape(1, 1, 1, 2)), scale_factor=(1.0, 1.2)).tolist() == [[[[2.0, 5.0]]]]
    (y * Tensor(np.array([[[1.0, 2.0]]]))).sum().backward()
    assert x.grad.tolist() == [[[1.0, 2.0]]]


@pytest.mark.parametrize("kwargs", [{"size": (5, 3), "mode": "bilinear"},
                                    {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True},
                                    {"size": (4, 7)}, {"scale_factor": (0.7, 1.6), "mode": "nearest-exact"}])
def test_interpolate_gradients_of_first_and_second_order_match_finite_differences(kwargs: dict) -> None:
    x0 = RNG.standard_normal((1, 2, 3, 4))
    probe = F.interpolate(Tensor(x0), **kwargs)
    r = RNG.standard_normal(probe.shape)

    def loss(x: Any) -> Any:
        y = F.interpolate(x, **kwargs)
        return (y * y * y * Tensor(r)).sum()

    x = leaf(x0)
    (g,) = grad([loss(x)], [x], create_graph=True)
    np.testing.assert_allclose(g.numpy(), numeric_grad_of(lambda a: loss(Tensor(a)).item(), [x0], 0), atol=1e-6)
    u = RNG.standard_normal(x0.shape)
    (hvp,) = grad([(g * Tensor(u)).sum()], [x])

    def first(a: np.ndarray) -> float:
        xa = leaf(a)
        (ga,) = grad([loss(xa)], [xa])
        return float((ga.numpy() * u).sum())

    np.testing.assert_allclose(hvp.numpy(), numeric_grad_of(first, [x0], 0), atol=1e-5)


def test_a_size_kept_still_gives_a_new_tensor() -> None:
    x = leaf(RNG.standard_normal((1, 1, 3, 3)))
    y = F.interpolate(x, size=3, mode="bilinear")
    assert y is not x
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    y.sum().backward()
    assert x.grad.tolist() == np.ones((1, 1, 3, 3)).tolist()


# -- graph cache: interpolate's indices and weights are constants of the shapes --------------------------------
@pytest.mark.parametrize("make,shape", [
    (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), (2, 2, 4, 3)),
    (lambda: nn.Upsample(size=(5, 3)), (2, 2, 4, 3)),
    (lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.Upsample(scale_factor=1.5, mode="nearest-exact"),
                           nn.InstanceNorm2d(3, affine=True, track_running_stats=True)), (2, 2, 4, 3)),
    (lambda: nn.Sequential(nn.Conv1d(2, 3, 3), nn.MaxPool1d(2), nn.Upsample(size=5, mode="linear",
                                                                              align_corners=True)), (1, 2, 7)),
], ids=["bilinear", "nearest", "conv_nearest_exact_instancenorm", "conv1d_maxpool1d_linear"])
def test_a_graph_cache_replay_equals_eager(make: Any, shape: tuple) -> None:
    init_graph_cache()
    model = make().double()
    twin = copy.deepcopy(model)

    def step_of(m: nn.Module) -> Any:
        def step(x: Any) -> Any:
            loss = (m(x) ** 2).sum()
            loss.backward()
            return loss
        return step

    x0 = leaf(RNG.standard_normal(shape))
    graph = cache_graph(step_of(model), x0)
    step_of(twin)(leaf(x0.numpy()))
    for _ in range(3):
        for m in (model, twin):
            m.zero_grad()
        xa = RNG.standard_normal(shape)
        x, xt = leaf(xa), leaf(xa)
        got, want = graph.execute(x), step_of(twin)(xt)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
        for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy(), err_msg=name)
        for (key, a), b in zip(model.state_dict().items(), twin.state_dict().values(), strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=key)
    assert graph_cache_stats()["refusals"] == 0


# -- PyTorch's reprs, state-dict keys and defaults -------------------------------------------------------------
def test_reprs_and_state_keys_are_pytorchs() -> None:
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.Upsample(size=3, mode="bilinear", align_corners=True)) == "Upsample(size=3, mode='bilinear')"
    assert repr(nn.InstanceNorm2d(3)) == ("InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, "
                                          "track_running_stats=False)")
    assert repr(nn.InstanceNorm1d(4, affine=True, track_running_stats=True)) == (
        "InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)")
    assert list(nn.InstanceNorm2d(3).state_dict()) == []
    assert list(nn.InstanceNorm2d(3, affine=True, bias=False).state_dict()) == ["weight"]
    assert list(nn.Upsample(scale_factor=2).state_dict()) == []
    up = nn.UpsamplingBilinear2d(scale_factor=2)
    assert (up.mode, up.align_corners, up.scale_factor) == ("bilinear", True, 2.0)
    assert nn.UpsamplingNearest2d(size=(2, 3)).size == (2, 3)


def test_instance_norm_eval_uses_running_statistics_only_when_tracked() -> None:
    x = Tensor(RNG.standard_normal((2, 3, 5)) * 3.0 + 1.0)
    tracked, untracked = nn.InstanceNorm1d(3, track_running_stats=True).double(), nn.InstanceNorm1d(3).double()
    tracked.eval()
    untracked.eval()
    with no_grad():
        # fresh running statistics (mean 0, var 1): eval is (x - 0) / sqrt(1 + eps)
        np.testing.assert_allclose(tracked(x).numpy(), x.numpy() / np.sqrt(1.0 + 1e-5), rtol=1e-12)
        xs = x.numpy()
        want = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(untracked(x).numpy(), want, rtol=1e-12, atol=1e-12)
    assert int(tracked.num_batches_tracked.item()) == 0


# -- an unbatched sample for the class-index losses (found by the nn review: PyTorch takes [C] with a 0-d target) --
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_takes_one_unbatched_sample_as_pytorch(reduction: str) -> None:
    z = [1.0, 2.0, 0.5]
    x = Variable.from_tensor(Tensor.from_slice(z, [3]).to(rtxviz.float64), name="x")
    loss = F.cross_entropy(x, Tensor(np.array(1)), reduction=reduction)
    # closed form: logsumexp(z) - z[1]; its gradient softmax(z) - onehot(1)
    lse = math.log(sum(math.exp(v) for v in z))
    assert loss.shape == ()
    assert loss.item() == pytest.approx(lse - 2.0, rel=1e-12)
    loss.backward()
    soft = [math.exp(v - lse) for v in z]
    assert x.grad.tolist() == pytest.approx([soft[0], soft[1] - 1.0, soft[2]], rel=1e-12)


def test_nll_loss_takes_one_unbatched_sample_and_a_wrong_target_is_named() -> None:
    logp = Tensor.from_slice([-1.0, -2.0, -4.0], [3])
    assert F.nll_loss(logp, Tensor(np.array(2))).item() == 4.0
    assert nn.NLLLoss(reduction="none")(logp, Tensor(np.array(0))).shape == ()
    with pytest.raises(ShapeError, match=r"nll_loss: input must have shape \[C\] \(with a 0-d target\).*target of "
                                         r"shape \(3,\)"):
        F.nll_loss(logp, Tensor(np.array([0, 1, 2])))
