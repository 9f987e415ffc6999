"""Adagrad, NAdam, RAdam, LBFGS and the schedulers of issue 14 against numbers PyTorch computed
(tests/nn/data/optim_reference.json, made by make_optim_reference.py): same start, same gradients or the same
function, float64 to 1e-9 unless said; state_dict layouts as PyTorch's; the errors bad arguments give."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import rtxviz
from rtxviz import InplaceError, Tensor, Variable
from rtxviz.nn import Linear, Parameter
from rtxviz.optim import (
    LBFGS,
    SGD,
    Adagrad,
    Adam,
    AdamW,
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiStepLR,
    NAdam,
    OneCycleLR,
    RAdam,
    ReduceLROnPlateau,
    RMSprop,
    SequentialLR,
    StepLR,
)

from .conftest import REFERENCE

REF = json.loads(REFERENCE.read_text())
OPTIMIZERS = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop, "Adagrad": Adagrad, "NAdam": NAdam,
              "RAdam": RAdam}
TOL = {"float64": 1e-9, "float32": 2e-6}


def _params(dtype: str, device: str = "cpu") -> list[Parameter]:
    return [Parameter(Tensor(np.array(a), dtype=dtype, device=device)) for a in REF["init"]]


def _set_grads(params: list[Parameter], grads: list) -> None:
    for p, g in zip(params, grads, strict=True):
        p.grad = Variable(np.array(g), dtype=p.dtype.name, device=p.device)


def _config(cfg: dict) -> dict:
    cfg = dict(cfg)
    if "betas" in cfg:
        cfg["betas"] = tuple(cfg["betas"])
    return cfg


def _close(got: object, expected: object, tol: float, what: str) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64),
                               rtol=tol, atol=tol, err_msg=what)


V2 = REF["optimizers_v2"]


@pytest.mark.parametrize("case", V2, ids=[f"{c['optimizer']}-{c['dtype']}-{i}" for i, c in enumerate(V2)])
def test_optimizer_matches_pytorch_trajectory_and_state(case: dict, device: str) -> None:
    dtype, tol = case["dtype"], TOL[case["dtype"]]
    params = _params(dtype, device)
    opt = OPTIMIZERS[case["optimizer"]](params, **_config(case["config"]))
    for step, expected in enumerate(case["trajectory"]):
        _set_grads(params, REF["grads_v2"][step])
        ids = [id(p.data) for p in params]
        opt.step()
        assert [id(p.data) for p in params] == ids, "step must update param.data in place"
        for p, e in zip(params, expected, strict=True):
            assert p.dtype.name == dtype
            _close(p.numpy(), e, tol, f"{case['optimizer']} {case['config']} step {step + 1}")
    state = opt.state_dict()
    assert sorted(state["param_groups"][0]) == case["group_keys"]
    for index, torch_state in case["final_state"].items():
        mine = state["state"][int(index)]
        assert sorted(mine) == sorted(torch_state), f"{case['optimizer']}: state keys"
        for name, value in torch_state.items():
            _close(mine[name], value, tol, f"{case['optimizer']} state {name!r} of parameter {index}")


V2_64 = [c for c in V2 if c["dtype"] == "float64"]


@pytest.mark.parametrize("case", V2_64, ids=[f"{c['optimizer']}-{i}" for i, c in enumerate(V2_64)])
def test_a_pytorch_state_dict_loads_and_continues(case: dict) -> None:
    """PyTorch's state_dict after 3 steps, its tensors as numpy arrays, loads; the next steps match PyTorch's."""
    saved = case["state_after_3"]
    state = {int(k): {n: np.array(v) if isinstance(v, list) else v for n, v in st.items()}
             for k, st in saved["state"].items()}
    params = [Parameter(Tensor(np.array(a))) for a in case["trajectory"][2]]
    opt = OPTIMIZERS[case["optimizer"]](params, lr=123.0)
    opt.load_state_dict({"state": state, "param_groups": saved["param_groups"]})
    assert opt.param_groups[0]["lr"] == saved["param_groups"][0]["lr"] != 123.0
    for step in range(3, len(case["trajectory"])):
        _set_grads(params, REF["grads_v2"][step])
        opt.step()
    for p, e in zip(params, case["trajectory"][-1], strict=True):
        _close(p.numpy(), e, 1e-9, f"{case['optimizer']} {case['config']} after loading")


def test_adagrad_has_its_state_before_the_first_step_as_pytorch() -> None:
    p = Parameter(Tensor(np.zeros(3)))
    state = Adagrad([p], initial_accumulator_value=0.25).state_dict()["state"]
    assert state[0]["step"] == 0
    np.testing.assert_array_equal(state[0]["sum"], [0.25, 0.25, 0.25])


@pytest.mark.parametrize("make", [lambda ps: Adagrad(ps), lambda ps: NAdam(ps), lambda ps: RAdam(ps),
                                  lambda ps: Adam(ps, weight_decay=0.1, decoupled_weight_decay=True),
                                  lambda ps: SGD(ps, lr=0.1)],
                         ids=["Adagrad", "NAdam", "RAdam", "Adam-decoupled", "SGD-plain"])
def test_a_step_bumps_the_version_so_a_stale_graph_raises(make) -> None:
    rtxviz.manual_seed(0)
    model = Linear(3, 2)
    opt = make(list(model.parameters()))
    x = Tensor(np.ones((4, 3), dtype=np.float32))
    model(x).sum().backward()
    loss = model(x).sum()
    opt.step()  # the weights the forward saved change before its backward
    with pytest.raises(InplaceError, match=type(opt).__name__ + r"\.step"):
        loss.backward()
    assert all(p.is_leaf and p.grad_fn is None for p in model.parameters())


def test_step_takes_a_closure_and_returns_its_loss() -> None:
    p = Parameter(Tensor(np.array([2.0])))
    opt = SGD([p], lr=0.25)

    def closure() -> Variable:
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with rtxviz.no_grad():  # the closure runs with grad mode on, as PyTorch's
        loss = opt.step(closure)
    assert loss.item() == 4.0
    assert p.tolist() == [1.0]  # 2 - 0.25 * 4


@pytest.mark.parametrize(("make", "message"), [
    (lambda ps: Adagrad(ps, lr=-0.1), r"Adagrad: invalid learning rate -0\.1"),
    (lambda ps: Adagrad(ps, lr_decay=-1.0), r"Adagrad: invalid lr_decay -1\.0"),
    (lambda ps: Adagrad(ps, initial_accumulator_value=-1.0), r"Adagrad: invalid initial_accumulator_value -1"),
    (lambda ps: NAdam(ps, betas=(0.9, 1.0)), r"NAdam: betas must be two numbers in \[0, 1\), got \(0\.9, 1\.0\)"),
    (lambda ps: NAdam(ps, momentum_decay=-0.1), r"NAdam: invalid momentum_decay -0\.1"),
    (lambda ps: RAdam(ps, eps=-1e-8), r"RAdam: invalid eps -1e-08"),
    (lambda ps: RAdam(ps, betas=(-0.1, 0.9)), r"RAdam: betas must be .* got \(-0\.1, 0\.9\)"),
    (lambda ps: Adam(ps, lr=float("nan")), r"Adam: invalid learning rate nan"),
    (lambda ps: LBFGS(ps, lr=-1.0), r"LBFGS: invalid learning rate -1\.0"),
    (lambda ps: LBFGS(ps, line_search_fn="armijo"), r"LBFGS: line_search_fn must be None or 'strong_wolfe', "
                                                     r"got 'armijo'"),
    (lambda ps: LBFGS([{"params": ps[:1]}, {"params": ps[1:]}]), r"LBFGS: takes one parameter group"),
])
def test_bad_arguments_name_the_optimizer_and_the_value(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(_params("float64"))


def test_lbfgs_without_a_closure_says_what_it_needs() -> None:
    opt = LBFGS(_params("float64"))
    with pytest.raises(TypeError, match=r"LBFGS\.step: needs a closure"):
        opt.step()
    with pytest.raises(TypeError, match=r"LBFGS\.step: closure must be callable, got float"):
        opt.step(1.0)


# -- LBFGS ------------------------------------------------------------------------------------------------------
def _lbfgs_loss(name: str, params: list[Parameter]) -> Variable:
    """The functions of make_optim_reference.py, written with rtxviz's ops."""
    if name == "rosenbrock":
        x = params[0]
        return (1.0 - x[0]) ** 2 + 100.0 * (x[1] - x[0] ** 2) ** 2
    p1, p2 = params
    a = Tensor(np.array(REF["lbfgs_functions"]["coupled_a"]))
    c = Tensor(np.array(REF["lbfgs_functions"]["coupled_c"]))
    return (a * (p1 - c) ** 2).sum() + ((p2 - 0.5) ** 4).sum() + 0.1 * (p1.sum() * p2.sum()) ** 2


