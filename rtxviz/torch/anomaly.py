"""`detect_anomaly()` for PyTorch: stop at the first op that makes NaN or Inf, in forward *or* backward, naming
the op and the line of your code that ran it.

PyTorch's own `torch.autograd.detect_anomaly` checks only what backward functions return, so a value that went
bad in forward is blamed on whichever backward first turns it into a NaN gradient, often far from the cause (and
an Inf that never makes a NaN gradient is never reported). Here a TorchFunctionMode checks every floating output
of every torch call as forward runs; a hook on each node of the graph checks the gradients it sends back.

>>> import torch
>>> x = torch.tensor([0.0, 1.0], requires_grad=True)
>>> try:
...     with detect_anomaly():
...         y = x.log()
... except AnomalyError as e:
...     print(e.op, e.phase, e.nan, e.inf)
log forward 0 1
"""

from __future__ import annotations

import os
import traceback
from functools import partial
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..debug import AnomalyError, Site
from .names import ACCUMULATE_GRAD, op_from_function, op_from_grad_fn
from .recorder import _BACKWARDS, ATTACHED, _tensors

_TORCH_DIR = os.path.dirname(torch.__file__)
_RTXVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_site() -> Site | None:
    """The innermost frame of the caller's own code: not inside torch, not inside rtxviz."""
    for frame in reversed(traceback.extract_stack()):
        f = os.path.abspath(frame.filename)
        if f.startswith(_TORCH_DIR) or f.startswith(_RTXVIZ_DIR) or f.startswith("<frozen"):
            continue
        return Site(frame.filename, frame.lineno or 0, frame.name)
    return None


def _counts(t: torch.Tensor) -> tuple[int, int]:
    with torch._C.DisableTorchFunction():
        if bool(torch.isfinite(t).all()):
            return 0, 0
        return int(torch.isnan(t).sum()), int(torch.isinf(t).sum())


def _stats(t: Any) -> dict | None:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        return None
    with torch._C.DisableTorchFunction():
        d = t.detach().double()
        fin = d[torch.isfinite(d)]
        out = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
               "nan": int(torch.isnan(d).sum()), "inf": int(torch.isinf(d).sum())}
        if fin.numel():
            out.update(min=float(fin.min()), max=float(fin.max()), mean=float(fin.mean()))
        return out


def _describe_inputs(stats: list[dict | None]) -> str:
    lines = []
    for i, s in enumerate(stats):
        if s is None:
            continue
        text = f"  input {i}: shape {s['shape']} {s['dtype']}"
        if "min" in s:
            text += f", min {s['min']:.4g}, max {s['max']:.4g}, mean {s['mean']:.4g}"
        if s["nan"] or s["inf"]:
            text += f", {s['nan']} NaN, {s['inf']} Inf"
        lines.append(text)
    return "\n".join(lines)


class _AnomalyMode(TorchFunctionMode):
    def __init__(self, owner: detect_anomaly) -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        owner = self.owner
        if func in _BACKWARDS:
            if owner.backward:
                owner.hook_graph([t.grad_fn for t in _tensors(args[0] if args else ()) if t.grad_fn is not None])
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if owner.forward:
            for t in _tensors(out):
                if t.is_floating_point() or t.is_complex():
                    nan, inf = _counts(t)
                    if nan or inf:
                        owner.forward_anomaly(op_from_function(getattr(func, "__name__", "op")), func, t, args,
                                              kwargs, nan, inf)
        site = None
        for t in _tensors(out):
            if t.grad_fn is not None and t.grad_fn not in owner.sites:
                site = site or user_site()
                owner.sites[t.grad_fn] = (op_from_function(getattr(func, "__name__", "op")), site)
        return out


class detect_anomaly:
    """Context manager: the first NaN/Inf produced raises `AnomalyError` (from `rtxviz.debug`) naming the op, the
    phase, and your file and line (for a backward finding: where forward ran that op).

    forward / backward: which checks run. Attributes of the error: `op`, `phase`, `site` (file, line, function,
    code), `nan`, `inf`, `inputs` (statistics per input)."""

    def __init__(self, forward: bool = True, backward: bool = True) -> None:
        self.forward, self.backward = forward, backward
        self.sites: dict[Any, tuple[str, Site | None]] = {}
        self._mode: _AnomalyMode | None = None
        self._handles: list[Any] = []
        self._hooked: set = set()

    def __enter__(self) -> detect_anomaly:
        self._mode = _AnomalyMode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._hooked.clear()
        self.sites.clear()

    def forward_anomaly(self, op: str, func: Any, out: torch.Tensor, args: tuple, kwargs: dict, nan: int,
                        inf: int) -> None:
        """Raise AnomalyError for `out`, made by `func` with NaN/Inf; watched runs are told first (their page
        marks the node and lists the message)."""
        site = user_site()
        ins = [_stats(a) for a in (*args, *kwargs.values())]
        bad = [i for i, s in enumerate(ins) if s is not None and (s["nan"] or s["inf"])]
        for rec in ATTACHED:
            rec.forward_anomaly(op, func, out, nan, inf, bad, site)
        where = f" at {site.short}" if site is not None else ""
        cause = (f"from input(s) {bad} that already held NaN/Inf" if bad else "from finite inputs")
        code = f"\n    {site.line}" if site is not None and site.line else ""
        msg = (f"detect_anomaly: forward of {op}{where} produced {nan} NaN and {inf} Inf {cause}{code}\n"
               f"{_describe_inputs(ins)}")
        raise AnomalyError(msg, op, "forward", site, None, nan, inf, ins)

    def hook_graph(self, roots: list) -> None:
        todo, seen = list(roots), self._hooked
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.add(fn)
            if fn.name() != ACCUMULATE_GRAD:
                op, site = self.sites.get(fn, (op_from_grad_fn(fn.name()), None))
                # the node's id, not the node: the node holds its hooks (a cycle C++ keeps alive); nodes cannot
                # be weakly referenced
                self._handles.append(fn.register_hook(partial(self._check_grads, op, site, fn.name(), id(fn))))
            todo.extend(c for c, _ in fn.next_functions if c is not None)

    def _check_grads(self, op: str, site: Site | None, grad_fn: str, node: int, grad_inputs: tuple,
                     grad_outputs: tuple) -> None:
        bad = []
        nan = inf = 0
        for i, g in enumerate(grad_inputs):
            if g is not None and g.is_floating_point():
                n, f = _counts(g)
                if n or f:
                    bad.append(i)
                    nan, inf = nan + n, inf + f
        if not bad:
            return
        outs_bad = any(g is not None and g.is_floating_point() and any(_counts(g)) for g in grad_outputs)
        for rec in ATTACHED:
            rec.backward_anomaly(node, op, grad_inputs, grad_outputs, bad, nan, inf, not outs_bad, site)
        where = f" (forward at {site.short})" if site is not None else ""
        cause = "from a NaN/Inf output gradient" if outs_bad else "from a finite output gradient"
        msg = (f"detect_anomaly: backward of {op} ({grad_fn}){where} produced {nan} NaN and {inf} Inf gradients "
               f"for input(s) {bad} {cause}")
        raise AnomalyError(msg, op, "backward", site, None, nan, inf, [_stats(g) for g in grad_inputs])


__all__ = ["AnomalyError", "detect_anomaly", "user_site"]
