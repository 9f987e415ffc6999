"""Generate tests/nn/data/optim_reference.json with PyTorch (run by hand, never by the tests):

    /tmp/torchvenv/bin/python tests/nn/make_optim_reference.py

Fixed parameters and a fixed sequence of gradients (drawn here with numpy and stored) go through each PyTorch
optimizer config; the parameter after every step is stored. Also: learning rates of the schedulers per epoch,
clip_grad_norm_ results, and forwards/backwards of a few modules and losses with given weights.

The second set ("optimizers_v2", "lbfgs", "schedulers_v2"): Adagrad, NAdam, RAdam and more configs of the first
four, each with the state PyTorch kept after the last step and its state_dict after step 3 (tensors as lists);
LBFGS on fixed functions (closure call counts, the loss each step returned, its state_dict after step 1);
every scheduler's lr (and momentum) per epoch on two parameter groups; `step(epoch)`'s closed forms
("schedulers_closed_form").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = Path(__file__).parent / "data" / "optim_reference.json"
STEPS = 6
rng = np.random.default_rng(1234)
SHAPES = [(3, 4), (5,)]
INIT = [rng.standard_normal(s) for s in SHAPES]
GRADS = [[rng.standard_normal(s) for s in SHAPES] for _ in range(STEPS)]

OPTIMIZERS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.05}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.02, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1, "amsgrad": True}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.03, "weight_decay": 0.1, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.01}),
    ("RMSprop", {"lr": 0.02, "alpha": 0.9, "momentum": 0.5, "eps": 1e-6}),
]


def arr(t: torch.Tensor) -> list:
    return t.detach().cpu().numpy().tolist()


def optimizer_cases(dtype: torch.dtype) -> list:
    cases = []
    for name, cfg in OPTIMIZERS:
        params = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in INIT]
        kwargs = dict(cfg)
        if "betas" in kwargs:
            kwargs["betas"] = tuple(kwargs["betas"])
        opt = getattr(torch.optim, name)(params, foreach=False, **kwargs)
        traj = []
        for step in range(STEPS):
            for p, g in zip(params, GRADS[step], strict=True):
                p.grad = torch.tensor(g, dtype=dtype)
            opt.step()
            traj.append([arr(p) for p in params])
        cases.append({"optimizer": name, "config": cfg, "dtype": str(dtype).split(".")[1], "trajectory": traj})
    return cases


def scheduler_cases() -> list:
    out = []
    for name, cfg, epochs in [("StepLR", {"step_size": 3, "gamma": 0.5}, 12),
                              ("CosineAnnealingLR", {"T_max": 5, "eta_min": 0.001}, 16),
                              ("CosineAnnealingLR", {"T_max": 7}, 10)]:
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=0.1)
        sched = getattr(torch.optim.lr_scheduler, name)(opt, **cfg)
        lrs = []
        for _ in range(epochs):
            lrs.append(sched.get_last_lr()[0])
            opt.step()
            sched.step()
        out.append({"scheduler": name, "config": cfg, "base_lr": 0.1, "lrs": lrs})
    return out


def clip_cases() -> list:
    out = []
    for max_norm, norm_type in [(1.0, 2.0), (100.0, 2.0), (0.5, float("inf")), (2.0, 1.0)]:
        params = [torch.zeros(s, requires_grad=True) for s in SHAPES]
        for p, g in zip(params, GRADS[0], strict=True):
            p.grad = torch.tensor(g)
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
        out.append({"max_norm": max_norm, "norm_type": "inf" if norm_type == float("inf") else norm_type,
                    "total_norm": float(total), "grads": [arr(p.grad) for p in params]})
    return out


OPTIMIZERS_V2 = [
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.05, "lr_decay": 0.1, "weight_decay": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-6}),
    ("Adagrad", {"lr": 0.1, "maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.02, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("RAdam", {"lr": 0.01}),
    ("RAdam", {"lr": 0.02, "betas": [0.8, 0.9], "eps": 1e-6, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("Adam", {"lr": 0.01, "maximize": True}),
    ("Adam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("AdamW", {"lr": 0.01, "amsgrad": True, "maximize": True}),
    ("RMSprop", {"lr": 0.01, "centered": True, "maximize": True}),
]
STEPS_V2 = 8  # RAdam rectifies from step 5 (β₂ = 0.999) or 6 (β₂ = 0.9): both sides are seen
GRADS_V2 = [[rng.standard_normal(s) for s in SHAPES] for _ in range(STEPS_V2)]  # drawn after the first set
TORCH_ONLY_GROUP_KEYS = {"foreach", "capturable", "differentiable", "fused"}


def jsonable_state(state_dict: dict) -> dict:
    """A torch optimizer state_dict with tensors as lists and numbers as floats (JSON keys are strings)."""
    def value(v):
        if isinstance(v, torch.Tensor):
            return v.item() if v.ndim == 0 else arr(v)
        if isinstance(v, (tuple, list)):  # betas; LBFGS's history (lists of tensors)
            return [value(x) for x in v]
        return v
    return {"state": {str(k): {n: value(v) for n, v in st.items()} for k, st in state_dict["state"].items()},
            "param_groups": [{k: value(v) for k, v in g.items() if k not in TORCH_ONLY_GROUP_KEYS}
                             for g in state_dict["param_groups"]]}


def optimizer_cases_v2(dtype: torch.dtype, configs: list) -> list:
    cases = []
    for name, cfg in configs:
        params = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in INIT]
        kwargs = dict(cfg)
        if "betas" in kwargs:
            kwargs["betas"] = tuple(kwargs["betas"])
        opt = getattr(torch.optim, name)(params, foreach=False, **kwargs)
        traj, after3 = [], None
        for step in range(STEPS_V2):
            for p, g in zip(params, GRADS_V2[step], strict=True):
                p.grad = torch.tensor(g, dtype=dtype)
            opt.step()
            traj.append([arr(p) for p in params])
            if step == 2:
                after3 = jsonable_state(opt.state_dict())
        final = jsonable_state(opt.state_dict())
        cases.append({"optimizer": name, "config": cfg, "dtype": str(dtype).split(".")[1], "trajectory": traj,
                      "state_after_3": after3, "final_state": final["state"],
                      "group_keys": sorted(final["param_groups"][0])})
    return cases


def rosenbrock(x: torch.Tensor) -> torch.Tensor:
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


LBFGS_FUNCTIONS = {
    # one parameter, the classic valley; start (-1.5, 2)
    "rosenbrock": {"init": [[-1.5, 2.0]]},
    # two parameters coupled: sum(a·(p1 − c)²) + sum((p2 − 0.5)⁴) + 0.1·(sum(p1)·sum(p2))², a > 0 from the data
    "coupled": {"init": [a.tolist() for a in INIT]},
}
LBFGS_A = (1.0 + np.abs(np.random.default_rng(99).standard_normal(SHAPES[0]))).tolist()
LBFGS_C = np.random.default_rng(100).standard_normal(SHAPES[0]).tolist()


def lbfgs_loss(name: str, params: list) -> torch.Tensor:
    if name == "rosenbrock":
        return rosenbrock(params[0])
    p1, p2 = params
    a, c = torch.tensor(LBFGS_A), torch.tensor(LBFGS_C)
    return (a * (p1 - c) ** 2).sum() + ((p2 - 0.5) ** 4).sum() + 0.1 * (p1.sum() * p2.sum()) ** 2


LBFGS_CONFIGS = [
    ("rosenbrock", {"lr": 0.1}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe", "max_iter": 7, "history_size": 2, "max_eval": 9}),
    ("coupled", {}),
    ("coupled", {"lr": 0.5, "max_iter": 5, "history_size": 3}),
    ("coupled", {"line_search_fn": "strong_wolfe", "max_iter": 4}),
    ("coupled", {"line_search_fn": "strong_wolfe", "tolerance_change": 1e-3, "tolerance_grad": 1e-2}),
    # the line search's other paths: extrapolating from a short first step, running out of evaluations while
    # extrapolating, and zooming with long steps
    ("coupled", {"lr": 0.01, "line_search_fn": "strong_wolfe", "max_iter": 3}),
    ("rosenbrock", {"lr": 0.001, "line_search_fn": "strong_wolfe", "max_eval": 6}),
    ("rosenbrock", {"lr": 5.0, "line_search_fn": "strong_wolfe"}),
    ("coupled", {"lr": 20.0, "line_search_fn": "strong_wolfe", "history_size": 4}),
]
LBFGS_STEPS = 3


def lbfgs_cases() -> list:
    cases = []
    for fn, cfg in LBFGS_CONFIGS:
        params = [torch.tensor(a, requires_grad=True) for a in LBFGS_FUNCTIONS[fn]["init"]]
        opt = torch.optim.LBFGS(params, **cfg)
        calls = [0]

        def closure(params=params, opt=opt, calls=calls, fn=fn):
            calls[0] += 1
            opt.zero_grad()
            loss = lbfgs_loss(fn, params)
            loss.backward()
            return loss

        steps, after1 = [], None
        for i in range(LBFGS_STEPS):
            loss = opt.step(closure)
            if i == 0:
                after1 = jsonable_state(opt.state_dict())
            st = opt.state[params[0]]
            steps.append({"params": [arr(p) for p in params], "loss": float(loss.detach()), "closure_calls": calls[0],
                          "func_evals": st["func_evals"], "n_iter": st["n_iter"]})
        cases.append({"function": fn, "config": cfg, "init": LBFGS_FUNCTIONS[fn]["init"], "steps": steps,
                      "state_keys": sorted(opt.state[params[0]]), "state_after_1": after1})
    return cases


LAMBDAS = {"pow095": lambda e: 0.95**e, "warmup4": lambda e: min(1.0, (e + 1) / 4),
           "wave": lambda e: 1.0 + 0.5 * np.sin(e)}
GROUP_LRS = [0.1, 0.04]  # two parameter groups


def make_scheduler(opt, name: str, cfg: dict):
    lrs = torch.optim.lr_scheduler
    if name == "LambdaLR":
        fn = cfg["lr_lambda"]
        return lrs.LambdaLR(opt, [LAMBDAS[f] for f in fn] if isinstance(fn, list) else LAMBDAS[fn])
    if name == "SequentialLR":
        inner = [make_scheduler(opt, n, c) for n, c in cfg["schedulers"]]
        return lrs.SequentialLR(opt, inner, milestones=cfg["milestones"])
    return getattr(lrs, name)(opt, **cfg)


SCHEDULERS_V2 = [  # (scheduler, config, optimizer, epochs)
    ("LambdaLR", {"lr_lambda": "pow095"}, "SGD", 10),
    ("LambdaLR", {"lr_lambda": ["warmup4", "wave"]}, "SGD", 10),
    ("MultiStepLR", {"milestones": [2, 5, 5, 8], "gamma": 0.5}, "SGD", 12),
    ("ExponentialLR", {"gamma": 0.9}, "SGD", 10),
    ("LinearLR", {"start_factor": 0.25, "total_iters": 4}, "SGD", 8),
    ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 5}, "SGD", 8),
    ("SequentialLR", {"schedulers": [["LinearLR", {"start_factor": 0.1, "total_iters": 3}],
                                     ["ExponentialLR", {"gamma": 0.8}]], "milestones": [3]}, "SGD", 10),
    ("SequentialLR", {"schedulers": [["ExponentialLR", {"gamma": 0.9}], ["CosineAnnealingLR", {"T_max": 4}],
                                     ["StepLR", {"step_size": 2, "gamma": 0.5}]], "milestones": [2, 6]},
     "SGD", 12),
    ("CosineAnnealingLR", {"T_max": 3, "eta_min": 0.01}, "SGD", 12),
    ("StepLR", {"step_size": 2, "gamma": 0.3}, "SGD", 7),
    ("OneCycleLR", {"max_lr": 1.0, "total_steps": 20}, "SGD", 20),
    ("OneCycleLR", {"max_lr": [1.0, 0.3], "total_steps": 15, "anneal_strategy": "linear", "three_phase": True,
                    "pct_start": 0.25}, "SGD", 15),
    ("OneCycleLR", {"max_lr": 0.01, "epochs": 3, "steps_per_epoch": 4, "base_momentum": 0.8,
                    "max_momentum": 0.9, "div_factor": 10.0, "final_div_factor": 100.0}, "Adam", 12),
    ("OneCycleLR", {"max_lr": 0.5, "total_steps": 9, "cycle_momentum": False, "pct_start": 0.5}, "Adam", 9),
]
PLATEAU_METRICS = [5.0, 4.0, 4.0, 3.9999, 4.1, 4.2, 3.0, 3.0, 3.1, 2.99, 2.999, 3.5, 3.6, 3.7, 3.8, 2.0, 2.1,
                   2.2, 2.3, 2.4, 2.5, 2.6]
PLATEAU_CONFIGS = [
    {},
    {"patience": 2},
    {"patience": 1, "factor": 0.5, "cooldown": 2, "threshold": 0.1, "threshold_mode": "abs"},
    {"mode": "max", "patience": 1, "factor": 0.5, "min_lr": [0.01, 0.02], "threshold": 0.01},
    {"mode": "max", "patience": 0, "factor": 0.3, "threshold_mode": "abs", "threshold": 0.0, "min_lr": 0.005,
     "eps": 0.002},
]


def _two_group_optimizer(kind: str):
    a, b = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    groups = [{"params": [a], "lr": GROUP_LRS[0]}, {"params": [b], "lr": GROUP_LRS[1]}]
    opt = torch.optim.SGD(groups, momentum=0.9) if kind == "SGD" else torch.optim.Adam(groups)
    return opt, [a, b]


def _momenta(opt) -> list:
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


def scheduler_cases_v2() -> list:
    out = []
    for name, cfg, kind, epochs in SCHEDULERS_V2:
        opt, params = _two_group_optimizer(kind)
        sched = make_scheduler(opt, name, cfg)
        lrs, momenta = [], []
        for _ in range(epochs):
            lrs.append(list(sched.get_last_lr()))
            momenta.append(_momenta(opt))
            for p in params:
                p.grad = torch.ones_like(p)
            opt.step()
            sched.step()
        out.append({"scheduler": name, "config": cfg, "optimizer": kind, "group_lrs": GROUP_LRS, "lrs": lrs,
                    "momenta": momenta})
    for cfg in PLATEAU_CONFIGS:
        opt, _ = _two_group_optimizer("SGD")
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **cfg)
        lrs = []
        for m in PLATEAU_METRICS:
            sched.step(m)
            lrs.append(list(sched.get_last_lr()))
        out.append({"scheduler": "ReduceLROnPlateau", "config": cfg, "optimizer": "SGD", "group_lrs": GROUP_LRS,
                    "metrics": PLATEAU_METRICS, "lrs": lrs})
    return out


CLOSED_FORM = [("StepLR", {"step_size": 2, "gamma": 0.5}), ("MultiStepLR", {"milestones": [1, 3, 3], "gamma": 0.5}),
               ("ExponentialLR", {"gamma": 0.8}), ("LinearLR", {"start_factor": 0.2, "total_iters": 4}),
               ("CosineAnnealingLR", {"T_max": 6, "eta_min": 0.001})]
CLOSED_FORM_EPOCHS = [4, 2, 7, 7, 0, 3]


def closed_form_cases() -> list:
    """lrs after scheduler.step(epoch) (deprecated in PyTorch: the closed forms) for a sequence of epochs."""
    import warnings
    out = []
    for name, cfg in CLOSED_FORM:
        opt, _ = _two_group_optimizer("SGD")
        sched = getattr(torch.optim.lr_scheduler, name)(opt, **cfg)
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in CLOSED_FORM_EPOCHS:
                sched.step(e)
                lrs.append(list(sched.get_last_lr()))
        out.append({"scheduler": name, "config": cfg, "group_lrs": GROUP_LRS, "epochs": CLOSED_FORM_EPOCHS,
                    "lrs": lrs})
    return out


def _leaf(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, requires_grad=True)


def module_cases() -> dict:
    """Forward outputs and gradients of sum(out * R) for given weights (R random, stored)."""
    r = np.random.default_rng(7)
    cases = {}

    def record(name: str, inputs: dict, fn, **attrs):
        leaves = {k: _leaf(v) for k, v in inputs.items() if np.issubdtype(np.asarray(v).dtype, np.floating)}
        consts = {k: torch.tensor(v) for k, v in inputs.items() if k not in leaves}
        out = fn(**leaves, **consts)
        weight = r.standard_normal(tuple(out.shape))
        (out * torch.tensor(weight)).sum().backward()
        cases[name] = {"inputs": {k: np.asarray(v).tolist() for k, v in inputs.items()}, "attrs": attrs,
                       "out": arr(out), "out_weight": weight.tolist(),
                       "grads": {k: arr(t.grad) for k, t in leaves.items()}}

    x2 = r.standard_normal((4, 5))
    record("linear", {"x": x2, "weight": r.standard_normal((3, 5)), "bias": r.standard_normal(3)},
           lambda x, weight, bias: F.linear(x, weight, bias))
    x4 = r.standard_normal((2, 3, 6, 6))
    record("conv2d_pad1", {"x": x4, "weight": r.standard_normal((4, 3, 3, 3)), "bias": r.standard_normal(4)},
           lambda x, weight, bias: F.conv2d(x, weight, bias, stride=1, padding=1), stride=1, padding=1)
    record("conv2d_stride2", {"x": x4, "weight": r.standard_normal((2, 3, 2, 2)), "bias": r.standard_normal(2)},
           lambda x, weight, bias: F.conv2d(x, weight, bias, stride=2, padding=0), stride=2, padding=0)
    record("max_pool2d", {"x": x4}, lambda x: F.max_pool2d(x, 2), kernel_size=2)
    record("avg_pool2d", {"x": x4}, lambda x: F.avg_pool2d(x, 2), kernel_size=2)
    record("layer_norm", {"x": r.standard_normal((2, 3, 5)), "weight": r.standard_normal(5),
                          "bias": r.standard_normal(5)},
           lambda x, weight, bias: F.layer_norm(x, (5,), weight, bias, 1e-5), eps=1e-5)
    record("embedding", {"idx": np.array([[0, 2, 1], [3, 3, 0]]), "weight": r.standard_normal((4, 3))},
           lambda weight, idx: F.embedding(idx, weight))
    logits = r.standard_normal((5, 4))
    target = np.array([0, 3, 1, 1, 2])
    for red in ("mean", "sum", "none"):
        record(f"cross_entropy_{red}", {"x": logits, "target": target},
               lambda x, target, red=red: F.cross_entropy(x, target, reduction=red), reduction=red)
        record(f"nll_loss_{red}", {"x": np.log(np.abs(logits) / np.abs(logits).sum(1, keepdims=True)),
                                   "target": target},
               lambda x, target, red=red: F.nll_loss(x, target, reduction=red), reduction=red)
        y = r.standard_normal((3, 4))
        record(f"mse_loss_{red}", {"x": r.standard_normal((3, 4)), "y": y},
               lambda x, y, red=red: F.mse_loss(x, y, reduction=red), reduction=red)
        record(f"l1_loss_{red}", {"x": r.standard_normal((3, 4)), "y": y},
               lambda x, y, red=red: F.l1_loss(x, y, reduction=red), reduction=red)
        record(f"bce_with_logits_{red}", {"x": 3 * r.standard_normal((3, 4)), "y": r.random((3, 4))},
               lambda x, y, red=red: F.binary_cross_entropy_with_logits(x, y, reduction=red), reduction=red)
    return cases


def main() -> None:
    doc = {
        "generator": f"tests/nn/make_optim_reference.py with torch {torch.__version__} (foreach=False)",
        "shapes": SHAPES,
        "init": [a.tolist() for a in INIT],
        "grads": [[g.tolist() for g in step] for step in GRADS],
        "optimizers": optimizer_cases(torch.float64) + optimizer_cases(torch.float32)[:2] +
        optimizer_cases(torch.float32)[5:6],
        "schedulers": scheduler_cases(),
        "clip_grad_norm": clip_cases(),
        "modules": module_cases(),
        "grads_v2": [[g.tolist() for g in step] for step in GRADS_V2],
        "optimizers_v2": optimizer_cases_v2(torch.float64, OPTIMIZERS_V2) +
        optimizer_cases_v2(torch.float32, [OPTIMIZERS_V2[i] for i in (1, 4, 7)]),
        "lbfgs": lbfgs_cases(),
        "lbfgs_functions": {"coupled_a": LBFGS_A, "coupled_c": LBFGS_C},
        "schedulers_v2": scheduler_cases_v2(),
        "schedulers_closed_form": closed_form_cases(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc))
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
