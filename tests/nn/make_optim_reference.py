"""Generate tests/nn/data/optim_reference.json with PyTorch (run by hand, never by the tests):

    /tmp/torchvenv/bin/python tests/nn/make_optim_reference.py

Fixed parameters and a fixed sequence of gradients (drawn here with numpy and stored) go through each PyTorch
optimizer config; the parameter after every step is stored. Also: learning rates of the schedulers per epoch,
clip_grad_norm_ results, and forwards/backwards of a few modules and losses with given weights.
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
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc))
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
