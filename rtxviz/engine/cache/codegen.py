"""Code generation: a capture's instruction list becomes one straight-line Python function over raw arrays."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import backward as _backward
from ..errors import GraphCacheError
from ..graph import as_array
from ..memory import root_of
from ..tensor import Tensor
from ..variable import Variable
from .bindings import CONST, IN, PARAM, REF, SLOT, SLOT_ARRAY_MIN_BYTES, STATE_PART, ReplayCtx, is_array
from .capture import Capture
from .fold import fold_constants, readers


class Codegen:
    def __init__(self, cap: Capture) -> None:
        self.cap = cap
        self.ns: dict[str, Any] = {"_new": object.__new__, "_C": ReplayCtx, "_ndarray": np.ndarray,
                                   "_as_array": as_array, "_wrapV": Variable._wrap, "_wrapT": Tensor._wrap,
                                   "_acc": _backward.accumulate_leaf_grad,
                                   "_acca": _backward.accumulate_leaf_array, "make_object": make_object}
        self.n_globals = 0
        self.ctx_used: set[int] = set()
        self.folded: dict[int, str] = {}  # slot -> the global holding its folded value (fold.py)

    def glob(self, value: Any, prefix: str = "G") -> str:
        name = f"{prefix}{self.n_globals}"
        self.n_globals += 1
        self.ns[name] = value
        return name

    def ref(self, r: tuple) -> str:
        kind = r[0]
        if kind == IN:
            return f"i{r[1]}"
        if kind == SLOT:
            return self.folded.get(r[1]) or f"s{r[1]}"
        if kind == PARAM:
            return f"p{r[1]}"
        if kind == REF:
            return f"r{r[1]}"
        if kind == CONST:
            return f"K{r[1]}"
        if kind == STATE_PART:
            self.ctx_used.add(r[1])
            expr = f"c{r[1]}.state"
            for step in r[2]:
                expr += step if isinstance(step, str) else f"[{step}]"
            return expr
        raise GraphCacheError("internal: an unbound value reached code generation")

    def attr(self, tpl: Any, value: Any) -> str:
        if tpl is None:
            return self.glob(value, "A")
        kind = tpl[0]
        if kind == "bind":
            return self.ref(tpl[1])
        if kind == "tensor":
            return f"_wrapV({self.ref(tpl[2])}, None)" if tpl[1] else f"_wrapT({self.ref(tpl[2])})"
        if kind == "seq":
            items = ", ".join(self.attr(s, e) for s, e in tpl[2])
            return f"({items},)" if tpl[1] is tuple else f"[{items}]"
        if kind == "dict":
            items = ", ".join(f"{self.glob(k, 'N')}: {self.attr(s, e)}" for k, s, e in tpl[1])
            return "{" + items + "}"
        if kind == "obj":
            items = ", ".join(f"({n!r}, {self.attr(s, e)})" for n, s, e in tpl[2])
            return f"make_object({self.glob(tpl[1], 'T')}, ({items},))"
        raise GraphCacheError(f"internal: unknown attribute template {kind!r}")

    def build(self, out_tpl: Any, out_value: Any, n_inputs: int) -> Callable:
        cap = self.cap
        for n, c in enumerate(cap.consts):
            self.ns[f"K{n}"] = c
        for n, p in enumerate(cap.params):
            self.ns[f"P{n}"] = p
        for n, t in enumerate(cap.refs):
            self.ns[f"R{n}"] = t
        by_slot, state_read = readers(cap, out_tpl)
        for m, value in fold_constants(cap, by_slot, state_read).items():
            self.folded[m] = self.glob(value, "Z")
        owned = self._owned_gradients()
        body: list[str] = []
        ctx_line: dict[int, int] = {}
        for ins in cap.instrs:
            kind = ins[0]
            if kind == "op":
                _, k, op, attrs, tpl, in_refs, m, zero_d, kernel = ins
                if m in self.folded:
                    continue
                args = ", ".join(self.ref(r) for r in in_refs)
                if kernel is not None and k not in state_read:  # Op.specialize: no ctx, no forward checks
                    body.append(f"s{m} = {self.glob(kernel, 'F')}({args})")
                else:
                    a = self.attr(tpl, attrs) if tpl is not None else self.glob(attrs, "A")
                    f = self.glob(op.forward, "F")
                    ctx_line[k] = len(body)
                    body.append(f"c{k} = _new(_C); c{k}.attrs = {a}; c{k}.state = None")
                    body.append(f"s{m} = {f}(c{k}, {args})")
                if zero_d:
                    body.append(f"if type(s{m}) is not _ndarray: s{m} = _as_array(s{m}, {self.ref(in_refs[0])})")
            elif kind == "seed":
                _, m, shape, dtype, xp = ins  # xp: the seed's array module (numpy, cupy), as captured
                if m in self.folded:
                    continue
                if xp is np:  # a copy of a kept ones: one C call, where numpy's ones() is empty() + copyto()
                    body.append(f"s{m} = {self.glob(np.ones(shape, dtype), 'ONE')}.copy()")
                else:
                    body.append(f"s{m} = {self.glob(xp, 'X')}.ones({shape!r}, {self.glob(dtype, 'D')})")
            elif kind == "reset":
                body.append(f"{self._leaf(ins[1])}.grad = None")
            elif kind == "leaf":
                _, target, g_ref, cg = ins
                if cg:
                    body.append(f"_acc({self._leaf(target)}, _wrapV({self.ref(g_ref)}, None), True, _claimed)")
                elif g_ref[0] == SLOT and g_ref[1] in owned:
                    # a fresh array of the leaf's dtype that no other leaf's gradient shares: what
                    # accumulate_leaf_array does with it into an empty .grad, without the call and its tests
                    leaf, g = self._leaf(target), self.ref(g_ref)
                    body.append(f"if {leaf}._grad is None and {g}.base is None: {leaf}._grad = _wrapV({g}, None)")
                    body.append(f"else: _acca({leaf}, {g}, _claimed)")
                else:  # the raw array: no wrapper only to carry it (accumulate_leaf_array)
                    body.append(f"_acca({self._leaf(target)}, {self.ref(g_ref)}, _claimed)")
            elif kind == "grad":
                _, m, target = ins
                body.append(f"s{m} = {self._leaf(target)}.grad.data")
        ret = self._output(out_tpl, out_value)
        if not self.ctx_used <= state_read:  # pragma: no cover - fold.readers walks what ref() is given
            raise GraphCacheError("internal: an op's state is read where fold.readers did not look")
        throwaway = False
        for k, i in ctx_line.items():
            if k not in self.ctx_used:
                # a context no later line reads: one object for all of them, its attrs and state reset per op
                # (a fresh object per op was ~3% of a small model's replay)
                throwaway = True
                body[i] = body[i].replace(f"c{k} = _new(_C); c{k}.", "c.").replace(f"c{k}.", "c.")
                body[i + 1] = body[i + 1].replace(f"(c{k}, ", "(c, ")
        body = self._free_dead(body, ret)
        if throwaway:
            body.append("c.state = None")  # what the last op kept goes now, not at the next replay
        head = [f"i{j} = ins[{j}].data" for j in range(n_inputs)]
        head += [f"p{n} = P{n}.data" for n in range(len(cap.params))]
        head += [f"r{n} = R{n}.data" for n in range(len(cap.refs))]
        if any(ins[0] == "leaf" for ins in cap.instrs):
            head.append("_claimed = set()")  # one pass's handed-out gradient buffers (accumulate_leaf_grad)
        if throwaway:
            head.append("c = _new(_C)")
        src = "def _program(ins):\n" + "".join(f"    {line}\n" for line in head + body + [f"return {ret}"])
        code = compile(src, "<graph_cache program>", "exec")
        exec(code, self.ns)
        fn = self.ns["_program"]
        fn.source = src
        return fn

    def _owned_gradients(self) -> set[int]:
        """The slots whose array, at capture, went to one leaf's .grad as it was: numpy, owning its memory,
        writable, of the leaf's dtype, and the buffer of no other leaf gradient of the pass (told apart by the
        roots of their `.base` chains, as accumulate_leaf_array's claimed set does)."""
        cap = self.cap
        given = [(ins[1], ins[2][1], cap.keep_by_slot[ins[2][1]]) for ins in cap.instrs
                 if ins[0] == "leaf" and not ins[3] and ins[2][0] == SLOT]
        roots = Counter(id(root_of(a)) for _, _, a in given if is_array(a))
        owned = set()
        for target, m, a in given:
            leaf = cap.inputs[target[1]] if target[0] == IN else cap.params[target[1]]
            if type(a) is np.ndarray and a.base is None and a.flags.writeable and a.dtype == leaf.data.dtype \
                    and roots[id(a)] == 1:
                owned.add(m)
        return owned

    def _leaf(self, target: tuple) -> str:
        return f"ins[{target[1]}]" if target[0] == IN else f"P{target[1]}"

    def _output(self, tpl: Any, value: Any) -> str:
        if tpl is None:
            return self.glob(value, "O")
        kind = tpl[0]
        if kind == "tensor":
            return f"_wrapV({self.ref(tpl[2])}, None)" if tpl[1] else f"_wrapT({self.ref(tpl[2])})"
        if kind == "bind":
            return self.ref(tpl[1])
        if kind == "seq":
            items = ", ".join(self._output(s, e) for s, e in tpl[2])
            return f"({items},)" if tpl[1] is tuple else f"[{items}]"
        if kind == "dict":
            return "{" + ", ".join(f"{self.glob(k, 'N')}: {self._output(s, e)}" for k, s, e in tpl[1]) + "}"
        return self.glob(value, "O")

    def _free_dead(self, body: list[str], ret: str) -> list[str]:
        """Delete each big intermediate after its last use, so the allocator can reuse its memory at once."""
        big = {f"s{id_}" for id_ in range(self.cap.n_slots)
               if int(getattr(self.cap.keep_by_slot[id_], "nbytes", 0)) >= SLOT_ARRAY_MIN_BYTES}
        big |= {f"c{k}" for k in self.ctx_used}  # contexts hold forward state (masks, im2col columns)
        if not big:
            return body
        token = re.compile(r"\b([sc]\d+)\b")
        last: dict[str, int] = {}
        for i, line in enumerate(body):
            for name in token.findall(line):
                last[name] = i
        keep_to_end = set(token.findall(ret))
        out: list[str] = []
        dels: dict[int, list[str]] = {}
        for name, i in last.items():
            if name in big and name not in keep_to_end:
                while i + 1 < len(body) and body[i + 1].startswith("else:"):
                    i += 1  # after the `else` of the `if` line that used it last
                dels.setdefault(i, []).append(name)
        for i, line in enumerate(body):
            out.append(line)
            if i in dels:
                out.append("del " + ", ".join(sorted(dels[i])))
        return out


def make_object(cls: type, fields: tuple) -> Any:
    obj: Any = object.__new__(cls)
    for name, value in fields:
        setattr(obj, name, value)
    return obj
