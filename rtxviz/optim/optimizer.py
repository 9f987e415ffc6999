"""Optimizer base: parameter groups, per-parameter state, zero_grad, state_dict / load_state_dict.

Updates run on the raw arrays (`param.data`, `param.grad.data`) in place with the array's own module
(numpy or cupy, via `xp_of`), so a step records no graph and the Parameter objects never change.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..accel import add_measured as _add_measured  # p += u and both norms in one pass; None: numpy's +=
from ..engine import hooks as _hooks
from ..engine import versions as _versions
from ..engine.device import xp_of
from ..engine.grad_mode import enable_grad
from ..engine.tensor import Tensor
from ..engine.variable import Variable


def ends_with_add_update(update: Any) -> Any:
    """Mark a built-in `_update` whose last write to the parameter is `self._add_update(param, u)` with the `u`
    it returns: the optimizer report may then use the squares measured in that pass. A subclass that overrides
    `_update` is not marked, and its report measures the parameters itself."""
    update.ends_with_add_update = True
    return update


class ParamState(dict):
    """The per-parameter state: keyed by id(param) (what the update loop looks up), and readable by the parameter
    itself too, as PyTorch's ``opt.state[p]["step"]`` and ``p in opt.state``.

    >>> st = ParamState(); key = object(); st[id(key)] = {"step": 3}
    >>> st[key]["step"], key in st, object() in st
    (3, True, False)
    """

    def __missing__(self, key: Any) -> Any:
        if type(key) is not int and dict.__contains__(self, id(key)):
            return dict.__getitem__(self, id(key))
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (type(key) is not int and dict.__contains__(self, id(key)))


class Optimizer:
    """Holds `param_groups` (a list of dicts: "params" plus hyperparameters) and `state` (per parameter).

    `params` is an iterable of Variables, or of dicts with a "params" entry and per-group overrides, as in
    PyTorch: ``SGD([{"params": body}, {"params": head, "lr": 0.1}], lr=0.01)``.
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = ParamState()  # id(param) -> state
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict[str, Any]) -> None:
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for i, p in enumerate(params):
            if not isinstance(p, Variable):
                raise TypeError(f"{type(self).__name__}: parameter {i} is a {type(p).__name__}, not a Variable")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: parameter {i} is not a leaf (it was computed by an op); "
                                 "optimize leaves only")
            if id(p) in seen:
                raise ValueError(f"{type(self).__name__}: parameter {i} appears in more than one group")
            seen.add(id(p))
        new = {**self.defaults, **{k: v for k, v in group.items() if k != "params"}, "params": params}
        self.param_groups.append(new)

    # -- the loop ------------------------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter (to None by default, as PyTorch)."""
        if set_to_none and not _hooks.TRACING:  # the usual call: the slot itself, not the reporting setter
            for group in self.param_groups:
                for p in group["params"]:
                    p._grad = None
            return
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    p.grad = Variable.from_tensor(Tensor._wrap(xp_of(p.data).zeros_like(p.data)),
                                                  requires_grad=False)

    #: `_update` returns the array it added to the parameter (``param += u``), so watchers can report each
    #: update without copying the parameters. A subclass whose `_update` does not return it sets this False.
    exposes_updates = False
    _measuring = False  # inside a step that hooks report: `_add_update` measures as it adds
    _measured: tuple[Any, tuple[float, float]] | None = None  # (the update added last, (‖p‖², ‖u‖²))

    @property
    def _site(self) -> str:
        return f"{type(self).__name__}.step()"

    def _exposes_updates(self) -> bool:
        return self.exposes_updates

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; return what `closure` returned (None without one).

        `closure`, as PyTorch's, re-evaluates the model (clear the gradients, compute the loss, backward, return
        the loss); it runs first, with grad mode on even inside ``no_grad``.

        While hooks are attached, the step is reported: ``optimizer_step_begin(optimizer, exposes_updates)``
        and ``optimizer_step_end(optimizer, updates)``, `updates` being [(parameter, update array, squares)]
        when the optimizer exposes its updates (the arrays may be reused by the next step: read them at once),
        else None (a watcher then snapshots the parameters at begin). `squares` is (‖p‖², ‖u‖²) of the
        parameter after the update and of the update, measured in the same pass as the addition when the
        native kernel could do it, else None.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if _hooks.ACTIVE:
            exposes = self._exposes_updates()
            _hooks.emit("optimizer_step_begin", optimizer=self, exposes_updates=exposes)
            updates: list | None = [] if exposes else None
            try:
                self._step(updates)
            finally:
                _hooks.emit("optimizer_step_end", optimizer=self, updates=updates)
            return loss
        self._step(None)
        return loss

    def _step(self, updates: list | None = None) -> None:
        # Measure while adding only where `_update` is a built-in one that ends with `_add_update` (marked by
        # `ends_with_add_update`): a subclass's `_update` may change the parameter after adding (a clamp), add
        # twice or into another array, and squares measured at the add would then not be the parameter's.
        measuring = self._measuring = updates is not None and getattr(type(self)._update, "ends_with_add_update",
                                                                       False)
        # Looked up once per step, not per parameter: on a small model these lookups are a good part of the step.
        site = self._site
        update = self._update
        states = self.state
        bump = _versions.bump
        try:
            for group in self.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    st = states.get(id(p))
                    if st is None:
                        st = states[id(p)] = {}
                    data = p.data
                    grad = g.data
                    if grad.dtype != data.dtype:
                        grad = grad.astype(data.dtype)
                    if measuring:
                        self._measured = None
                    u = update(data, grad, st, group)
                    bump(data, site)  # a graph that saved this parameter must not use it now
                    if updates is not None:
                        measured = self._measured
                        # the squares belong to this update only if it is the array that was added last
                        updates.append((p, u, measured[1] if measured is not None and measured[0] is u else None))
        finally:
            self._measuring = False
            self._measured = None

    def _update(self, param: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> Any:
        """Update `param` in place; return the array added to it when `exposes_updates` (else anything).
        Built-in optimizers add their update with `_add_update` as their last write."""
        raise NotImplementedError

    def _add_update(self, param: Any, u: Any) -> None:
        """``param += u``. In a step that hooks report, the same pass also measures ‖param‖² (after) and ‖u‖²
        for the report (rtxviz/_native.c: the same IEEE additions, so the parameters are bit for bit those of
        an unwatched step); numpy's ``+=`` when the kernel cannot take the arrays (cupy, other dtypes or
        shapes, strided, unaligned), and the watcher then measures on its own."""
        if (self._measuring and _add_measured is not None and type(param) is np.ndarray
                and type(u) is np.ndarray and u.shape == param.shape):
            try:
                self._measured = (u, _add_measured(param, u))
                return
            except (TypeError, ValueError, BufferError):
                pass  # refused before writing anything
        param += u

    # -- state ---------------------------------------------------------------------------------------------
    def _params(self) -> list[Variable]:
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: {name: numpy array or number}}, "param_groups": [hyperparameters + "params":
        [indices]]}, indices counting parameters across groups in order, as PyTorch."""
        index = {id(p): i for i, p in enumerate(self._params())}
        state = {}
        for pid, st in self.state.items():
            if pid in index:
                state[index[pid]] = {k: _exported(v) for k, v in st.items()}
        groups = []
        for g in self.param_groups:
            entry = {k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
            entry["params"] = [index[id(p)] for p in g["params"]]
            groups.append(entry)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and per-parameter state (moved to each parameter's device and dtype)."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state has {len(groups)} parameter "
                             f"group(s), this optimizer has {len(self.param_groups)}")
        for i, (saved, mine) in enumerate(zip(groups, self.param_groups, strict=True)):
            if len(saved["params"]) != len(mine["params"]):
                raise ValueError(f"{type(self).__name__}.load_state_dict: group {i} has {len(saved['params'])} "
                                 f"parameters in the state but {len(mine['params'])} here")
        params = self._params()
        self.state = ParamState()
        for key, st in state_dict["state"].items():
            p = params[int(key)]
            self.state[id(p)] = {name: self._restored(name, v, p, key) for name, v in st.items()}
        for saved, mine in zip(groups, self.param_groups, strict=True):
            for k, v in saved.items():
                if k != "params":
                    mine[k] = v

    def _restored(self, name: str, value: Any, param: Variable, key: Any) -> Any:
        """One loaded state entry, as this optimizer keeps it: an array of the parameter's shape moved to its
        device and dtype (a copy), anything else as it is. LBFGS overrides this (its state is flat vectors)."""
        if _is_array(value) and getattr(value, "ndim", 0) > 0:
            arr = value.data if isinstance(value, Tensor) else value
            if tuple(arr.shape) != tuple(param.shape):
                raise ValueError(f"{type(self).__name__}.load_state_dict: state {name!r} of parameter "
                                 f"{key} has shape {tuple(arr.shape)}, the parameter has {param.shape}")
            return Tensor._wrap(arr).to(param.device, param.data.dtype).data.copy()
        return value

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


def _is_array(value: Any) -> bool:
    """A numpy/cupy array or a Tensor (not a numpy scalar, which has a shape too)."""
    return hasattr(value, "shape") and not isinstance(value, np.generic)


def _exported(value: Any) -> Any:
    """A state entry as `state_dict` hands it out: arrays as numpy copies (also inside lists, as LBFGS keeps its
    history), anything else as it is."""
    if _is_array(value):
        return Tensor._wrap(value.data if isinstance(value, Tensor) else value).numpy().copy()
    if isinstance(value, list):
        return [_exported(v) for v in value]
    return value
