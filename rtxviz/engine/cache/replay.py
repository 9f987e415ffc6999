"""The cached graph: one captured function for one input signature, the checks that a call still fits it, and
its replay."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import hooks as _hooks
from ..errors import GraphCacheError
from ..grad_mode import STATE
from ..tensor import Tensor
from .bindings import mode_name, modules_key, param_ids, signature_of
from .fitcheck import make_fit_check, make_params_check


@dataclass
class Counters:
    """What a cache counts: replays served, lookups or calls that found no fitting graph, and so on."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    captures: int = 0
    refusals: int = 0


class CachedGraph:
    """One captured function for one input signature: `execute(*inputs)` replays it.

    Attributes: `signature` (per input: shape, dtype, device, kind), `ops` (op applications replayed),
    `key`, `source` (the generated replay function, for the curious).
    """

    def __init__(self, fn: Callable, key: tuple, signature: tuple, program: Callable, params: list,
                 refs: list, ops: int, grad_enabled: bool, hook_ids: tuple, user_key: Any,
                 modules: tuple = ()) -> None:
        self.fn = fn
        self.base_key = key
        self.modules = modules  # (weakref(module), training, structure version, name) per module fn called
        self.key = (*key, modules_key(modules))
        self.signature = signature
        self.input_shapes = tuple(s[0] for s in signature)
        self.ops = ops
        self.source: str = getattr(program, "source", "")
        self.counts = Counters()  # the counters of the cache holding it (set when it is inserted)
        self._program = program
        self._params = tuple(params)
        self._param_sig = tuple((p.data.shape, p.data.dtype, type(p.data)) for p in params)
        self._refs = tuple(refs)
        self._ref_sig = tuple((t.data.shape, t.data.dtype, type(t.data)) for t in refs)
        self._in_sig = tuple((s[0], s[1], s[3]) for s in signature)
        self._in_types = None
        self._check: Callable[[tuple, bool], bool] | None = None  # _fits's generated check
        self._check_params: Callable[[Any], bool] | None = None  # _fits_call's, for params=
        self._grad_enabled = grad_enabled
        self._hook_ids = hook_ids
        self.user_key = user_key
        self.param_ids: tuple | None = None
        self.replays = 0

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"<CachedGraph {name} {list(self.input_shapes)}: {self.ops} ops>"

    def _mismatch(self, inputs: tuple) -> str | None:
        """Why this graph does not fit the call, or None when it does."""
        if len(inputs) != len(self._in_sig):
            return f"it was captured for {len(self._in_sig)} input(s), got {len(inputs)}"
        for j, (t, (shape, dtype, kind)) in enumerate(zip(inputs, self._in_sig, strict=True)):
            if not isinstance(t, Tensor):
                return f"input {j} is a {type(t).__name__}, not a Tensor"
            d = t.data
            if d.shape != shape:
                return f"input {j} has shape {tuple(d.shape)}, captured with {shape}"
            if d.dtype != dtype:
                return f"input {j} has dtype {d.dtype}, captured with {dtype}"
            s = signature_of(t)
            if s[2] != self.signature[j][2]:
                return f"input {j} is on {s[2]}, captured on {self.signature[j][2]}"
            if s[3] != kind:
                return f"input {j} is a {s[3]}, captured as a {kind}"
            if t._node is not None:
                return f"input {j} has a graph of its own (grad_fn {t._node.op.name}); pass a leaf or detach() it"
        for n, (p, (shape, dtype, ty)) in enumerate(zip(self._params, self._param_sig, strict=True)):
            d = p.data
            if d.shape != shape or d.dtype != dtype or type(d) is not ty:
                return (f"parameter {n} is now {tuple(d.shape)} {d.dtype} {_kind(type(d))}, captured as {shape} "
                        f"{dtype} {_kind(ty)}")
            if not p.requires_grad or p._node is not None:
                return f"parameter {n} no longer is a leaf that requires grad"
        for n, (t, (shape, dtype, ty)) in enumerate(zip(self._refs, self._ref_sig, strict=True)):
            d = t.data
            if d.shape != shape or d.dtype != dtype or type(d) is not ty:
                return (f"constant tensor {n} is now {tuple(d.shape)} {d.dtype} {_kind(type(d))}, captured as {shape} "
                        f"{dtype} {_kind(ty)}")
        if STATE.enabled != self._grad_enabled:
            return f"grad mode is {'on' if STATE.enabled else 'off'}, captured with it " \
                   f"{'on' if self._grad_enabled else 'off'}"
        if active_hook_ids() != self._hook_ids:
            return "the attached engine hooks differ from those at capture (a replay runs no per-op hooks)"
        return self._modules_changed()

    def _modules_changed(self) -> str | None:
        """Why a module fn called no longer is as it was at capture (None when every one is)."""
        for ref, training, version, name in self.modules:
            m = ref()
            if m is None:
                return f"module {name}, called by fn at capture, no longer exists"
            if m.training != training:
                return f"module {name} is in {mode_name(m.training)} mode, captured in {mode_name(training)} mode"
            if m.structure_version != version:
                return (f"module {name} had a parameter, buffer, child module or tensor attribute assigned since "
                        "the capture (a replay would still use the old objects)")
        return None

    def _stale(self) -> bool:
        """True when this graph can never fit again (a module it called died or changed its structure)."""
        for ref, _, version, _ in self.modules:
            m = ref()
            if m is None or m.structure_version != version:
                return True
        return False

    def _fits(self, inputs: tuple, modules_checked: bool = False) -> bool:
        # The fast path of validation: exact shapes/dtypes of inputs and parameters, grad mode, hooks, and the
        # modules (unless the caller has just checked them: run_cached's lookup does); generated straight-line
        # code (fitcheck.py), built on the first call.
        check = self._check
        if check is None:
            check = self._check = make_fit_check(self._in_sig, self._params, self._param_sig, self._refs,
                                                 self._ref_sig, self._grad_enabled, self.modules, self._hook_ids,
                                                 active_hook_ids)
        return check(inputs, modules_checked)

    def execute(self, *inputs: Any, params: Any = None) -> Any:
        """Replay the captured ops on `inputs` (same signature as at capture) and return fn's result.

        The result carries no graph: if fn called backward, that backward already ran inside the replay and
        its gradients are in the parameters' `.grad`. Raises GraphCacheError (counted as a miss) when the
        call does not fit the captured signature; `params`, when given, must be the captured parameter objects.
        """
        if params is not None and self.param_ids is not None and param_ids(params) != self.param_ids:
            self.counts.misses += 1
            emit("miss", self, why="params")
            raise GraphCacheError("graph cache: params= are not the parameter objects this graph was captured with")
        return self._execute(inputs, False)

    def _execute(self, inputs: tuple, modules_checked: bool) -> Any:
        """execute's replay after its params check; `modules_checked`: the caller (run_cached, through the
        cache's lookup) has just found every module as it was at capture."""
        if not self._fits(inputs, modules_checked):
            why = self._mismatch(inputs)
            if why is not None:
                self.counts.misses += 1
                emit("miss", self, why=why)
                raise GraphCacheError(f"graph cache: this cached graph does not fit the call: {why}")
        return self._replay(inputs)

    def _fits_call(self, inputs: tuple, user_key: Any, params: Any) -> bool:
        """True when `run_cached(self.fn, *inputs, key=user_key, params=params)` would find this graph: the
        same key= and params= (the same objects, still leaves that require grad) and `_fits` on the rest (the
        inputs' shapes, dtypes and kinds, grad mode, hooks, modules). False sends run_cached to its lookup."""
        if user_key is not self.user_key and user_key != self.user_key:
            return False
        ids = self.param_ids
        if params is None or ids is None:
            if params is not ids:
                return False
        else:
            check = self._check_params
            if check is None:
                # param_ids is set once, at capture; _fits below tests the parameters fn read are still leaves
                check = self._check_params = make_params_check(ids, self._params)
            if not check(params):
                return False
        try:
            return self._fits(inputs)
        except AttributeError:  # an input that is no Tensor: run_cached's lookup raises the error that names it
            return False

    def _replay(self, inputs: tuple) -> Any:
        """Run the program on inputs that fit (checked by the caller) and count the hit."""
        out = self._program(inputs)
        self.replays += 1
        self.counts.hits += 1
        if _hooks.ACTIVE:
            emit("hit", self)
        return out


def active_hook_ids() -> tuple:
    if not _hooks.ACTIVE:
        return ()
    return tuple(id(h) for h in _hooks.ACTIVE)


def emit(action: str, graph: CachedGraph | None, **extra: Any) -> None:
    if _hooks.ACTIVE:
        key = None if graph is None else describe_key(graph)
        _hooks.emit("graph_cache", action=action, key=key, ops=None if graph is None else graph.ops, **extra)


def describe_key(graph: CachedGraph) -> str:
    name = getattr(graph.fn, "__qualname__", type(graph.fn).__name__)
    ins = ", ".join(f"{list(s[0])} {s[1]}" + ("" if s[2] == "cpu" else f" {s[2]}") for s in graph.signature)
    extra = "" if graph.user_key is None else f" key={graph.user_key!r}"
    return f"{name}({ins}){extra}"


def _kind(array_type: type) -> str:
    """numpy.ndarray or cupy.ndarray: a buffer swapped for one of the other module is named as such."""
    return f"{array_type.__module__}.{array_type.__name__}"
