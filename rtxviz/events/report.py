"""Reports that come from outside the engine: optimizer steps and gradient checks.

The training kit sits below the event stream, so an optimizer reports through the engine's hooks (and pays
one truth test when nothing is attached):

    def step(self):
        if hooks.ACTIVE: hooks.emit("optimizer_step_begin", optimizer=self)
        ...  # the update, in place on p.data
        if hooks.ACTIVE: hooks.emit("optimizer_step_end", optimizer=self)

The EventHook snapshots the parameters at begin and reports at end. Code that may import rtxviz.events can
instead wrap its update in ``with rtxviz.events.optimizer_step(params):``.

>>> from rtxviz import Tensor, Variable
>>> p = Variable.from_tensor(Tensor.from_slice([3.0, 4.0], [2]), name="w")
>>> with optimizer_step([p]):     # no run is watched: a no-op
...     p.data -= 1.0
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ..schema import MAX_PARAMS
from .emitter import _CURRENT, Run
from .fields import params_of as _params

_NULL = contextlib.nullcontext()


def _watched() -> Run | None:
    run = _CURRENT[-1] if _CURRENT else None
    return run if run is not None and run.recording else None


class _OptimizerStep:
    def __init__(self, run: Run, params: list, name: str) -> None:
        self.run, self.params, self.name = run, params, name

    def __enter__(self) -> _OptimizerStep:
        self.before = self.run.hook.optimizer.copy_params(self.params)
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is None:
            self.run.hook.optimizer.report_difference(self.params, self.before, [p.data for p in self.params],
                                                      self.name, before_owned=True)


def optimizer_step(params: Any, optimizer: Any = None) -> Any:
    """Context manager around an optimizer's in-place update: reports per-parameter gradient norm, parameter
    norm, update norm and update ratio (‖Δp‖ / ‖p‖) as one `optimizer_step` event.

    `params`: Variables, or an optimizer / module holding them. Copies each parameter before the update, only
    while a run is watched and the step is sampled; otherwise returns a shared no-op context.
    """
    run = _watched()
    if run is None:
        return _NULL
    name = type(optimizer if optimizer is not None else params).__name__
    return _OptimizerStep(run, _params(params)[:MAX_PARAMS], name)


def report_optimizer_step(params: Any, before: Sequence[Any], after: Sequence[Any] | None = None,
                          optimizer: str = "") -> None:
    """Report an update given the parameter arrays before and (default: now) after it."""
    run = _watched()
    if run is None:
        return
    ps = _params(params)[:MAX_PARAMS]
    run.hook.optimizer.report_difference(ps, before, after if after is not None else [p.data for p in ps], optimizer)


def snapshot(source: Any) -> tuple[list, list]:
    """(parameters, copies of their arrays) before an update."""
    params = _params(source)[:MAX_PARAMS]
    return params, [p.data.copy() for p in params]


def report_gradcheck(name: str, passed: bool, max_abs_error: float | None = None,
                     max_rel_error: float | None = None, **details: Any) -> None:
    """Report a gradient-check result to the current run (no-op when none). Extra details travel as fields.

    The engine's gradcheck can equally call ``hooks.emit("gradcheck", name=..., passed=..., ...)``.
    """
    run = _CURRENT[-1] if _CURRENT else None
    if run is None:
        return
    run.hook.event("gradcheck", name=str(name)[:200], passed=bool(passed), max_abs_error=max_abs_error,
                   max_rel_error=max_rel_error, **details)

