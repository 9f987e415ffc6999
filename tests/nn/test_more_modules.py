"""The modules and utilities PyTorch users reach for after the basics (a porting review): initialisers checked
by their defining property (orthogonality, bounds, the truncated normal's closed-form mean, a Dirac kernel that
passes its input through), parameters_to_vector and back, get_parameter/get_buffer, half() refused,
requires_grad_'s PyTorch keyword, ParameterDict, and the errors of PReLU, Bilinear, padding and adaptive pooling.
Their values and gradients against PyTorch are in test_modules_reference.py (module_reference.json)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtxviz import Tensor, Variable, manual_seed, nn
from rtxviz.engine.errors import DTypeError, ShapeError
from rtxviz.nn import Parameter, init
from rtxviz.nn import functional as F
from rtxviz.nn.utils import clip_grad_value_, parameters_to_vector, vector_to_parameters


def _param(*shape: int) -> Parameter:
    return Parameter(Tensor.zeros(list(shape), dtype="float64"))


# -- initialisers ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 5), (4, 4), (6, 2, 2)])
def test_orthogonal_gives_orthonormal_rows_or_columns(shape: tuple[int, ...]) -> None:
    manual_seed(1)
    w = init.orthogonal_(_param(*shape), gain=2.0).numpy().reshape(shape[0], -1)
    rows, cols = w.shape
    gram = w @ w.T if rows <= cols else w.T @ w
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(rows, cols)), atol=1e-12)


def test_orthogonal_refuses_a_vector() -> None:
    with pytest.raises(ShapeError, match=r"orthogonal_.*\(3,\)"):
        init.orthogonal_(_param(3))


def test_trunc_normal_stays_within_bounds_with_the_truncated_mean() -> None:
    manual_seed(2)
    a, b, mean, std = -0.5, 1.5, 0.3, 0.8
    x = init.trunc_normal_(_param(20000), mean, std, a, b).numpy()
    assert x.min() >= a and x.max() <= b
    # the closed form: mean + std·(φ(α) - φ(β)) / (Φ(β) - Φ(α)), α, β the bounds in std units
    al, be = (a - mean) / std, (b - mean) / std
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    expected = mean + std * (phi(al) - phi(be)) / (cdf(be) - cdf(al))
    assert abs(x.mean() - expected) < 4 * std / math.sqrt(x.size)


def test_trunc_normal_far_in_the_tail() -> None:
    manual_seed(3)
    x = init.trunc_normal_(_param(2000), 0.0, 1.0, 4.0, 5.0).numpy()
    assert x.min() >= 4.0 and x.max() <= 5.0
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    expected = (phi(4.0) - phi(5.0)) / (0.5 * (math.erf(5 / math.sqrt(2)) - math.erf(4 / math.sqrt(2))))
    assert abs(x.mean() - expected) < 0.05


def test_trunc_normal_refuses_empty_bounds() -> None:
    with pytest.raises(ValueError, match=r"trunc_normal_: a \(1.0\) must be smaller than b \(1.0\)"):
        init.trunc_normal_(_param(3), a=1.0, b=1.0)


def test_eye_and_its_error() -> None:
    assert init.eye_(_param(2, 3)).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    with pytest.raises(ShapeError, match=r"eye_: only 2-dim tensors.*\(2, 2, 2\)"):
        init.eye_(_param(2, 2, 2))


def test_dirac_kernel_passes_the_input_through() -> None:
    manual_seed(4)
    w = init.dirac_(_param(3, 3, 3, 3))
    x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 5, 5)))
    np.testing.assert_allclose(F.conv2d(x, w, padding=1).numpy(), x.numpy(), atol=1e-12)


def test_dirac_groups_and_errors() -> None:
    w = init.dirac_(_param(4, 1, 3), groups=2).numpy()
    assert [int(i) for i in np.argwhere(w == 1.0)[:, 0]] == [0, 2]  # the first channel of each group
    with pytest.raises(ValueError, match=r"dirac_: dim 0 \(3\) must be divisible by groups \(2\)"):
        init.dirac_(_param(3, 2, 3), groups=2)
    with pytest.raises(ShapeError, match="dirac_: only tensors with 3, 4 or 5 dims"):
        init.dirac_(_param(2, 2))


# -- nn.utils ---------------------------------------------------------------------------------------------------
def test_parameters_to_vector_and_back() -> None:
    lin = nn.Linear(3, 2).double()
    vec = parameters_to_vector(lin.parameters())
    assert vec.shape == (8,)
    np.testing.assert_array_equal(vec.numpy(), np.concatenate([lin.weight.numpy().ravel(), lin.bias.numpy()]))
    (vec * vec).sum().backward()  # differentiable, as PyTorch's: d(Σ v²)/dp = 2p
    np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * lin.weight.numpy())
    weight = lin.weight
    vector_to_parameters(Tensor(np.arange(8.0)), lin.parameters())
    assert lin.weight is weight
    assert lin.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and lin.bias.tolist() == [6.0, 7.0]


def test_vector_to_parameters_errors() -> None:
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="vector_to_parameters: expected a Tensor, got list"):
        vector_to_parameters([1.0], lin.parameters())  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"the vector has 5 elements, the parameters have 6"):
        vector_to_parameters(Tensor.zeros([5]), lin.parameters())


def test_clip_grad_value_takes_pytorchs_foreach() -> None:
    p = _param(2)
    p.grad = Variable(np.array([3.0, -0.5]), requires_grad=False)
    clip_grad_value_([p], 1.0, foreach=None)
    assert p.grad.tolist() == [1.0, -0.5]


# -- Module methods -----------------------------------------------------------------------------------------------
def test_get_parameter_and_get_buffer() -> None:
    net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    assert net.get_parameter("0.weight") is net[0].weight
    assert net.get_buffer("1.running_mean") is net[1].running_mean
    with pytest.raises(AttributeError, match=r"Linear has no parameter 'scale' \(looking up '0.scale'"):
        net.get_parameter("0.scale")
    with pytest.raises(AttributeError, match=r"Sequential has no submodule '5'"):
        net.get_parameter("5.weight")
    with pytest.raises(AttributeError, match=r"BatchNorm1d has no buffer 'weight'"):
        net.get_buffer("1.weight")


def test_half_and_bfloat16_are_refused() -> None:
    with pytest.raises(DTypeError, match=r"Linear.half: float16 is not supported"):
        nn.Linear(2, 2).half()
    with pytest.raises(DTypeError, match=r"Linear.bfloat16: bfloat16 is not supported"):
        nn.Linear(2, 2).bfloat16()


def test_requires_grad_takes_pytorchs_keyword() -> None:
    lin = nn.Linear(2, 2).requires_grad_(requires_grad=False)
    assert [p.requires_grad for p in lin.parameters()] == [False, False]


def test_zero_grad_set_to_none_false_gives_zeros() -> None:
    lin = nn.Linear(2, 1)
    lin(Tensor.ones([1, 2])).sum().backward()
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad.tolist() == [[0.0, 0.0]]
    lin.zero_grad()
    assert lin.weight.grad is None


# -- ParameterDict ----------------------------------------------------------------------------------------------
def test_parameter_dict() -> None:
    d = nn.ParameterDict({"a": Tensor.ones([2])})
    d["b"] = Parameter(Tensor.zeros([3]))
    assert isinstance(d["a"], Parameter) and d["a"].requires_grad
    assert list(d) == ["a", "b"] and list(d.state_dict()) == ["a", "b"] and len(d) == 2
    assert d.get("c") is None and "b" in d
    b = d.pop("b")
    assert b.shape == (3,) and list(d.keys()) == ["a"]
    with pytest.raises(KeyError, match="ParameterDict has no key 'z'"):
        d["z"]
    with pytest.raises(TypeError, match=r"ParameterDict\['x'\]: values must be Parameters or Tensors, got list"):
        d["x"] = [1.0]
    with pytest.raises(KeyError, match="keys must be non-empty strings without '.'"):
        d["a.b"] = Tensor.ones([1])


# -- errors of the new layers -------------------------------------------------------------------------------------
def test_prelu_refuses_a_channel_mismatch() -> None:
    with pytest.raises(ShapeError, match=r"prelu: the weight has 3 elements .* 4 channel\(s\) \(input shape \(2, 4\)"):
        nn.PReLU(3)(Tensor.zeros([2, 4]))


def test_prelu_slope_at_zero_is_the_weight() -> None:
    # PyTorch's gradient at x = 0 takes the negative side's slope
    x = Variable(np.array([0.0, -1.0, 2.0]), requires_grad=True)
    nn.PReLU(init=0.3).double()(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.3, 0.3, 1.0])


def test_bilinear_errors() -> None:
    m = nn.Bilinear(2, 3, 4)
    with pytest.raises(ShapeError, match=r"bilinear: the inputs' leading \(batch\) dims must match, got \(5, 2\) "
                                         r"and \(4, 3\)"):
        m(Tensor.zeros([5, 2]), Tensor.zeros([4, 3]))
    with pytest.raises(ShapeError, match=r"bilinear: input1 has shape \(5, 3\), its last dim must be in1_features = 2"):
        m(Tensor.zeros([5, 3]), Tensor.zeros([5, 3]))


def test_padding_layers_check_their_input_and_padding() -> None:
    with pytest.raises(ValueError, match=r"ReflectionPad2d: expected 3D or 4D input .* got 2D input of shape \(2, 2\)"):
        nn.ReflectionPad2d(1)(Tensor.zeros([2, 2]))
    with pytest.raises(ValueError, match=r"ZeroPad2d: padding must be an int or a sequence of 4 ints, got \(1, 2\)"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(ShapeError, match="pad: reflect pads must be smaller than the dim"):
        nn.ReflectionPad1d(3)(Tensor.zeros([1, 3]))


def test_adaptive_pooling_errors() -> None:
    with pytest.raises(ShapeError, match=r"adaptive_max_pool2d: input must be 3D .* got 2D input of shape \(2, 2\)"):
        nn.AdaptiveMaxPool2d(2)(Tensor.zeros([2, 2]))
    with pytest.raises(ValueError, match="AdaptiveMaxPool2d: return_indices=True is not supported"):
        nn.AdaptiveMaxPool2d(2, return_indices=True)
    with pytest.raises(ValueError, match=r"adaptive_avg_pool1d: output_size must be >= 1, got 0"):
        nn.AdaptiveAvgPool1d(0)(Tensor.zeros([1, 2, 3]))
    with pytest.raises(DTypeError, match="adaptive_max_pool1d: input must be a float32 or float64 Tensor, got int64"):
        F.adaptive_max_pool1d(Tensor([[1, 2, 3]]), 2)


def test_reprs_are_pytorchs() -> None:
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert repr(nn.ConstantPad1d(2, 3.5)) == "ConstantPad1d(padding=(2, 2), value=3.5)"
    assert repr(nn.ReplicationPad2d((1, 0, 2, 1))) == "ReplicationPad2d((1, 0, 2, 1))"
    assert repr(nn.PReLU(3, 0.1)) == "PReLU(num_parameters=3)"
    assert repr(nn.Bilinear(2, 3, 4)) == "Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)"
    assert repr(nn.AdaptiveMaxPool2d((3, None))) == "AdaptiveMaxPool2d(output_size=(3, None))"
    assert repr(nn.AdaptiveAvgPool1d(3)) == "AdaptiveAvgPool1d(output_size=3)"