def _lbfgs_run(case: dict, device: str = "cpu", steps: int | None = None) -> tuple[LBFGS, list, list, list]:
    params = [Parameter(Tensor(np.array(a), dtype="float64", device=device)) for a in case["init"]]
    opt = LBFGS(params, **case["config"])
    calls = [0]

    def closure() -> Variable:
        calls[0] += 1
        opt.zero_grad()
        loss = _lbfgs_loss(case["function"], params)
        loss.backward()
        return loss

    got = []
    for _ in range(steps or len(case["steps"])):
        loss = opt.step(closure)
        st = opt.state[id(params[0])]
        got.append({"params": [p.numpy().copy() for p in params], "loss": float(loss), "closure_calls": calls[0],
                    "func_evals": st["func_evals"], "n_iter": st["n_iter"]})
    return opt, params, got, calls


LB = REF["lbfgs"]


@pytest.mark.parametrize("case", LB, ids=[f"{c['function']}-{i}" for i, c in enumerate(LB)])
def test_lbfgs_matches_pytorch(case: dict, device: str) -> None:
    opt, params, got, _ = _lbfgs_run(case, device)
    for i, (mine, expected) in enumerate(zip(got, case["steps"], strict=True)):
        what = f"LBFGS {case['function']} {case['config']} step {i + 1}"
        assert (mine["closure_calls"], mine["func_evals"], mine["n_iter"]) == \
            (expected["closure_calls"], expected["func_evals"], expected["n_iter"]), what
        _close(mine["loss"], expected["loss"], 1e-8, what + " loss")
        for p, e in zip(mine["params"], expected["params"], strict=True):
            _close(p, e, 1e-8, what)
    assert sorted(opt.state[id(params[0])]) == case["state_keys"]
    assert all(p.is_leaf and p.grad_fn is None for p in params)


