"""Optimizers, schedulers and clip_grad_norm_ against trajectories stored from PyTorch
(tests/nn/data/optim_reference.json, made by make_optim_reference.py): same start, same gradients, 1e-6."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rtxviz import Tensor, Variable
from rtxviz.nn import Linear, Parameter, clip_grad_norm_
from rtxviz.optim import SGD, Adam, AdamW, CosineAnnealingLR, RMSprop, StepLR
from rtxviz.optim.optimizer import Optimizer

from .conftest import REFERENCE

OPTIMIZERS = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop}


def _params(ref: dict, dtype: str, device: str = "cpu") -> list[Parameter]:
    return [Parameter(Tensor(np.array(a), dtype=dtype, device=device)) for a in ref["init"]]


def _set_grads(params: list[Parameter], grads: list, dtype: str) -> None:
    for p, g in zip(params, grads, strict=True):
        p.grad = Variable(np.array(g), dtype=dtype, device=p.device)


def _case_ids(ref_cases: list) -> list[str]:
    return [f"{c['optimizer']}-{c['dtype']}-{i}" for i, c in enumerate(ref_cases)]


CASES = json.loads(REFERENCE.read_text())["optimizers"]


@pytest.mark.parametrize("case", CASES, ids=_case_ids(CASES))
def test_optimizer_matches_pytorch_trajectory(case: dict, reference: dict, device: str) -> None:
    dtype = case["dtype"]
    params = _params(reference, dtype, device)
    cfg = dict(case["config"])
    if "betas" in cfg:
        cfg["betas"] = tuple(cfg["betas"])
    opt = OPTIMIZERS[case["optimizer"]](params, **cfg)
    tol = 1e-6 if dtype == "float64" else 2e-6
    for step, expected in enumerate(case["trajectory"]):
        _set_grads(params, reference["grads"][step], dtype)
        ids = [id(p.data) for p in params]
        opt.step()
        assert [id(p.data) for p in params] == ids, "step must update param.data in place"
        for p, e in zip(params, expected, strict=True):
            assert p.dtype.name == dtype
            np.testing.assert_allclose(p.numpy(), np.array(e), rtol=tol, atol=tol,
                                       err_msg=f"{case['optimizer']} {case['config']} step {step + 1}")


def test_step_records_no_graph_and_skips_params_without_grad() -> None:
    a, b = Parameter(Tensor.ones([2])), Parameter(Tensor.ones([2]))
    opt = SGD([a, b], lr=0.5)
    (a * 3.0).sum().backward()
    opt.step()
    assert a.tolist() == [-0.5, -0.5]  # 1 - 0.5 * 3
    assert b.tolist() == [1.0, 1.0]
    assert a.is_leaf and a.grad_fn is None


def test_zero_grad_and_param_groups() -> None:
    body, head = Linear(2, 2), Linear(2, 1)
    opt = SGD([{"params": body.parameters()}, {"params": head.parameters(), "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9
    head(body(Tensor.ones([3, 2]))).sum().backward()
    assert head.weight.grad is not None
    opt.zero_grad()
    assert all(p.grad is None for p in [*body.parameters(), *head.parameters()])
    with pytest.raises(ValueError, match="more than one group"):
        SGD([{"params": body.parameters()}, {"params": body.parameters()}], lr=0.1)
    with pytest.raises(ValueError, match="empty"):
        SGD([], lr=0.1)


def test_optimizer_state_dict_roundtrip_continues_identically(reference: dict) -> None:
    case = next(c for c in reference["optimizers"] if c["optimizer"] == "Adam" and c["dtype"] == "float64")
    grads = reference["grads"]
    params = _params(reference, "float64")
    opt = Adam(params, **case["config"])
    for step in range(3):
        _set_grads(params, grads[step], "float64")
        opt.step()
    saved = opt.state_dict()
    assert saved["state"][0]["step"] == 3 and saved["param_groups"][0]["params"] == [0, 1]
    fresh = [Parameter(Tensor(p.numpy().copy())) for p in params]
    opt2 = Adam(fresh, lr=123.0)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == case["config"]["lr"]
    for step in range(3, 6):
        _set_grads(fresh, grads[step], "float64")
        opt2.step()
    for p, e in zip(fresh, case["trajectory"][-1], strict=True):
        np.testing.assert_allclose(p.numpy(), np.array(e), rtol=1e-6, atol=1e-6)


def test_invalid_hyperparameters_raise() -> None:
    p = [Parameter(Tensor.ones([1]))]
    with pytest.raises(ValueError, match="Nesterov"):
        SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="learning rate"):
        Adam(p, lr=-1.0)
    with pytest.raises(ValueError, match="betas"):
        AdamW(p, betas=(1.0, 0.9))
    with pytest.raises(TypeError, match="not a Variable"):
        SGD([np.ones(2)], lr=0.1)
    assert isinstance(RMSprop(p), Optimizer)


@pytest.mark.parametrize("idx", range(3))
def test_scheduler_matches_pytorch(idx: int, reference: dict) -> None:
    case = reference["schedulers"][idx]
    opt = SGD([Parameter(Tensor.zeros([1]))], lr=case["base_lr"])
    cls = {"StepLR": StepLR, "CosineAnnealingLR": CosineAnnealingLR}[case["scheduler"]]
    sched = cls(opt, **case["config"])
    got = []
    for _ in case["lrs"]:
        got.append(sched.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == got[-1]
        opt.step()
        sched.step()
    np.testing.assert_allclose(got, case["lrs"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("idx", range(4))
def test_clip_grad_norm_matches_pytorch(idx: int, reference: dict, device: str) -> None:
    case = reference["clip_grad_norm"][idx]
    params = [Parameter(Tensor.zeros(list(s), dtype="float64", device=device)) for s in reference["shapes"]]
    _set_grads(params, reference["grads"][0], "float64")
    norm_type = float(case["norm_type"])
    total = clip_grad_norm_(params, case["max_norm"], norm_type=norm_type)
    assert total.item() == pytest.approx(case["total_norm"], rel=1e-9)
    for p, e in zip(params, case["grads"], strict=True):
        np.testing.assert_allclose(p.grad.numpy(), np.array(e), rtol=1e-9, atol=1e-12)


def test_clip_grad_norm_does_not_touch_a_shared_gradient_array() -> None:
    a, b = Parameter(Tensor.ones([2])), Parameter(Tensor.ones([2]))
    (a + b).sum().backward()  # the engine may give both leaves the same gradient array
    clip_grad_norm_([a, b], max_norm=1.0)
    expected = 1.0 / (2.0 + 1e-6)  # total norm sqrt(4) = 2
    np.testing.assert_allclose(a.grad.numpy(), [expected] * 2, rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), [expected] * 2, rtol=1e-6)


def test_plain_sgd_fast_path_equals_the_general_path_bit_for_bit() -> None:
    """SGD without momentum, weight decay or maximize skips the per-parameter `_update` (SGD._step): the same
    parameters as the general path and as p + (-lr)·g in numpy, the same state keys, a float64 gradient of a
    float32 parameter cast as before, and a parameter with no gradient left alone."""
    rng = np.random.default_rng(3)
    start = [rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32),
             rng.standard_normal(2).astype(np.float32)]
    grads = [rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3), None]
    fast = [Parameter(Tensor(a.copy())) for a in start]
    general = [Parameter(Tensor(a.copy())) for a in start]
    opt_fast, opt_general = SGD(fast, lr=0.37), SGD(general, lr=0.37)
    expected = [a.copy() for a in start]
    for _ in range(3):
        for params in (fast, general):
            for p, g in zip(params, grads, strict=True):
                p.grad = None if g is None else Variable(g.copy())
        opt_fast.step()
        Optimizer._step(opt_general, None)  # the general loop, through SGD._update
        for e, g in zip(expected, grads, strict=True):
            if g is not None:
                e += np.float32(-0.37) * g.astype(np.float32)
    for f, g, e in zip(fast, general, expected, strict=True):
        assert f.numpy().tobytes() == g.numpy().tobytes() == e.tobytes()
    assert opt_fast.state_dict()["state"].keys() == opt_general.state_dict()["state"].keys() == {0, 1}


def _sgd_cases() -> tuple[list, list]:
    """(start arrays, gradients) covering what the compiled plain-SGD call takes and what it leaves to numpy."""
    rng = np.random.default_rng(11)
    shared = np.arange(9, dtype=np.float32) / 7
    start = [rng.standard_normal((67, 65)).astype(np.float32),  # past the vector lanes, with a tail
             rng.standard_normal(33).astype(np.float32),
             rng.standard_normal(()).astype(np.float32),  # 0-d
             rng.standard_normal((7, 5)),  # float64
             rng.standard_normal(4).astype(np.float32),  # float64 gradient: cast first (numpy)
             np.asfortranarray(rng.standard_normal((4, 3)).astype(np.float32)),  # not C-contiguous (numpy)
             shared[:6],  # its gradient overlaps it (numpy)
             rng.standard_normal(2).astype(np.float32)]  # no gradient: left alone
    grads = [rng.standard_normal((67, 65)).astype(np.float32), rng.standard_normal(33).astype(np.float32),
             rng.standard_normal(()).astype(np.float32), rng.standard_normal((7, 5)), rng.standard_normal(4),
             rng.standard_normal((4, 3)).astype(np.float32), shared[3:9], None]
    return start, grads


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
def test_plain_sgd_compiled_and_numpy_updates_equal_p_plus_step_times_g_bit_for_bit(native, monkeypatch) -> None:
    """SGD._step's one compiled call over a group (rtxviz._native `sgd_plain`) and its numpy loop give the same
    bits as p + (-lr)·g rounded after each operation, computed here with numpy; the pairs the kernel cannot take
    (a cast, a Fortran-order parameter, a gradient overlapping its parameter) go to numpy, and two groups with
    their own learning rates each use theirs."""
    from rtxviz import accel
    from rtxviz.optim import sgd as sgd_module

    if native and accel.sgd_plain is None and os.environ.get("RTXVIZ_REQUIRE_NATIVE") != "1":
        pytest.skip("rtxviz._native is not built")
    if not native:
        monkeypatch.setattr(sgd_module, "_sgd_plain", None)
    start, grads = _sgd_cases()
    params = [Parameter(Tensor(a.copy(order="K"))) for a in start]
    params[6] = Parameter(Tensor(start[6]))  # a view of `shared`, as its gradient is
    assert not params[5].data.flags.c_contiguous and params[6].data.base is not None
    opt = SGD([{"params": params[:4]}, {"params": params[4:], "lr": 0.013}], lr=0.37)
    expected = [a.copy() for a in start]
    for _ in range(3):
        for p, g in zip(params, grads, strict=True):
            p.grad = None if g is None else Variable(g)
        before = [np.array(p.data) for p in params]
        read = [None if g is None else np.array(g) for g in grads]  # the overlapping one changes in the step
        opt.step()
        for n, (e, g) in enumerate(zip(expected, read, strict=True)):
            if g is None:
                continue
            lr = 0.37 if n < 4 else 0.013
            g = g.astype(e.dtype)
            e[...] = before[n] + np.multiply(g, np.array(-lr, dtype=e.dtype))  # two roundings, as numpy's path
    for n, (p, e) in enumerate(zip(params, expected, strict=True)):
        assert p.data.dtype == e.dtype and p.data.tobytes() == np.asarray(e, order="C").tobytes(), n
    assert params[7].data.tobytes() == start[7].tobytes()


@pytest.mark.skipif(__import__("rtxviz.accel", fromlist=["x"]).sgd_plain is None
                    and os.environ.get("RTXVIZ_REQUIRE_NATIVE") != "1", reason="rtxviz._native not built")
def test_sgd_plain_leaves_what_it_cannot_take_and_checks_its_arguments() -> None:
    """The kernel itself: it updates a float32 pair in place and returns the indices it left untouched (a
    float64 gradient for a float32 parameter, a shape that differs, a read-only parameter, a list entry that is
    no array at all); bad arguments raise TypeError naming the call."""
    from rtxviz.accel import sgd_plain

    p = np.ones(5, np.float32)
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    params = [p, np.ones(4, np.float32), np.ones(4, np.float32), ro, "not an array"]
    grads = [np.full(5, 2.0, np.float32), np.ones(4), np.ones((2, 2), np.float32), np.ones(3, np.float32),
             np.ones(1, np.float32)]
    assert sgd_plain(params, grads, -0.5) == [1, 2, 3, 4]
    assert p.tolist() == [0.0] * 5 and params[1].tolist() == [1.0] * 4 and ro.tolist() == [1.0] * 3
    with pytest.raises(TypeError, match="sgd_plain"):
        sgd_plain([p], [], -0.5)
    with pytest.raises(TypeError):
        sgd_plain([p], [grads[0]], "fast")
