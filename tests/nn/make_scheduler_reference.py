"""Generate tests/nn/data/scheduler_reference.json with PyTorch (run by hand, never by the tests):

    /tmp/torchvenv/bin/python tests/nn/make_scheduler_reference.py

Every learning-rate scheduler of torch.optim.lr_scheduler (the ones rtxviz had before and ConstantLR,
PolynomialLR, MultiplicativeLR, CosineAnnealingWarmRestarts, CyclicLR and ChainedScheduler) on an optimizer with
two parameter groups of different lrs. A case is a scheduler spec and a list of actions, each one of:

    null            scheduler.step()
    a number        scheduler.step(epoch)  (fractional epochs for CosineAnnealingWarmRestarts)
    {"metric": m}   scheduler.step(m)      (ReduceLROnPlateau)

Before the first action and after each one the groups' lrs, momenta (SGD's "momentum" or Adam's beta1) and the
scheduler's last_epoch (CosineAnnealingWarmRestarts: also T_cur and T_i) are stored. With "resume_at": k, after
k actions the optimizer's and the scheduler's state_dicts go into a fresh optimizer (lrs 9.0) and a freshly
built scheduler on it (PyTorch's order: build the scheduler, then load the optimizer, then the scheduler), which
take the remaining actions.

A spec is [name, config]; lr_lambda and scale_fn name functions of LAMBDAS / SCALE_FNS (the test has the same
functions), and "schedulers" of SequentialLR and ChainedScheduler hold specs.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import torch

torch.set_default_dtype(torch.float64)
OUT = Path(__file__).parent / "data" / "scheduler_reference.json"
GROUP_LRS = [0.1, 0.04]
RESUME_LRS = [9.0, 9.0]  # the fresh optimizer's lrs: the loaded state must replace them

LAMBDAS = {"pow095": lambda e: 0.95**e, "warmup4": lambda e: min(1.0, (e + 1) / 4),
           "wave": lambda e: 1.0 + 0.5 * math.sin(e), "mul095": lambda e: 0.95,
           "mulwave": lambda e: 1.0 + 0.1 * math.sin(e)}
SCALE_FNS = {"halving": lambda x: 0.5**x, "slow": lambda x: 1.0 / (1.0 + 0.1 * x)}

STEPS = None  # a plain step()


def steps(n: int) -> list:
    return [STEPS] * n


CASES = [  # (id, spec, optimizer, actions, resume_at)
    # -- ConstantLR
    ("constant-default", ["ConstantLR", {}], "SGD", steps(8), None),
    ("constant-half-resumed", ["ConstantLR", {"factor": 0.5, "total_iters": 3}], "SGD", steps(8), 2),
    ("constant-one", ["ConstantLR", {"factor": 1.0, "total_iters": 2}], "Adam", steps(4), None),
    ("constant-epochs", ["ConstantLR", {"factor": 0.25, "total_iters": 3}], "SGD", [4, 1, None, 2, None, 0], None),
    # -- PolynomialLR
    ("polynomial-default", ["PolynomialLR", {}], "SGD", steps(8), None),
    ("polynomial-square-resumed", ["PolynomialLR", {"total_iters": 4, "power": 2.0}], "SGD", steps(8), 3),
    ("polynomial-sqrt", ["PolynomialLR", {"total_iters": 6, "power": 0.5}], "Adam", steps(8), None),
    ("polynomial-epochs", ["PolynomialLR", {"total_iters": 5, "power": 1.5}], "SGD", [2, 7, 3, None, 0, None], None),
    # -- MultiplicativeLR
    ("multiplicative-one", ["MultiplicativeLR", {"lr_lambda": "mul095"}], "SGD", steps(8), None),
    ("multiplicative-two-resumed", ["MultiplicativeLR", {"lr_lambda": ["mul095", "mulwave"]}], "SGD", steps(10),
     4),
    ("multiplicative-epochs", ["MultiplicativeLR", {"lr_lambda": "mulwave"}], "SGD", [3, None, 1, None], None),
    # -- CosineAnnealingWarmRestarts
    ("warm-restarts", ["CosineAnnealingWarmRestarts", {"T_0": 3}], "SGD", steps(12), None),
    ("warm-restarts-mult-resumed", ["CosineAnnealingWarmRestarts", {"T_0": 2, "T_mult": 2, "eta_min": 0.001}],
     "SGD", steps(20), 7),
    ("warm-restarts-fractional", ["CosineAnnealingWarmRestarts", {"T_0": 2, "T_mult": 2, "eta_min": 0.01}], "SGD",
     [e + i / 3 for e in range(7) for i in range(3)], None),
    ("warm-restarts-fractional-t1", ["CosineAnnealingWarmRestarts", {"T_0": 3}], "Adam",
     [e + i / 4 for e in range(5) for i in range(4)], None),
    ("warm-restarts-interleaved", ["CosineAnnealingWarmRestarts", {"T_0": 5}], "SGD",
     [None, None, 26, None, None, 2.5, None, 0, 13.7, None], None),
    ("warm-restarts-interleaved-mult3-resumed", ["CosineAnnealingWarmRestarts", {"T_0": 2, "T_mult": 3}], "SGD",
     [None, 9.5, None, None, 1, None, 30, None, None], 4),
    # -- CyclicLR
    ("cyclic-triangular", ["CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3}], "SGD", steps(16),
     None),
    ("cyclic-triangular2-resumed", ["CyclicLR", {"base_lr": [0.01, 0.02], "max_lr": [0.1, 0.2], "step_size_up": 2,
                                                 "step_size_down": 4, "mode": "triangular2"}], "SGD", steps(25), 9),
    ("cyclic-exp-range-adam", ["CyclicLR", {"base_lr": 0.001, "max_lr": 0.006, "step_size_up": 3,
                                            "mode": "exp_range", "gamma": 0.9, "base_momentum": 0.85,
                                            "max_momentum": 0.95}], "Adam", steps(20), None),
    ("cyclic-momentum-lists", ["CyclicLR", {"base_lr": 0.01, "max_lr": 0.05, "step_size_up": 4, "step_size_down": 2,
                                            "base_momentum": [0.7, 0.8], "max_momentum": [0.9, 0.95]}], "SGD",
     steps(14), 5),
    ("cyclic-scale-fn-cycle", ["CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "scale_fn": "halving",
                                            "cycle_momentum": False}], "SGD", steps(14), None),
    ("cyclic-scale-fn-iterations", ["CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2,
                                                 "scale_fn": "slow", "scale_mode": "iterations"}], "SGD", steps(14),
     6),
    ("cyclic-epochs", ["CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "mode": "triangular2"}],
     "SGD", [None, 7, None, 3, 14, None], None),
    # -- ChainedScheduler
    ("chained-constant-exponential-resumed", ["ChainedScheduler", {"schedulers": [
        ["ConstantLR", {"factor": 0.1, "total_iters": 2}], ["ExponentialLR", {"gamma": 0.9}]]}], "SGD", steps(10), 4),
    ("chained-multiplicative-polynomial", ["ChainedScheduler", {"schedulers": [
        ["MultiplicativeLR", {"lr_lambda": "mul095"}], ["PolynomialLR", {"total_iters": 5, "power": 2.0}]]}], "Adam",
     steps(9), None),
    ("chained-three", ["ChainedScheduler", {"schedulers": [
        ["ConstantLR", {"factor": 0.5, "total_iters": 3}], ["StepLR", {"step_size": 2, "gamma": 0.5}],
        ["LinearLR", {"start_factor": 0.2, "total_iters": 4}]]}], "SGD", steps(10), 5),
    # -- SequentialLR composing the new ones
    ("sequential-constant-polynomial-resumed", ["SequentialLR", {"schedulers": [
        ["ConstantLR", {"factor": 0.5, "total_iters": 2}], ["PolynomialLR", {"total_iters": 4, "power": 2.0}]],
        "milestones": [3]}], "SGD", steps(10), 5),
    ("sequential-linear-warm-restarts", ["SequentialLR", {"schedulers": [
        ["LinearLR", {"start_factor": 0.1, "total_iters": 3}],
        ["CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2}]],
        "milestones": [3]}], "SGD", steps(16), None),
    ("sequential-chained-multiplicative", ["SequentialLR", {"schedulers": [
        ["ChainedScheduler", {"schedulers": [["ConstantLR", {"factor": 0.5, "total_iters": 2}],
                                             ["ExponentialLR", {"gamma": 0.9}]]}],
        ["MultiplicativeLR", {"lr_lambda": "mul095"}]], "milestones": [4]}], "SGD", steps(9), 6),
    ("sequential-exponential-cyclic", ["SequentialLR", {"schedulers": [
        ["ExponentialLR", {"gamma": 0.5}], ["CyclicLR", {"base_lr": 0.01, "max_lr": 0.05, "step_size_up": 2}]],
        "milestones": [3]}], "SGD", steps(12), None),
    # -- the schedulers rtxviz had: more argument sets, state_dict round trips, step(epoch) between steps
    ("step-resumed", ["StepLR", {"step_size": 3, "gamma": 0.5}], "SGD", steps(12), 5),
    ("multistep-resumed", ["MultiStepLR", {"milestones": [2, 4, 4, 7]}], "SGD", steps(10), 3),
    ("exponential-resumed-adam", ["ExponentialLR", {"gamma": 0.7}], "Adam", steps(8), 3),
    ("exponential-epochs", ["ExponentialLR", {"gamma": 0.8}], "SGD", [None, 4, None, 0, None], None),
    ("linear-to-zero-resumed", ["LinearLR", {"start_factor": 0.5, "end_factor": 0.0, "total_iters": 4}], "SGD",
     steps(8), 2),
    ("linear-epochs", ["LinearLR", {"start_factor": 0.2, "total_iters": 5}], "SGD", [None, 3, None, None, 1, None],
     None),
    ("cosine-resumed", ["CosineAnnealingLR", {"T_max": 4, "eta_min": 0.005}], "SGD", steps(14), 6),
    ("cosine-epochs", ["CosineAnnealingLR", {"T_max": 6}], "SGD", [None, None, 5, None, None, 1, None], None),
    ("lambda-resumed", ["LambdaLR", {"lr_lambda": ["warmup4", "wave"]}], "SGD", steps(10), 4),
    ("one-cycle-three-phase-resumed", ["OneCycleLR", {"max_lr": [0.5, 0.2], "total_steps": 12, "three_phase": True}],
     "SGD", steps(12), 5),
    ("one-cycle-adam-resumed", ["OneCycleLR", {"max_lr": 0.01, "total_steps": 10, "pct_start": 0.4}], "Adam",
     steps(10), 3),
    ("plateau-resumed", ["ReduceLROnPlateau", {"patience": 1, "factor": 0.5, "cooldown": 1}], "SGD",
     [{"metric": m} for m in [3.0, 2.0, 2.5, 2.6, 2.7, 1.0, 1.5, 1.6, 1.7, 1.8, 0.5, 0.6]], 6),
    ("sequential-step-multistep-resumed", ["SequentialLR", {"schedulers": [
        ["StepLR", {"step_size": 2, "gamma": 0.5}], ["MultiStepLR", {"milestones": [1, 3], "gamma": 0.2}]],
        "milestones": [4]}], "SGD", steps(10), 5),
]


def make(opt, spec: list):
    """The torch scheduler a spec describes, on `opt`."""
    name, cfg = spec
    cfg = dict(cfg)
    lrs = torch.optim.lr_scheduler
    if name in ("LambdaLR", "MultiplicativeLR"):
        fn = cfg.pop("lr_lambda")
        cfg["lr_lambda"] = [LAMBDAS[f] for f in fn] if isinstance(fn, list) else LAMBDAS[fn]
    if name == "CyclicLR" and "scale_fn" in cfg:
        cfg["scale_fn"] = SCALE_FNS[cfg["scale_fn"]]
    if name == "SequentialLR":
        inner = [make(opt, s) for s in cfg.pop("schedulers")]
        return lrs.SequentialLR(opt, inner, **cfg)
    if name == "ChainedScheduler":
        return lrs.ChainedScheduler([make(opt, s) for s in cfg.pop("schedulers")], optimizer=opt)
    return getattr(lrs, name)(opt, **cfg)


def optimizer(kind: str, group_lrs: list):
    a, b = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    groups = [{"params": [a], "lr": group_lrs[0]}, {"params": [b], "lr": group_lrs[1]}]
    opt = torch.optim.SGD(groups, momentum=0.9) if kind == "SGD" else torch.optim.Adam(groups)
    return opt, [a, b]


def record(opt, sched) -> dict:
    entry = {"lrs": [float(g["lr"]) for g in opt.param_groups],
             "last_lr": [float(v) for v in sched.get_last_lr()],
             "momenta": [float(g["betas"][0] if "betas" in g else g["momentum"]) for g in opt.param_groups],
             "last_epoch": getattr(sched, "last_epoch", None)}
    if isinstance(sched, torch.optim.lr_scheduler.CosineAnnealingWarmRestarts):
        entry["T_cur"], entry["T_i"] = sched.T_cur, sched.T_i
    return entry


def run_case(spec: list, kind: str, actions: list, resume_at: int | None) -> list:
    opt, params = optimizer(kind, GROUP_LRS)
    sched = make(opt, spec)
    out = [record(opt, sched)]
    for i, action in enumerate(actions):
        if i == resume_at:
            saved_opt, saved_sched = opt.state_dict(), sched.state_dict()
            opt, params = optimizer(kind, RESUME_LRS)
            sched = make(opt, spec)
            opt.load_state_dict(saved_opt)
            sched.load_state_dict(saved_sched)
        for p in params:
            p.grad = torch.ones_like(p)
        opt.step()
        if action is None:
            sched.step()
        elif isinstance(action, dict):
            sched.step(action["metric"])
        else:
            sched.step(action)
        out.append(record(opt, sched))
    return out


def main() -> None:
    cases = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # step(epoch) is deprecated in PyTorch; these record what it does
        for case_id, spec, kind, actions, resume_at in CASES:
            cases.append({"id": case_id, "spec": spec, "optimizer": kind, "group_lrs": GROUP_LRS,
                          "resume_lrs": RESUME_LRS, "actions": actions, "resume_at": resume_at,
                          "records": run_case(spec, kind, actions, resume_at)})
    OUT.write_text(json.dumps({"torch_version": torch.__version__, "cases": cases}, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
