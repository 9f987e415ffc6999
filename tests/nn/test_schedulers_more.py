"""Every learning-rate scheduler against the lrs (and momenta) PyTorch computed for the same steps.

The numbers come from tests/nn/make_scheduler_reference.py (run under PyTorch), stored in
tests/nn/data/scheduler_reference.json: ConstantLR, PolynomialLR, MultiplicativeLR, CosineAnnealingWarmRestarts
(with fractional `step(epoch)`), CyclicLR, ChainedScheduler, and the schedulers rtxviz had, on two parameter groups,
with state_dict round trips mid-way and SequentialLR / ChainedScheduler composing them.
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rtxviz import Tensor, Variable
from rtxviz.nn import Parameter
from rtxviz.optim import SGD, Adagrad, Adam, lr_scheduler
from rtxviz.optim.lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    MultiplicativeLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)

REF = json.loads((Path(__file__).parent / "data" / "scheduler_reference.json").read_text())
CASES = REF["cases"]
TOL = 1e-12  # relative; the absolute floor only lets an exact 0 in PyTorch be a 1e-18 here

# the functions make_scheduler_reference.py names (the same formulas)
LAMBDAS = {"pow095": lambda e: 0.95**e, "warmup4": lambda e: min(1.0, (e + 1) / 4),
           "wave": lambda e: 1.0 + 0.5 * math.sin(e), "mul095": lambda e: 0.95,
           "mulwave": lambda e: 1.0 + 0.1 * math.sin(e)}
SCALE_FNS = {"halving": lambda x: 0.5**x, "slow": lambda x: 1.0 / (1.0 + 0.1 * x)}


def _make(opt: Any, spec: list) -> Any:
    name, cfg = spec
    cfg = dict(cfg)
    if name in ("LambdaLR", "MultiplicativeLR"):
        fn = cfg.pop("lr_lambda")
        cfg["lr_lambda"] = [LAMBDAS[f] for f in fn] if isinstance(fn, list) else LAMBDAS[fn]
    if name == "CyclicLR" and "scale_fn" in cfg:
        cfg["scale_fn"] = SCALE_FNS[cfg["scale_fn"]]
    if name == "SequentialLR":
        inner = [_make(opt, s) for s in cfg.pop("schedulers")]
        return SequentialLR(opt, inner, **cfg)
    if name == "ChainedScheduler":
        return ChainedScheduler([_make(opt, s) for s in cfg.pop("schedulers")], optimizer=opt)
    return getattr(lr_scheduler, name)(opt, **cfg)


def _optimizer(kind: str, group_lrs: list[float]) -> tuple[Any, list[Parameter]]:
    a, b = Parameter(Tensor(np.zeros(2))), Parameter(Tensor(np.zeros(3)))
    groups = [{"params": [a], "lr": group_lrs[0]}, {"params": [b], "lr": group_lrs[1]}]
    return (SGD(groups, momentum=0.9) if kind == "SGD" else Adam(groups)), [a, b]


def _record(opt: Any, sched: Any) -> dict:
    entry = {"lrs": [g["lr"] for g in opt.param_groups], "last_lr": sched.get_last_lr(),
             "momenta": [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups],
             "last_epoch": getattr(sched, "last_epoch", None)}
    if isinstance(sched, CosineAnnealingWarmRestarts):
        entry["T_cur"], entry["T_i"] = sched.T_cur, sched.T_i
    return entry


def _run(case: dict) -> list[dict]:
    """The case's actions on rtxviz, as make_scheduler_reference.run_case does them on PyTorch."""
    opt, params = _optimizer(case["optimizer"], case["group_lrs"])
    sched = _make(opt, case["spec"])
    out = [_record(opt, sched)]
    for i, action in enumerate(case["actions"]):
        if i == case["resume_at"]:
            saved_opt, saved_sched = opt.state_dict(), sched.state_dict()
            opt, params = _optimizer(case["optimizer"], case["resume_lrs"])
            sched = _make(opt, case["spec"])
            opt.load_state_dict(saved_opt)
            sched.load_state_dict(saved_sched)
        for p in params:
            p.grad = Variable(np.ones(p.shape))
        opt.step()
        if action is None:
            sched.step()
        elif isinstance(action, dict):
            sched.step(action["metric"])
        else:
            sched.step(action)
        out.append(_record(opt, sched))
    return out


