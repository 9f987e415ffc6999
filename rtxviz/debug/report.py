"""grad_report(): the health of a model's gradients, as text and as an event.

Per parameter: gradient norm, parameter norm, and (when the values before the optimizer step are known) the
ratio ‖update‖ / ‖weight‖; the fraction of dead ReLU units per module (units whose output was zero for every
sample of the last forward seen); the parameters that got no gradient.

Three ways to use it, from least to most information:

    rep = grad_report(model)                   # after backward: norms and parameters without gradient
                                               # (its text says how to get update ratios and dead ReLUs)

    with grad_report.track(model, opt) as rep: # around a step, or around the whole loop: adds dead ReLUs
        for x, y in loader:                    # (of the last forward) and update ratios (of the last
            loss = loss_fn(model(x), y)        # opt.step(): the values are copied as each step begins)
            opt.zero_grad(); loss.backward(); opt.step()
    print(rep.text())

    snap = grad_report.snapshot(model); opt.step()   # the explicit pair, when the step happens elsewhere
    rep = grad_report(model, before=snap)

>>> import rtxviz
>>> p = rtxviz.Variable.from_tensor(rtxviz.Tensor.from_slice([3.0, 4.0], [2]), name="w")
>>> (p * 2.0).sum().backward()
>>> grad_report([p]).params[0].grad_norm
2.8284271247461903
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine import hooks as _hooks
from ..summary import host
from ..summary import norm as _norm


def _values(x: Any) -> Any:
    """The values the summaries read: numpy/cupy arrays as they are; a PyTorch tensor (recognised by its
    methods: this layer never imports torch) as a NumPy array, so `grad_report(torch_model)` works too.

    >>> _values(np.ones(2)).tolist()
    [1.0, 1.0]
    """
    if isinstance(x, np.ndarray) or not (hasattr(x, "detach") and hasattr(x, "numpy")):
        return x
    x = x.detach()
    if str(x.dtype) in ("torch.bfloat16", "torch.float16"):
        x = x.float()  # numpy has no bfloat16; float16 norms overflow sooner than their values
    return x.cpu().numpy()


def named_params(source: Any) -> list[tuple[str, Any]]:
    """(name, Variable) pairs from a Module (`named_parameters`), a dict, (name, param) pairs, Variables, or an
    optimizer (`param_groups`)."""
    if hasattr(source, "named_parameters") and callable(source.named_parameters):
        return list(source.named_parameters())
    if isinstance(source, dict):
        return list(source.items())
    if hasattr(source, "param_groups"):
        source = [p for g in source.param_groups for p in g["params"]]
    out = []
    for i, item in enumerate(source):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            out.append(item)
        else:
            out.append((getattr(item, "name", None) or f"param{i}", item))
    return out


# -- dead ReLUs ----------------------------------------------------------------------------------------------
@dataclass
class ReluStat:
    """One ReLU site (a module path): units (features, all axes but the batch axis), dead ones, samples seen."""

    module: str
    units: int
    dead: int
    samples: int

    @property
    def fraction(self) -> float:
        return self.dead / self.units if self.units else 0.0


class ReluMonitor(_hooks.EngineHook):
    """Records, for every relu op run forward (outside backward), which units were zero for every sample.

    Keyed by the module path the op ran in (``<no module>`` outside modules); the last forward wins.
    The batch axis is axis 0 (a 1-d output is taken as one sample).
    """

    name = "rtxviz.relu_monitor"

    def __init__(self) -> None:
        self.sites: dict[str, ReluStat] = {}
        self._in_backward = 0

    def forward_postprocess(self, op: Any, node: Any, inputs: tuple, output: Any) -> None:
        if self._in_backward or getattr(op, "name", None) != "relu":
            return
        out = output.data
        alive = out != 0
        if out.ndim >= 2:
            per_unit = alive.any(axis=0)
            samples = int(out.shape[0])
        else:
            per_unit, samples = alive, 1
        units = int(per_unit.size)
        dead = units - int(per_unit.sum())
        from ..engine.grad_mode import STATE

        path = (node.module_path if node is not None else STATE.module_path) or "<no module>"
        self.sites[path] = ReluStat(path, units, dead, samples)

    def backward_begin(self, roots: list, create_graph: bool) -> None:
        self._in_backward += 1

    def backward_end(self) -> None:
        self._in_backward = max(0, self._in_backward - 1)

    def __enter__(self) -> ReluMonitor:
        _hooks.add_hook(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _hooks.remove_hook(self)


def relu_monitor() -> ReluMonitor:
    """`with relu_monitor() as relus:` around a forward; pass `relus=relus` to `grad_report`."""
    return ReluMonitor()


# -- snapshots ------------------------------------------------------------------------------------------------
@dataclass
class Snapshot:
    """Copies of parameter values (by id), taken before an optimizer step."""

    values: dict[int, Any]

    def before(self, p: Any) -> Any:
        return self.values.get(id(p))


def snapshot(model_or_params: Any) -> Snapshot:
    """Copy every parameter's value now (call right before `optimizer.step()`)."""
    return Snapshot({id(p): _values(p.data).copy() for _, p in named_params(model_or_params)})


