"""einsum (torch.einsum): one op for any equation of one or more operands, and the op its backward needs to write a
gradient back onto a diagonal (`ii->i` reads one).

The gradient of operand k is an einsum too: the cotangent and the other operands contracted to operand k's
distinct subscripts, broadcast along the subscripts only operand k has (forward summed them out), and, when a
subscript repeats in operand k, written onto that diagonal by `einsum_diagonal_grad`, whose own backward is the
einsum that reads the diagonal again. Both are differentiable ops, so every order of derivative works.
"""

from __future__ import annotations

import string
from functools import lru_cache
from typing import Any

from ..device import xp_of
from ..errors import ShapeError
from ..graph import Op, apply
from ..tensor import Tensor, as_tensor_like
from ..variable import Variable
from ._base import Example, implements
from .arithmetic import mul
from .broadcast import expand

LETTERS = string.ascii_letters


@lru_cache(maxsize=512)
def _canonical(equation: str, n_operands: int) -> str:
    """The equation in explicit form without spaces (``ij,jk->ik``), checked; implicit mode (no ``->``) outputs
    the subscripts that occur once, in alphabetical order, as PyTorch and numpy do."""
    eq = equation.replace(" ", "")
    if "." in eq:
        raise ShapeError(f"einsum: '...' (ellipsis) is not supported, got equation {equation!r}")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != n_operands:
        raise ShapeError(f"einsum: equation {equation!r} names {len(terms)} operand(s) but {n_operands} were given")
    for c in lhs.replace(",", "") + out:
        if c not in LETTERS:
            raise ShapeError(f"einsum: invalid subscript {c!r} in equation {equation!r} (letters a-z, A-Z only)")
    if not arrow:
        counts: dict[str, int] = {}
        for c in lhs.replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        out = "".join(sorted(c for c, n in counts.items() if n == 1))
    for c in out:
        if out.count(c) > 1:
            raise ShapeError(f"einsum: output subscript {c!r} appears more than once in equation {equation!r}")
        if c not in lhs:
            raise ShapeError(f"einsum: output subscript {c!r} of equation {equation!r} is in no operand")
    return ",".join(terms) + "->" + out


@lru_cache(maxsize=512)
def _split(equation: str) -> tuple[tuple[str, ...], str]:
    lhs, _, out = equation.partition("->")
    return tuple(lhs.split(",")), out


@lru_cache(maxsize=1024)
def _plan(equation: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...] | None:
    """Check the operands' shapes against the equation. Returns the shapes to broadcast them to (a size-1 dim
    whose subscript has a larger size in another operand, as PyTorch broadcasts), or None when none needs it."""
    terms, _ = _split(equation)
    sizes: dict[str, int] = {}
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        if len(term) != len(shape):
            raise ShapeError(f"einsum: operand {k} has {len(shape)} dim(s) (shape {shape}) but its subscripts "
                             f"{term!r} name {len(term)} (equation {equation!r})")
        own: dict[str, int] = {}
        for c, d in zip(term, shape, strict=True):
            if own.setdefault(c, d) != d:
                raise ShapeError(f"einsum: subscript {c!r} repeats in operand {k} with sizes {own[c]} and {d} "
                                 f"(shape {shape}); a diagonal needs equal sizes")
        for c, d in own.items():
            prev = sizes.get(c)
            if prev is None or prev == 1:
                sizes[c] = d
            elif d not in (1, prev):
                raise ShapeError(f"einsum: subscript {c!r} has size {prev} in an earlier operand and {d} in operand "
                                 f"{k} (shapes {list(shapes)}, equation {equation!r}); sizes must agree or be 1")
    targets = tuple(tuple(sizes[c] for c in term) for term in terms)
    return None if targets == shapes else targets


def _free_letter(used: str) -> str | None:
    """A subscript the equation does not use (the batch dim of a batch rule)."""
    return next((c for c in LETTERS if c not in used), None)


class Einsum(Op):
    """The Einstein summation of one or more operands over an explicit equation (``ij,jk->ik``)."""

    name = "einsum"
    kind = "linalg"
    rule = ("dXₖ = einsum(dY and the other operands -> Xₖ's subscripts); a subscript repeated in Xₖ writes "
            "dXₖ onto that diagonal")
    save_inputs = True

    @staticmethod
    def forward(ctx: Any, *xs: Any) -> Any:
        equation = ctx.attrs["equation"]
        xp = xp_of(xs[0])
        targets = _plan(equation, tuple(x.shape for x in xs))
        if targets is not None:
            xs = tuple(x if x.shape == t else xp.broadcast_to(x, t) for x, t in zip(xs, targets, strict=True))
        return xp.einsum(equation, *xs, optimize=len(xs) > 1)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return _grads(ctx, g, "")

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        # The backward itself, with the cotangents' batch dim as one more subscript.
        b = _free_letter(ctx.attrs["equation"])
        if b is None:  # pragma: no cover - an equation that uses all 52 letters: one backward per row
            rows = [_grads(ctx, Variable._wrap(g[i], None), "") for i in range(g.shape[0])]
            xp = xp_of(g)
            return tuple(None if rows[0][k] is None else xp.stack([r[k].data for r in rows])
                         for k in range(len(ctx.next)))
        res = _grads(ctx, Variable._wrap(g, None), b)
        return tuple(None if r is None else r.data for r in res)