def _close(got: object, expected: object, what: str) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64),
                               rtol=TOL, atol=1e-15, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_scheduler_matches_pytorch(case: dict) -> None:
    got = _run(case)
    expected = case["records"]
    assert len(got) == len(expected)
    for key in ("lrs", "last_lr", "momenta"):
        _close([g[key] for g in got], [e[key] for e in expected], f"{case['id']}: {key}")
    assert [g["last_epoch"] for g in got] == [e["last_epoch"] for e in expected], case["id"]
    if "T_cur" in expected[0]:
        _close([g["T_cur"] for g in got], [e["T_cur"] for e in expected], f"{case['id']}: T_cur")
        assert [g["T_i"] for g in got] == [e["T_i"] for e in expected], case["id"]


TORCH_SCHEDULERS = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
                    "ExponentialLR", "SequentialLR", "PolynomialLR", "CosineAnnealingLR", "ChainedScheduler",
                    "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR"]  # torch's list


def test_every_torch_scheduler_is_importable_from_optim_and_lr_scheduler() -> None:
    import rtxviz.optim as optim
    for name in TORCH_SCHEDULERS:
        assert getattr(lr_scheduler, name) is getattr(optim, name), name
        assert name in lr_scheduler.__all__ and name in optim.__all__, name


def test_cyclic_lr_sets_the_lr_to_base_lr_and_momentum_to_max_momentum_at_construction() -> None:
    opt, _ = _optimizer("SGD", [5.0, 5.0])
    sched = CyclicLR(opt, base_lr=[0.1, 0.2], max_lr=1.0, step_size_up=2)
    assert sched.get_last_lr() == [0.1, 0.2] and sched.base_lrs == [0.1, 0.2]
    assert [g["momentum"] for g in opt.param_groups] == [0.9, 0.9]
    assert [(g["base_momentum"], g["max_momentum"]) for g in opt.param_groups] == [(0.8, 0.9), (0.8, 0.9)]


def test_cyclic_lr_state_dict_keeps_a_callable_objects_state_and_drops_functions() -> None:
    class Decay:
        def __init__(self, rate: float) -> None:
            self.rate = rate

        def __call__(self, x: float) -> float:
            return self.rate**x

    opt, _ = _optimizer("SGD", [1.0, 1.0])
    state = CyclicLR(opt, 0.1, 1.0, step_size_up=2, scale_fn=Decay(0.5)).state_dict()
    assert state["_scale_fn_custom"] == {"rate": 0.5}
    other = CyclicLR(opt, 0.1, 1.0, step_size_up=2, scale_fn=Decay(0.9))
    other.load_state_dict(state)
    assert other._scale_fn_custom.rate == 0.5  # type: ignore[union-attr]
    plain = CyclicLR(opt, 0.1, 1.0, step_size_up=2, scale_fn=lambda x: 1.0).state_dict()
    assert plain["_scale_fn_custom"] is None
    pickle.dumps(state)  # no bound methods in the state: it saves as PyTorch's does


def test_warm_restarts_fractional_epochs_follow_the_formula() -> None:
    # closed form of SGDR: T_cur = epoch - T_0 (T_mult^n - 1) / (T_mult - 1), T_i = T_0 T_mult^n
    opt, _ = _optimizer("SGD", [1.0, 0.5])
    sched = CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.1)
    sched.step(4.5)  # n = 1: the cycle [2, 6) of length 4, 2.5 into it
    assert sched.T_i == 4 and sched.last_epoch == 4
    assert sched.T_cur == pytest.approx(2.5, rel=1e-15)
    want = [0.1 + (base - 0.1) * (1 + math.cos(math.pi * 2.5 / 4)) / 2 for base in (1.0, 0.5)]
    assert sched.get_last_lr() == pytest.approx(want, rel=1e-14)