# -- the report -----------------------------------------------------------------------------------------------
UPDATE_HINT = ("update ratio ‖Δ‖/‖p‖: pass before=grad_report.snapshot(model) taken before opt.step(), or use "
               "`with grad_report.track(model, opt) as rep:` around the step or the loop")
RELU_HINT = ("dead ReLU units: not watched; pass relus=... from `with grad_report.relu_monitor() as relus:` around "
             "the forward, or use grad_report.track")


@dataclass
class ParamRow:
    name: str
    shape: tuple
    grad_norm: float | None
    param_norm: float | None
    update_norm: float | None = None
    update_ratio: float | None = None
    has_grad: bool = True
    nonfinite_grad: bool = False


@dataclass
class GradReport:
    """The numbers; `text()` formats them, `emit()` sends them as a `grad_report` event."""

    params: list[ParamRow] = field(default_factory=list)
    relus: list[ReluStat] = field(default_factory=list)
    optimizer: str | None = None
    #: What the report could not know and how to get it (update ratios without a snapshot, ReLUs unwatched).
    notes: list[str] = field(default_factory=list)

    @property
    def unused(self) -> list[str]:
        """Names of the parameters that got no gradient."""
        return [r.name for r in self.params if not r.has_grad]

    def row(self, name: str) -> ParamRow:
        for r in self.params:
            if r.name == name:
                return r
        raise KeyError(f"grad_report: no parameter named {name!r}; have {[r.name for r in self.params]}")

    def dead_fraction(self, module: str) -> float:
        for s in self.relus:
            if s.module == module:
                return s.fraction
        raise KeyError(f"grad_report: no ReLU recorded in {module!r}; have {[s.module for s in self.relus]}")

    def text(self) -> str:
        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.3e}"

        width = max([len(r.name) for r in self.params] + [9])
        lines = [f"{'parameter':<{width}}  {'shape':<14} {'‖grad‖':>10} {'‖param‖':>10} {'‖Δ‖/‖p‖':>10}"]
        for r in self.params:
            g = "no grad" if not r.has_grad else ("NaN/Inf" if r.nonfinite_grad else f(r.grad_norm))
            lines.append(f"{r.name:<{width}}  {str(r.shape):<14} {g:>10} {f(r.param_norm):>10} "
                         f"{f(r.update_ratio):>10}")
        if self.relus:
            lines.append("dead ReLU units (zero for every sample of the last forward):")
            for s in self.relus:
                lines.append(f"  {s.module}: {s.dead}/{s.units} ({100 * s.fraction:.1f}%) over {s.samples} sample(s)")
        unused = self.unused
        lines.append("parameters with no gradient: " + (", ".join(unused) if unused else "none"))
        lines.extend(self.notes)
        return "\n".join(lines)

    __str__ = text

    def as_event_fields(self) -> dict[str, Any]:
        return {
            "params": [{"name": r.name, "shape": list(r.shape), "grad_norm": r.grad_norm,
                        "param_norm": r.param_norm, "update_ratio": r.update_ratio, "has_grad": r.has_grad}
                       for r in self.params[:1000]],
            "dead_relu": [{"module": s.module, "units": s.units, "dead": s.dead, "fraction": s.fraction}
                          for s in self.relus[:1000]],
            "unused": self.unused[:1000],
            "optimizer": self.optimizer,
            "notes": self.notes[:10],
        }

    def emit(self) -> None:
        """Send the report to every attached hook as a `grad_report` event (the stream's generic kind)."""
        if _hooks.ACTIVE:
            _hooks.emit("grad_report", **self.as_event_fields())