def test_lbfgs_state_dict_roundtrip_continues_identically() -> None:
    case = next(c for c in LB if c["config"].get("line_search_fn") == "strong_wolfe" and c["function"] == "coupled")
    opt, params, _, _ = _lbfgs_run(case, steps=1)
    saved = opt.state_dict()
    assert sorted(saved["state"][0]) == case["state_keys"]
    assert isinstance(saved["state"][0]["old_dirs"][0], np.ndarray)
    fresh = [Parameter(Tensor(p.numpy().copy())) for p in params]
    opt2 = LBFGS(fresh, **case["config"])
    opt2.load_state_dict(saved)

    def closure_for(ps: list[Parameter], o: LBFGS):
        def closure() -> Variable:
            o.zero_grad()
            loss = _lbfgs_loss("coupled", ps)
            loss.backward()
            return loss
        return closure

    opt.step(closure_for(params, opt))
    opt2.step(closure_for(fresh, opt2))
    for a, b in zip(params, fresh, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    _close(fresh[0].numpy(), case["steps"][1]["params"][0], 1e-8, "LBFGS after loading")


@pytest.mark.parametrize("case", LB, ids=[f"{c['function']}-{i}" for i, c in enumerate(LB)])
def test_lbfgs_loads_pytorchs_state_dict_and_continues(case: dict) -> None:
    """PyTorch's LBFGS state after one step (flat vectors and lists of them, as numpy arrays) loads; the next
    steps then match PyTorch's, closure calls included."""
    saved = case["state_after_1"]
    vectors, histories = ("d", "prev_flat_grad"), ("old_dirs", "old_stps")
    state = {int(k): {n: np.array(v) if n in vectors else [np.array(x) for x in v] if n in histories else v
                      for n, v in st.items()} for k, st in saved["state"].items()}
    params = [Parameter(Tensor(np.array(a))) for a in case["steps"][0]["params"]]
    opt = LBFGS(params, lr=123.0)
    opt.load_state_dict({"state": state, "param_groups": saved["param_groups"]})
    calls = [case["steps"][0]["closure_calls"]]

    def closure() -> Variable:
        calls[0] += 1
        opt.zero_grad()
        loss = _lbfgs_loss(case["function"], params)
        loss.backward()
        return loss

    for expected in case["steps"][1:]:
        loss = opt.step(closure)
        what = f"LBFGS {case['function']} {case['config']} after loading"
        assert calls[0] == expected["closure_calls"], what
        _close(float(loss), expected["loss"], 1e-8, what)
        for p, e in zip(params, expected["params"], strict=True):
            _close(p.numpy(), e, 1e-8, what)


def test_lbfgs_step_bumps_versions() -> None:
    x = Parameter(Tensor(np.array([3.0, -2.0])))
    opt = LBFGS([x], max_iter=2)
    stale = (x * x).sum()

    def closure() -> Variable:
        opt.zero_grad()
        loss = ((x - 1.0) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with pytest.raises(InplaceError, match=r"LBFGS\.step"):
        stale.backward()


# -- schedulers -------------------------------------------------------------------------------------------------
LAMBDAS = {"pow095": lambda e: 0.95**e, "warmup4": lambda e: min(1.0, (e + 1) / 4),
           "wave": lambda e: 1.0 + 0.5 * math.sin(e)}  # the functions make_optim_reference.py uses
SCHEDULERS = {"StepLR": StepLR, "MultiStepLR": MultiStepLR, "ExponentialLR": ExponentialLR, "LinearLR": LinearLR,
              "CosineAnnealingLR": CosineAnnealingLR, "OneCycleLR": OneCycleLR}


def _two_groups(kind: str, lrs: list[float]) -> tuple[object, list[Parameter]]:
    a, b = Parameter(Tensor(np.zeros(2))), Parameter(Tensor(np.zeros(3)))
    groups = [{"params": [a], "lr": lrs[0]}, {"params": [b], "lr": lrs[1]}]
    return (SGD(groups, momentum=0.9) if kind == "SGD" else Adam(groups)), [a, b]


def _make(opt, name: str, cfg: dict):
    if name == "LambdaLR":
        fn = cfg["lr_lambda"]
        return LambdaLR(opt, [LAMBDAS[f] for f in fn] if isinstance(fn, list) else LAMBDAS[fn])
    if name == "SequentialLR":
        return SequentialLR(opt, [_make(opt, n, c) for n, c in cfg["schedulers"]], milestones=cfg["milestones"])
    return SCHEDULERS[name](opt, **cfg)


def _momenta(opt) -> list[float]:
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


SV2 = REF["schedulers_v2"]


@pytest.mark.parametrize("case", SV2, ids=[f"{c['scheduler']}-{i}" for i, c in enumerate(SV2)])
def test_scheduler_matches_pytorch(case: dict) -> None:
    opt, params = _two_groups(case["optimizer"], case["group_lrs"])
    if case["scheduler"] == "ReduceLROnPlateau":
        sched = ReduceLROnPlateau(opt, **case["config"])
        got = []
        for m in case["metrics"]:
            sched.step(m)
            got.append(sched.get_last_lr())
        _close(got, case["lrs"], 1e-12, f"ReduceLROnPlateau {case['config']}")
        return
    sched = _make(opt, case["scheduler"], case["config"])
    got, momenta = [], []
    for _ in case["lrs"]:
        got.append(sched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == got[-1]
        momenta.append(_momenta(opt))
        for p in params:
            p.grad = Variable(np.ones(p.shape))
        opt.step()
        sched.step()
    _close(got, case["lrs"], 1e-12, f"{case['scheduler']} {case['config']} lr")
    _close(momenta, case["momenta"], 1e-12, f"{case['scheduler']} {case['config']} momentum")


CF = REF["schedulers_closed_form"]


@pytest.mark.parametrize("case", CF, ids=[c["scheduler"] for c in CF])
def test_step_with_an_epoch_uses_the_closed_form_as_pytorch(case: dict) -> None:
    opt, _ = _two_groups("SGD", case["group_lrs"])
    sched = SCHEDULERS[case["scheduler"]](opt, **case["config"])
    got = []
    for e in case["epochs"]:
        sched.step(e)
        got.append(sched.get_last_lr())
    assert sched.last_epoch == case["epochs"][-1]
    _close(got, case["lrs"], 1e-12, f"{case['scheduler']} {case['config']} step(epoch)")


def test_scheduler_state_dict_resumes_the_schedule() -> None:
    case = next(c for c in SV2 if c["scheduler"] == "OneCycleLR" and c["optimizer"] == "Adam")
    opt, _ = _two_groups("Adam", case["group_lrs"])
    sched = OneCycleLR(opt, **case["config"])
    for _ in range(5):
        sched.step()
    saved, opt_saved = sched.state_dict(), opt.state_dict()
    assert "optimizer" not in saved and saved["last_epoch"] == 5
    opt2, _ = _two_groups("Adam", [9.0, 9.0])
    opt2.load_state_dict(opt_saved)
    sched2 = OneCycleLR(opt2, **case["config"])
    sched2.load_state_dict(saved)
    got = []
    for _ in range(5, len(case["lrs"])):
        sched2.step()
        got.append(sched2.get_last_lr())
    _close(got[:-1], case["lrs"][6:], 1e-12, "OneCycleLR resumed")


def test_lambda_lr_state_dict_keeps_callable_objects_state() -> None:
    class Warmup:
        def __init__(self, steps: int) -> None:
            self.steps = steps

        def __call__(self, epoch: int) -> float:
            return min(1.0, (epoch + 1) / self.steps)

    opt, _ = _two_groups("SGD", [1.0, 1.0])
    sched = LambdaLR(opt, [Warmup(4), lambda e: 1.0])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"steps": 4}, None]
    other = LambdaLR(opt, [Warmup(10), lambda e: 1.0])
    other.load_state_dict(state)
    assert other.lr_lambdas[0].steps == 4


def test_resuming_a_scheduler_does_not_advance_the_lr() -> None:
    opt, _ = _two_groups("SGD", [1.0, 0.5])
    sched = ExponentialLR(opt, gamma=0.5)
    for _ in range(3):
        sched.step()
    assert sched.get_last_lr() == [0.125, 0.0625]
    resumed = ExponentialLR(opt, gamma=0.5, last_epoch=3)
    assert resumed.get_last_lr() == [0.125, 0.0625] and resumed.last_epoch == 4
    sched.step(epoch=1)  # the closed form
    assert sched.get_last_lr() == [0.5, 0.25]


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda o: LinearLR(o, start_factor=0.0), ValueError, r"LinearLR: start_factor must be in \(0, 1\], got 0\.0"),
    (lambda o: LinearLR(o, end_factor=1.5), ValueError, r"LinearLR: end_factor must be in \[0, 1\], got 1\.5"),
    (lambda o: ReduceLROnPlateau(o, factor=1.0), ValueError, r"ReduceLROnPlateau: factor must be < 1\.0, got 1\.0"),
    (lambda o: ReduceLROnPlateau(o, mode="lowest"), ValueError, r"ReduceLROnPlateau: mode must be .* 'lowest'"),
    (lambda o: ReduceLROnPlateau(o, min_lr=[0.1]), ValueError, r"min_lr has 1 values, the optimizer has 2"),
    (lambda o: OneCycleLR(o, max_lr=1.0), ValueError, r"OneCycleLR: give total_steps"),
    (lambda o: OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=1), ValueError, r"pct_start .* got 1"),
    (lambda o: OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="exp"), ValueError, r"'cos' or 'linear'"),
    (lambda o: SequentialLR(o, [ExponentialLR(o, 0.5)], milestones=[2]), ValueError,
     r"SequentialLR: expects one milestone fewer than schedulers, got 1 schedulers and 1 milestones"),
    (lambda o: SequentialLR(o, [ReduceLROnPlateau(o), ExponentialLR(o, 0.5)], milestones=[2]), ValueError,
     r"SequentialLR: scheduler 0 is a ReduceLROnPlateau"),
    (lambda o: StepLR("sgd", 2), TypeError, r"StepLR: expected an Optimizer, got str"),
])
def test_scheduler_bad_arguments(make, error: type, message: str) -> None:
    opt, _ = _two_groups("SGD", [1.0, 1.0])
    with pytest.raises(error, match=message):
        make(opt)


