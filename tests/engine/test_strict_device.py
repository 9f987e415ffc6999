"""The cupy path without a GPU (issue 13, point 4): the strict stand-in refuses what cupy refuses, and the engine
runs on it, converting to numpy only where a host value is the point (`numpy()`, `item()`, `tolist()`).

The stand-in's own checks run against real cupy too when a GPU is usable (RTXVIZ_TEST_DEVICE=cuda,
scripts/gpu_check.sh), so that "strict" is known to mean "as cupy".
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

from rtxviz import DeviceError, DTypeError, Tensor, Variable
from rtxviz.engine import device as engine_device
from rtxviz.engine.device import Device, get_default_device, set_default_device
from tests import strict_xp
from tests.conftest import TEST_DEVICE

BACKENDS = ["strict"] + (["cupy"] if TEST_DEVICE == "cuda" else [])


@pytest.fixture(params=BACKENDS)
def xp(request: pytest.FixtureRequest) -> ModuleType:
    """The stand-in, and real cupy when the tests run on a GPU."""
    if request.param == "cupy":
        import cupy

        return cupy
    return strict_xp.xp


@pytest.fixture
def on_device() -> Iterator[Device]:
    """The engine's "cuda" device backed by the stand-in (already so under RTXVIZ_TEST_DEVICE=strict, real cupy
    under RTXVIZ_TEST_DEVICE=cuda); the backend and the default device are restored afterwards."""
    if TEST_DEVICE != "cpu":
        yield Device.cuda()
        return
    before = get_default_device()
    strict_xp.install()
    try:
        yield Device.cuda()
    finally:
        strict_xp.uninstall()
        set_default_device(before)


# -- the stand-in refuses what cupy refuses -------------------------------------------------------------------
def test_implicit_conversion_to_numpy_raises_as_cupys(xp: ModuleType) -> None:
    a = xp.arange(3.0)
    for convert in (np.asarray, np.array, lambda v: np.zeros(3) + v):
        with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed|Unsupported type"):
            convert(a)
    with pytest.raises(TypeError):  # numpy's functions dispatch to cupy's, which take no host arrays
        np.concatenate([np.zeros(1), a])
    host = a.get()
    assert type(host) is np.ndarray and host.tolist() == [0.0, 1.0, 2.0]
    host[0] = 7.0  # a copy: the device array is unchanged
    assert float(a[0]) == 0.0


@pytest.mark.parametrize("mix", ["a + host", "host + a", "np.add(host, a)", "np.maximum(a, host)",
                                 "a * 0-d host", "xp.where(host mask)", "a += host"])
def test_numpy_arrays_do_not_mix_with_device_arrays(xp: ModuleType, mix: str) -> None:
    a = xp.arange(3.0)
    host = np.ones(3)
    with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
        if mix == "a + host":
            a + host
        elif mix == "host + a":
            host + a
        elif mix == "np.add(host, a)":
            np.add(host, a)
        elif mix == "np.maximum(a, host)":
            np.maximum(a, host)
        elif mix == "a * 0-d host":
            a * np.asarray(2.0)
        elif mix == "xp.where(host mask)":
            xp.where(host > 0, a, a)
        else:
            a += host


def test_scalars_mix_and_0d_results_stay_device_arrays(xp: ModuleType) -> None:
    a = xp.arange(4.0).reshape(2, 2)
    for value in (a.sum(), a[0, 1], a.max(), np.exp(a)[1, 1], a * np.float64(2) + 1):
        assert isinstance(value, xp.ndarray), type(value)
    assert a.sum().ndim == 0 and float(a.sum()) == 6.0 and a.sum().item() == 6.0
    assert (a * np.float32(2)).dtype == np.float64  # a numpy scalar is a scalar, as a Python number is


def test_indexing_and_assigning_with_host_values_are_allowed(xp: ModuleType) -> None:
    a = xp.zeros(4)
    a[np.array([0, 2])] = np.array([1.0, 3.0])  # cupy converts index arrays and assigned values
    a[[1]] = 2.0
    assert a.get().tolist() == [1.0, 2.0, 3.0, 0.0]
    assert a[np.array([2, 0])].get().tolist() == [3.0, 1.0]


def test_views_know_their_base_and_devices_are_not_the_cpu(xp: ModuleType) -> None:
    a = xp.arange(6.0)
    assert a.base is None and a[1:].base is a and a.reshape(2, 3).T.base is a
    assert a.device.id == 0
    assert Tensor._wrap(a).device == Device("cuda", 0) and str(Tensor._wrap(a).device) == "cuda:0"


def test_the_stand_in_offers_only_cupys_names() -> None:
    xp = strict_xp.xp
    assert "errstate" not in strict_xp.CUPY_NAMES and "where" in strict_xp.CUPY_NAMES
    with pytest.raises(AttributeError, match="cupy has no errstate"):
        xp.errstate  # noqa: B018
    with pytest.raises(NotImplementedError, match="exp.at"):
        xp.exp.at(xp.zeros(2), [0], 1.0)
    with pytest.raises(AttributeError, match="no attribute 'data'"):
        xp.zeros(2).data  # noqa: B018
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        range(xp.asarray(3))  # a device scalar is no Python index (cupy.ndarray has no __index__)


# -- the engine on the device ---------------------------------------------------------------------------------
def test_tensors_on_the_device_hold_device_arrays_and_come_back_on_request(on_device: Device) -> None:
    xp = on_device.xp
    t = Tensor.ones([2, 3], device=on_device)
    assert isinstance(t.data, xp.ndarray) and t.device == on_device and t.device != Device.cpu()
    host = t.numpy()
    assert type(host) is np.ndarray and host.tolist() == [[1.0] * 3] * 2
    assert t.sum().item() == 6.0 and t.tolist() == [[1.0] * 3] * 2
    assert type(t.cpu().data) is np.ndarray and t.cpu().to(on_device).device == on_device
    np.testing.assert_array_equal(np.asarray(t), host)  # Tensor.__array__ copies explicitly (.get())


def test_the_default_device_places_host_data(on_device: Device) -> None:
    before = get_default_device()
    set_default_device(on_device)
    try:
        for t in (Tensor(np.arange(3.0)), Tensor.zeros([2]), Tensor.randn([2]), Variable(np.ones(2)),
                  Tensor.from_slice([1.0, 2.0], [2])):
            assert t.device == on_device, t
        assert Tensor(np.arange(3.0), device="cpu").device == Device.cpu()
    finally:
        set_default_device(before)


def test_mixing_host_values_with_device_variables_keeps_the_graph(on_device: Device) -> None:
    x = Variable(Tensor(np.array([0.5, 1.5]), device=on_device), requires_grad=True)
    y = (np.float64(3.0) * np.exp(x) + np.ones(2) * x - 2.0 / x).sum()
    y.backward()
    assert x.grad.device == on_device
    want = 3.0 * np.exp([0.5, 1.5]) + 1.0 + 2.0 / np.array([0.5, 1.5]) ** 2
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_device_and_dtype_errors_name_both_sides(on_device: Device) -> None:
    with pytest.raises(DeviceError, match="cpu.*cuda:0|cuda:0.*cpu"):
        Tensor.ones([2], device="cpu") + Tensor.ones([2], device=on_device)
    x = Variable(Tensor.ones([2], device=on_device, dtype="float32"), requires_grad=True)
    with pytest.raises(DTypeError, match="float32.*float64|float64.*float32"):
        x + np.ones(2)


def test_kernels_that_need_cupyx_run_on_the_device(on_device: Device) -> None:
    """getitem's backward with a repeated index (scatter_add), gelu (erf), dropout (a host mask moved over):
    each went to `import cupyx`/numpy directly before."""
    from rtxviz.engine import manual_seed
    from rtxviz.engine.ops.nn_norm import dropout
    from rtxviz.engine.ops.unary import gelu

    x = Variable(Tensor(np.array([0.2, -0.4, 1.0]), device=on_device), requires_grad=True)
    x[[0, 0, 2]].sum().backward()
    assert x.grad.device == on_device and x.grad.tolist() == [2.0, 0.0, 1.0]
    g = gelu(x)
    from math import erf, sqrt
    np.testing.assert_allclose(g.numpy(), [v * 0.5 * (1 + erf(v / sqrt(2))) for v in (0.2, -0.4, 1.0)], rtol=1e-12)
    manual_seed(0)
    d = dropout(Tensor.ones([1000], device=on_device, dtype="float64"), 0.5)
    assert d.device == on_device and set(np.unique(d.numpy()).tolist()) <= {0.0, 2.0}
    assert 400 < int((d.numpy() == 0).sum()) < 600


def test_the_graph_cache_replays_a_backward_on_the_device(on_device: Device) -> None:
    """A replayed backward seeds the gradient with the device's `ones` (the capture named the module "cupy"
    and imported it by name before)."""
    from rtxviz.engine.cache import init_graph_cache, run_cached

    init_graph_cache()
    w = Variable(Tensor(np.array([1.0, -2.0]), device=on_device), requires_grad=True)

    def step(x: Tensor) -> Tensor:
        loss = (w * x).sum()
        loss.backward()
        return loss

    x = Tensor(np.array([3.0, 4.0]), device=on_device)
    for _ in range(3):  # a capture, then replays
        w.grad = None
        assert run_cached(step, x, params=[w]).item() == -5.0
        assert w.grad.device == on_device and w.grad.tolist() == [3.0, 4.0]


def test_use_cuda_backend_none_gives_cuda_back_to_cupy(on_device: Device) -> None:
    if TEST_DEVICE != "cpu":
        pytest.skip("the suite itself runs on the device")
    engine_device.use_cuda_backend(None)
    try:
        assert engine_device._cupy is None and get_default_device() == Device.cpu()
    finally:
        strict_xp.install()


def test_a_broadcast_gradient_is_owned_by_the_leaf(on_device: Device) -> None:
    """sum's backward hands out a broadcast (zero-stride) view; the leaf's .grad must own its elements. numpy says
    so with flags.writeable, which cupy's flags lack (the walk asked for it and raised AttributeError on a GPU)."""
    assert not hasattr(on_device.xp.zeros(2).flags, "writeable")
    x = Variable(Tensor(np.array([1.0, 2.0, 3.0]), device=on_device), requires_grad=True)
    x.sum().backward()
    assert 0 not in x.grad.data.strides and x.grad.tolist() == [1.0, 1.0, 1.0]
    x.grad.mul_(2.0)  # in place, by hand: only this leaf's gradient, element by element
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