def grad_report(model_or_named_params: Any, optimizer: Any = None, before: Snapshot | None = None,
                relus: ReluMonitor | None = None, emit: bool = True) -> GradReport:
    """Build the report from the parameters' current `.grad` and values.

    before: a `snapshot()` taken before the optimizer step (gives update norms and ratios); an optimizer alone
    cannot give them (the values before its step are gone), so without `before` the text says how to get them.
    relus: a ReluMonitor that watched the forward. emit: send a `grad_report` event when hooks are attached.
    For all of it in one go, wrap the step (or the loop) in ``with grad_report.track(model, opt) as rep:``.
    """
    rows = []
    for name, p in named_params(model_or_named_params):
        g = getattr(p, "grad", None)
        gd = None if g is None else _values(g.data)
        pd = _values(p.data)
        gn = _norm(gd)
        pn = _norm(pd)
        row = ParamRow(name, tuple(p.shape), gn, pn, has_grad=g is not None,
                       nonfinite_grad=g is not None and gn is None)
        if before is not None:
            b = before.before(p)
            if b is not None:
                row.update_norm = _norm(host(pd).astype(np.float64) - host(b).astype(np.float64))
                row.update_ratio = (row.update_norm / pn) if row.update_norm is not None and pn else None
        rows.append(row)
    rep = GradReport(rows, sorted(relus.sites.values(), key=lambda s: s.module) if relus is not None else [],
                     type(optimizer).__name__ if optimizer is not None else None)
    if before is None:
        rep.notes.append(UPDATE_HINT)
    if relus is None:
        rep.notes.append(RELU_HINT)
    if emit:
        rep.emit()
    return rep


class _Tracker(_hooks.EngineHook):
    """`with grad_report.track(model, opt) as rep:`: watches ReLUs, copies the parameters as each optimizer
    step begins (so the update ratios are those of the last step, whether the block holds one step or a whole
    loop), and fills `rep` on exit. With no optimizer given, any optimizer's step is watched; a step made by
    hand (no optimizer) is measured against the values at entry."""

    name = "rtxviz.grad_report.track"

    def __init__(self, model: Any, optimizer: Any = None, emit: bool = True) -> None:
        self.model, self.optimizer, self.emit = model, optimizer, emit
        self.report = GradReport()
        self.monitor = ReluMonitor()
        self.snap: Snapshot | None = None

    def event(self, kind: str, **fields: Any) -> None:
        if kind == "optimizer_step_begin":
            opt = fields.get("optimizer")
            if self.optimizer is None or opt is self.optimizer:
                self.snap = snapshot(self.model)
                if self.optimizer is None and opt is not None:
                    self.report.optimizer = type(opt).__name__

    def __enter__(self) -> GradReport:
        self.snap = snapshot(self.model)
        _hooks.add_hook(self.monitor)
        _hooks.add_hook(self)
        return self.report

    def __exit__(self, exc_type: Any = None, *exc: object) -> None:
        _hooks.remove_hook(self)
        _hooks.remove_hook(self.monitor)
        if exc_type is not None:
            return
        done = grad_report(self.model, self.optimizer, before=self.snap, relus=self.monitor, emit=self.emit)
        self.report.params, self.report.relus, self.report.notes = done.params, done.relus, done.notes
        self.report.optimizer = done.optimizer or self.report.optimizer


def track(model: Any, optimizer: Any = None, emit: bool = True) -> _Tracker:
    """Context manager around a training step or a whole loop (forward, backward, step): returns the
    GradReport, filled on exit, with dead ReLU fractions from the last forward inside and update ratios from
    the last optimizer step inside (the parameters are copied as that step begins)."""
    return _Tracker(model, optimizer, emit)


grad_report.track = track  # type: ignore[attr-defined]
grad_report.snapshot = snapshot  # type: ignore[attr-defined]
grad_report.relu_monitor = relu_monitor  # type: ignore[attr-defined]
