"""L-BFGS with an optional strong-Wolfe line search: PyTorch's algorithm, iteration for iteration.

`step(closure)` runs up to `max_iter` iterations (and at most `max_eval` closure calls): the closure clears the
gradients, computes the loss, calls backward and returns the loss, as in PyTorch.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Parameter
>>> x = Parameter(Tensor.from_slice([3.0, -2.0], [2], dtype="float64"))
>>> opt = LBFGS([x], line_search_fn="strong_wolfe")
>>> def closure():
...     opt.zero_grad()
...     loss = ((x - 1.0) ** 2).sum()  # minimum at (1, 1)
...     loss.backward()
...     return loss
>>> float(opt.step(closure))  # the loss at the start of the step
13.0
>>> [round(v, 6) for v in x.tolist()]
[1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..engine import hooks as _hooks
from ..engine import versions as _versions
from ..engine.device import xp_of
from ..engine.grad_mode import enable_grad
from ..engine.tensor import Tensor
from ..engine.variable import Variable
from .optimizer import Optimizer, _is_array
from .strong_wolfe import strong_wolfe


class LBFGS(Optimizer):
    """Limited-memory BFGS on all parameters as one flat vector (one parameter group, as PyTorch).

    The state (kept on the first parameter, as PyTorch: "func_evals", "n_iter", "d", "t", "old_dirs",
    "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss", "al") carries the curvature history from one
    `step` to the next.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1.0, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if not lr >= 0:
            raise ValueError(f"LBFGS: invalid learning rate {lr} (must be >= 0)")
        if max_iter < 1 or history_size < 1:
            raise ValueError(f"LBFGS: max_iter and history_size must be >= 1, got {max_iter} and {history_size}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                                  "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                                  "history_size": history_size, "line_search_fn": line_search_fn})
        self._flat_params: list[Variable] = self.param_groups[0]["params"]

    def add_param_group(self, group: dict[str, Any]) -> None:
        if self.param_groups:
            raise ValueError("LBFGS: takes one parameter group (no per-group options); it has one already")
        super().add_param_group(group)

    # -- the flat view -------------------------------------------------------------------------------------
    def _flat_grad(self) -> Any:
        """All gradients as one vector (zeros where a parameter has none)."""
        first = self._flat_params[0].data
        xp = xp_of(first)
        parts = []
        for p in self._flat_params:
            g = p.grad
            parts.append(xp.zeros(p.data.size, dtype=p.data.dtype) if g is None
                         else g.data.reshape(-1).astype(p.data.dtype, copy=False))
        return xp.concatenate(parts)

    def _add_to_params(self, step_size: float, direction: Any) -> None:
        """p ← p + step_size·d, parameter by parameter on its slice of the flat vector."""
        offset = 0
        for p in self._flat_params:
            n = p.data.size
            p.data += step_size * direction[offset:offset + n].reshape(p.data.shape)
            _versions.bump(p.data, self._site)
            offset += n

    def _set_params(self, values: list[Any]) -> None:
        for p, v in zip(self._flat_params, values, strict=True):
            p.data[...] = v
            _versions.bump(p.data, self._site)

    def _evaluate(self, closure: Callable[[], Any]) -> float:
        with enable_grad():
            return float(closure())

    def _directional_evaluate(self, closure: Callable[[], Any], x: list[Any], t: float,
                              d: Any) -> tuple[float, Any]:
        """The loss and flat gradient at x + t·d; the parameters are put back to x after."""
        self._add_to_params(t, d)
        loss = self._evaluate(closure)
        flat_grad = self._flat_grad()
        self._set_params(x)
        return loss, flat_grad

    # -- the step ------------------------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Run up to `max_iter` L-BFGS iterations; return the loss the closure gave at the start."""
        if closure is None:
            raise TypeError("LBFGS.step: needs a closure (a function that clears the gradients, computes the "
                            "loss, calls backward and returns the loss): opt.step(closure)")
        if not callable(closure):
            raise TypeError(f"LBFGS.step: closure must be callable, got {type(closure).__name__}")
        if not _hooks.ACTIVE:
            return self._lbfgs(closure)
        # the watcher snapshots the parameters at begin and reports the difference at end
        _hooks.emit("optimizer_step_begin", optimizer=self, exposes_updates=False)
        try:
            return self._lbfgs(closure)
        finally:
            _hooks.emit("optimizer_step_end", optimizer=self, updates=None)

    def _lbfgs(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state.setdefault(id(self._flat_params[0]), {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        xp = xp_of(flat_grad)
        if float(xp.abs(flat_grad).max()) <= tolerance_grad:
            return orig_loss  # already optimal

        # the state of the last call (absent on the first: the first iteration sets each before its use)
        d: Any = state.get("d")
        t: Any = state.get("t")
        old_dirs: Any = state.get("old_dirs")
        old_stps: Any = state.get("old_stps")
        ro: Any = state.get("ro")
        h_diag: Any = state.get("H_diag")
        prev_flat_grad: Any = state.get("prev_flat_grad")
        prev_loss: Any = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:  # the first direction: steepest descent
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:  # keep the pair only where the curvature condition holds
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                # the two-loop recursion: d = −H·g
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q -= al[i] * old_dirs[i]
                d = r = q * h_diag
                for i in range(num_old):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]

            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            # the first step of all is scaled by the gradient's size; later ones are lr
            t = min(1.0, 1.0 / float(xp.abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:  # not a descent direction (any more)
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = [p.data.copy() for p in self._flat_params]

                def obj_func(x: list[Any], t: float, d: Any) -> tuple[float, Any]:
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd,
                                                                 max_ls=max_eval - current_evals)
                self._add_to_params(t, d)
                opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_to_params(t, d)  # a fixed step
                opt_cond = False
                if n_iter != max_iter:  # the last iteration's closure would be the next step's first: skip it
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad()
                    opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(xp.abs(d * t).max()) <= tolerance_change:  # the step is too small
                break
            if abs(loss - prev_loss) < tolerance_change:  # the loss no longer changes
                break

        state.update({"d": d, "t": t, "old_dirs": old_dirs, "old_stps": old_stps, "ro": ro, "H_diag": h_diag,
                      "prev_flat_grad": prev_flat_grad, "prev_loss": prev_loss})
        return orig_loss

    def _restored(self, name: str, value: Any, param: Variable, key: Any) -> Any:
        """LBFGS keeps flat vectors (and lists of them): move them to the parameters' device and dtype."""
        if isinstance(value, list):
            return [self._restored(name, v, param, key) for v in value]
        if _is_array(value):
            arr = value.data if isinstance(value, Tensor) else value
            return Tensor._wrap(arr).to(param.device, param.data.dtype).data.copy()
        return value