def _groups() -> Any:
    return _optimizer("SGD", [1.0, 1.0])[0]


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda o: ConstantLR(o, factor=1.5), ValueError, r"ConstantLR: factor must be in \(0, 1\], got 1\.5"),
    (lambda o: ConstantLR(o, factor=0.0), ValueError, r"ConstantLR: factor must be in \(0, 1\], got 0\.0"),
    (lambda o: ConstantLR(o, total_iters=-1), ValueError, r"ConstantLR: total_iters must be >= 0, got -1"),
    (lambda o: PolynomialLR(o, total_iters=0), ValueError, r"PolynomialLR: total_iters must be positive, got 0"),
    (lambda o: MultiplicativeLR(o, [lambda e: 1.0]), ValueError,
     r"MultiplicativeLR: lr_lambda has 1 values, the optimizer has 2 parameter group"),
    (lambda o: MultiplicativeLR("sgd", lambda e: 1.0), TypeError,  # type: ignore[arg-type]
     r"MultiplicativeLR: expected an Optimizer, got str"),
    (lambda o: MultiplicativeLR(o, 0.9),  # type: ignore[arg-type]
     TypeError, r"MultiplicativeLR: lr_lambda 0 should be a function, got float"),
    (lambda o: CosineAnnealingWarmRestarts(o, T_0=0), ValueError,
     r"CosineAnnealingWarmRestarts: T_0 must be a positive integer, got 0"),
    (lambda o: CosineAnnealingWarmRestarts(o, T_0=2.5), ValueError,  # type: ignore[arg-type]
     r"CosineAnnealingWarmRestarts: T_0 must be a positive integer, got 2\.5"),
    (lambda o: CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), ValueError,
     r"CosineAnnealingWarmRestarts: T_mult must be an integer >= 1, got 0"),
    (lambda o: CosineAnnealingWarmRestarts(o, T_0=2, eta_min="0"), TypeError,  # type: ignore[arg-type]
     r"CosineAnnealingWarmRestarts: eta_min must be a number, got '0' \(str\)"),
    (lambda o: CosineAnnealingWarmRestarts(o, T_0=2).step(-1), ValueError,
     r"CosineAnnealingWarmRestarts: epoch must be >= 0, got -1"),
    (lambda o: CyclicLR(o, 0.1, 1.0, mode="cosine"), ValueError,
     r"CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' \(or give scale_fn\), got 'cosine'"),
    (lambda o: CyclicLR(o, 0.1, 1.0, scale_fn=lambda x: 1.0, scale_mode="epoch"), ValueError,
     r"CyclicLR: scale_mode must be 'cycle' or 'iterations', got 'epoch'"),
    (lambda o: CyclicLR(o, 0.1, 1.0, step_size_up=0), ValueError, r"CyclicLR: step_size_up must be positive, got 0"),
    (lambda o: CyclicLR(o, 0.1, 1.0, step_size_down=-2), ValueError,
     r"CyclicLR: step_size_down must be >= 0, got -2"),
    (lambda o: CyclicLR(o, [0.1, 0.2, 0.3], 1.0), ValueError,
     r"CyclicLR: base_lr has 3 values, the optimizer has 2 parameter group"),
    (lambda o: CyclicLR(o, 0.1, [1.0]), ValueError, r"CyclicLR: max_lr has 1 values, the optimizer has 2"),
    (lambda o: CyclicLR(Adagrad([Parameter(Tensor.zeros([1]))]), 0.1, 1.0), ValueError,
     r"CyclicLR: cycle_momentum needs an optimizer with momentum or betas; Adagrad has neither"),
    (lambda o: CyclicLR("sgd", 0.1, 1.0), TypeError,  # type: ignore[arg-type]
     r"CyclicLR: expected an Optimizer, got str"),
    (lambda o: ChainedScheduler([]), ValueError, r"ChainedScheduler: expects at least one scheduler, got none"),
    (lambda o: ChainedScheduler([ExponentialLR(o, 0.5), ReduceLROnPlateau(o)]), ValueError,
     r"ChainedScheduler: scheduler 1 is a ReduceLROnPlateau"),
    (lambda o: ChainedScheduler([ExponentialLR(o, 0.5), StepLR(_groups(), 2)]), ValueError,
     r"ChainedScheduler: scheduler 1 \(StepLR\) drives another optimizer"),
    (lambda o: ChainedScheduler([object()]), TypeError,  # type: ignore[list-item]
     r"ChainedScheduler: scheduler 0 \(object\) has no optimizer"),
    (lambda o: SequentialLR(o, [ExponentialLR(o, 0.5), ChainedScheduler([ExponentialLR(o, 0.9)])], milestones=[2]),
     ValueError, r"SequentialLR: scheduler 1 \(ChainedScheduler\) combines schedulers and has no lr of its own"),
])
def test_scheduler_bad_arguments(make: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        make(_groups())

