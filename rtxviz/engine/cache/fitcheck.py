"""The fast check that a call fits a cached graph, generated per graph as straight-line Python: what
`CachedGraph._fits` tested in loops over (shape, dtype, kind) tuples, with the captured values as constants
(the loops, their tuple unpacking and zip were about a tenth of a small model's replayed step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import hooks as _hooks
from ..grad_mode import STATE


def make_fit_check(in_sig: tuple, params: tuple, param_sig: tuple, refs: tuple, ref_sig: tuple,
                   grad_enabled: bool, modules: tuple, hook_ids: tuple,
                   active_hook_ids: Callable[[], tuple]) -> Callable[[tuple, bool], bool]:
    """`check(inputs, modules_checked)`: True when the inputs (exact shapes, numpy dtypes, kinds), the parameters
    and constant tensors (shapes, dtypes, array types; parameters still leaves that require grad), the grad mode,
    the hooks and (unless `modules_checked`) the modules are as at capture. An input without `.data` raises
    AttributeError, as the loops did."""
    ns: dict[str, Any] = {"_nd": np.ndarray, "_hooks": _hooks, "_STATE": STATE, "_active": active_hook_ids,
                          "_GRAD": grad_enabled, "_HOOKS": hook_ids}
    lines = [f"if len(inputs) != {len(in_sig)}: return False"]
    for j, (shape, dtype, kind) in enumerate(in_sig):
        ns[f"D{j}"] = dtype
        cond = f"d.shape != {tuple(shape)!r} or d.dtype is not D{j} or type(d) is not _nd"
        if kind == "tensor":
            cond += " or t._is_var"
        else:
            cond += f" or not t._is_var or t._node is not None or t.requires_grad != {kind == 'var'}"
        lines += [f"t = inputs[{j}]", "d = t.data", f"if {cond}: return False"]
    for n, (p, (shape, dtype, ty)) in enumerate(zip(params, param_sig, strict=True)):
        ns[f"P{n}"], ns[f"PD{n}"], ns[f"PT{n}"] = p, dtype, ty
        lines += [f"d = P{n}.data",
                  f"if d.shape != {tuple(shape)!r} or d.dtype is not PD{n} or type(d) is not PT{n} "
                  f"or P{n}._node is not None or not P{n}.requires_grad: return False"]
    for n, (t, (shape, dtype, ty)) in enumerate(zip(refs, ref_sig, strict=True)):
        ns[f"R{n}"], ns[f"RD{n}"], ns[f"RT{n}"] = t, dtype, ty
        lines += [f"d = R{n}.data",
                  f"if d.shape != {tuple(shape)!r} or d.dtype is not RD{n} or type(d) is not RT{n}: return False"]
    lines.append("if _STATE.enabled is not _GRAD: return False")
    if modules:
        lines.append("if not modules_checked:")
        for n, (ref, training, version, _) in enumerate(modules):
            ns[f"M{n}"], ns[f"MT{n}"], ns[f"MV{n}"] = ref, training, version
            lines += [f"    m = M{n}()",  # m._version: structure_version, without the property
                      f"    if m is None or m.training is not MT{n} or m._version != MV{n}: return False"]
    lines.append("return not (_hooks.ACTIVE or _HOOKS) or _active() == _HOOKS")
    src = "def check(inputs, modules_checked):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(src, "<graph_cache fit check>", "exec"), ns)
    check: Callable[[tuple, bool], bool] = ns["check"]
    return check


def make_params_check(ids: tuple, read: tuple = ()) -> Callable[[Any], bool]:
    """`check(params)`: True when params= holds, in order, the objects whose ids were captured (`param_ids`), each
    still a leaf that requires grad. A list or tuple is unpacked and tested in straight-line code; any other
    iterable takes the loop. `read`: the parameters fn read at capture (the graph holds them), each tested by
    identity alone: the fit check, which runs after, tests that they are still leaves that require grad."""
    count = len(ids)
    names = [f"q{n}" for n in range(count)]
    held = {id(p): n for n, p in enumerate(read)}
    ns: dict[str, Any] = {f"H{n}": p for n, p in enumerate(read)}
    lines = ["if params.__class__ is not list and params.__class__ is not tuple: return _loop(params)",
             f"if len(params) != {count}: return False"]
    if count:
        lines.append(f"{', '.join(names)}, = params")
        for q, i in zip(names, ids, strict=True):
            n = held.get(i)
            lines.append(f"if {q} is not H{n}: return False" if n is not None else
                         f"if id({q}) != {i} or not {q}.requires_grad or {q}._node is not None: return False")
    lines.append("return True")

    def loop(params: Any) -> bool:
        n = 0
        for p in params:  # what param_ids checks, against the ids of the capture
            if n == count or id(p) != ids[n] or not p.requires_grad or p._node is not None:
                return False
            n += 1
        return n == count

    ns["_loop"] = loop
    src = "def check(params):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(src, "<graph_cache params check>", "exec"), ns)
    check: Callable[[Any], bool] = ns["check"]
    return check