def _grads(ctx: Any, g: Any, b: str) -> tuple:
    terms, out = _split(ctx.attrs["equation"])
    xs = ctx.saved_inputs
    return tuple(None if ctx.next[k] is None else _operand_grad(terms, out, xs, k, g, b) for k in range(len(xs)))


def _operand_grad(terms: tuple[str, ...], out: str, xs: tuple, k: int, g: Any, b: str) -> Any:
    """The gradient of operand k: g has subscripts b + out (b: a batch subscript, or "")."""
    term, x = terms[k], xs[k]
    uniq = "".join(dict.fromkeys(term))
    others = [j for j in range(len(terms)) if j != k]
    avail = set(out).union(*(terms[j] for j in others))
    present = "".join(c for c in uniq if c in avail)
    subs = [terms[j] for j in others]
    operands = [xs[j] for j in others]
    if b + out:
        subs.insert(0, b + out)
        operands.insert(0, g)
    if not operands:  # one operand summed to a 0-d output: its gradient is g at every element
        gk = g
    elif len(operands) == 1 and subs[0] == b + present:  # the contraction is the identity
        gk = operands[0]
    else:
        gk = apply(Einsum, tuple(operands), {"equation": ",".join(subs) + "->" + b + present})
    if operands and not b + out:  # a 0-d cotangent scales the contraction of the others
        gk = mul(gk, g)
    lead = tuple(g.shape[:1]) if b else ()
    target = lead + tuple(x.shape[term.index(c)] for c in uniq)
    if len(present) < len(uniq):  # subscripts only this operand has: the gradient is constant along them
        sizes = iter(gk.shape[len(lead):])
        gk = gk.reshape(lead + tuple(next(sizes) if c in present else 1 for c in uniq))
    axes = [i for i, (s, t) in enumerate(zip(gk.shape, target, strict=True)) if t == 1 and s != 1]
    if axes:  # a size-1 dim that forward broadcast
        gk = gk.sum(dim=axes, keepdim=True)
    if tuple(gk.shape) != target:
        gk = expand(gk, target)
    if len(uniq) < len(term):
        gk = apply(EinsumDiagonalGrad, (gk,), {"src": b + uniq, "dst": b + term, "shape": lead + tuple(x.shape)})
    return gk


@implements(Einsum, call=lambda *xs, equation: einsum(equation, *xs))
def einsum(equation: str, *operands: Any) -> Any:
    """The Einstein summation `equation` over `operands` (torch.einsum): ``"ij,jk->ik"`` is a matrix product,
    ``"ii->i"`` a diagonal, ``"bqd,bkd->bqk"`` batched scores. Subscripts are letters; a letter repeated within
    one operand takes that diagonal; without ``->`` the output is the letters that occur once, sorted. A size-1
    dim broadcasts against the same letter's size elsewhere. Operands may also come as one list.

    >>> from rtxviz import Tensor
    >>> einsum("ij,jk->ik", Tensor.ones([2, 3]), Tensor.ones([3, 4])).shape
    (2, 4)
    >>> einsum("ii->", Tensor.from_slice([1.0, 2.0, 3.0, 4.0], [2, 2])).item()
    5.0
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not operands:
        raise ShapeError(f"einsum: equation {equation!r} needs at least one operand")
    like = next((o for o in operands if isinstance(o, Tensor)), None)
    ts = tuple(o if isinstance(o, Tensor) else as_tensor_like(o, like) for o in operands)
    return apply(Einsum, ts, {"equation": _canonical(equation, len(ts))})


class EinsumDiagonalGrad(Op):
    """x with subscripts `src` (distinct) written onto the diagonal of a zero tensor of subscripts `dst` (where a
    subscript repeats) and shape `shape`: the adjoint of reading a diagonal with einsum (``ii->i``)."""

    name = "einsum_diagonal_grad"
    kind = "gradient"
    keeps_finite = True
    rule = "dX = einsum(dst -> src, dY) (the diagonal read back)"
    examples = (
        Example(lambda x: apply(EinsumDiagonalGrad, (x,), {"src": "i", "dst": "ii", "shape": (3, 3)}), ((3,),)),
        Example(lambda x: apply(EinsumDiagonalGrad, (x,), {"src": "ij", "dst": "ijii", "shape": (2, 3, 2, 2)}),
                ((2, 3),)),
    )

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        src, dst, shape = ctx.attrs["src"], ctx.attrs["dst"], ctx.attrs["shape"]
        xp = xp_of(x)
        out = xp.zeros(shape, dtype=x.dtype)
        k = len(src)
        index = tuple(xp.arange(shape[p]).reshape(tuple(-1 if i == src.index(c) else 1 for i in range(k)))
                      for p, c in enumerate(dst))
        out[index] = x
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return (apply(Einsum, (g,), {"equation": f"{ctx.attrs['dst']}->{ctx.attrs['src']}"}),)

    @staticmethod
    def batched(ctx: Any, g: Any) -> tuple:
        src, dst = ctx.attrs["src"], ctx.attrs["dst"]
        b = _free_letter(dst)
        return (xp_of(g).einsum(f"{b}{dst}->{b}{src}", g),)