def test_one_cycle_refuses_to_step_past_its_end_and_an_optimizer_without_momentum() -> None:
    opt, _ = _two_groups("SGD", [1.0, 1.0])
    sched = OneCycleLR(opt, max_lr=1.0, total_steps=3)
    sched.step()
    sched.step()
    sched.step()  # epoch 3 = total_steps: PyTorch allows it
    with pytest.raises(ValueError, match=r"OneCycleLR: stepped 4 times, but total_steps is 3"):
        sched.step()
    with pytest.raises(ValueError, match=r"cycle_momentum needs an optimizer with momentum or betas; Adagrad"):
        OneCycleLR(Adagrad([Parameter(Tensor.zeros([1]))]), max_lr=1.0, total_steps=3)


# -- the live view ------------------------------------------------------------------------------------------------
class _Recorder:
    """A transport that keeps the events a watched run sends."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def send(self, run, lines, dropped) -> None:
        self.events.extend(json.loads(line) for line in lines)

    def close(self) -> None:  # the emitter's Transport protocol: the sender closes its transport when it stops
        pass


@pytest.mark.parametrize("make", [
    lambda ps: NAdam(ps, lr=0.1),
    lambda ps: RAdam(ps, lr=0.1, weight_decay=0.5, decoupled_weight_decay=True),  # reported by difference
    lambda ps: Adagrad(ps, lr=0.1),
    lambda ps: LBFGS(ps, max_iter=3, line_search_fn="strong_wolfe"),
], ids=["NAdam", "RAdam-decoupled", "Adagrad", "LBFGS"])
def test_a_watched_step_reports_the_update_it_made(make) -> None:
    from rtxviz import events

    rec = _Recorder()
    w = Parameter(Tensor(np.array([3.0, -4.0])))
    w.name = "w"
    opt = make([w])

    def closure() -> Variable:
        opt.zero_grad()
        loss = ((w - 1.0) ** 2).sum()
        loss.backward()
        return loss

    before = w.numpy().copy()
    with events.watch(transport=rec, flush_interval=0.01) as run, run.step(0):
        if isinstance(opt, LBFGS):
            opt.step(closure)
        else:
            closure()
            opt.step()
    (report,) = [e for e in rec.events if e["kind"] == "optimizer_step"]
    (row,) = report["params"]
    assert report["optimizer"] == type(opt).__name__
    assert row["update_norm"] == pytest.approx(float(np.linalg.norm(w.numpy() - before)), rel=1e-6)
    assert row["param_norm"] == pytest.approx(float(np.linalg.norm(w.numpy())), rel=1e-6)
