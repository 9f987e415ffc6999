"""The per-op harness (Chainer's FunctionTestCase habit): from each op's own declaration, every op is checked the
same ways.

Each op is exercised by its examples (`Op.examples`, for ops outside the reference vocabulary) or by the shipped
PyTorch cases that use it (whose values and first derivatives test_conformance already compares with PyTorch).
For each:

- backward against central differences, and double backward (gradcheck, gradgradcheck), for examples;
- its batch rule (`Op.batched`, or the row-by-row fallback) against one backward per cotangent row, which is
  what Jacobians and Hessians rely on;
- a graph-cache replay (forward and backward, on new values) against eager execution, which holds only if the
  op builds every data-dependent mask with ops (the capture refuses otherwise);
- for an op that declares a replay kernel (`Op.specialize`), the kernel against its forward, bit for bit, on
  every application the subject's forward and backward make, in float64 and float32 and on inputs of the same
  shapes laid out otherwise (Fortran order: the fit check tests shapes, dtypes and array types, not strides).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

import rtxviz
from rtxviz import Tensor, Variable
from rtxviz.conformance import program, reference_path
from rtxviz.engine.batched import batched_vjp
from rtxviz.engine.cache import cache_graph, init_graph_cache
from rtxviz.engine.cache.bindings import ReplayCtx
from rtxviz.engine.device import xp_of
from rtxviz.engine.gradcheck import gradcheck, gradgradcheck
from rtxviz.engine.graph import OPS
from rtxviz.engine.hooks import EngineHook

ENGINE_OPS = {name: op for name, op in OPS.items() if op.__module__.startswith("rtxviz.")}
SHIPPED = ["ops.json", "higher_order.json", "ops_v2.json"]
CASES_PER_OP = 2  # reference cases per op (the conformance tests run them all)


def _reference_cases() -> dict[str, list[dict]]:
    by_op: dict[str, list[dict]] = {}
    extra = sorted((Path(__file__).parent / "data").glob("*_reference.json"))  # rtxviz's own additions' cases
    for path in [reference_path(name) for name in SHIPPED] + extra:
        if not path.exists():
            continue
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            for op in program.ops_of(case):
                by_op.setdefault(op, []).append(case)
    for cases in by_op.values():  # programs of that op alone first
        cases.sort(key=lambda c: len(c["program"]))
    return by_op


REFERENCE_CASES = _reference_cases()


class Subject:
    """One way of calling one op: a function of float64 tensors, and the values to call it on."""

    def __init__(self, op: type, label: str, fn: object, make_inputs: object, example: object = None) -> None:
        self.op, self.label, self.fn, self.make_inputs, self.example = op, label, fn, make_inputs, example

    def __call__(self, *xs: object) -> object:
        rtxviz.manual_seed(0)  # random ops (dropout) draw the same numbers at every evaluation
        return self.fn(*xs)

    def unseeded(self, *xs: object) -> object:
        return self.fn(*xs)

    def __repr__(self) -> str:
        return self.label


def _example_inputs(ex: object, label: str, shift: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(label.encode()) + shift)
    return [rng.uniform(ex.low, ex.high, spec) if isinstance(spec, tuple) else np.asarray(spec, dtype=np.float64)
            for spec in ex.inputs]


def _subjects() -> list[Subject]:
    out = []
    for name, op in sorted(ENGINE_OPS.items()):
        for i, ex in enumerate(op.examples):
            label = f"{name}/example{i}"
            make = lambda shift=0, ex=ex, label=label: _example_inputs(ex, label, shift)  # noqa: E731
            out.append(Subject(op, label, ex.call, make, ex))
        if op.reference is not None:
            for case in REFERENCE_CASES.get(op.reference, [])[:CASES_PER_OP]:
                names, fn = program.build(case)

                def make(shift: int = 0, case: dict = case, names: list = names) -> list[np.ndarray]:
                    base = [program.tensor(case["inputs"][n], np.float64).numpy() for n in names]
                    if not shift:
                        return base
                    # other values near the reference ones (which sit away from kinks): a second point to replay at
                    rng = np.random.default_rng(shift)
                    return [b * (1.0 + 1e-3 * rng.standard_normal(b.shape)) for b in base]

                out.append(Subject(op, f"{name}/{case['name']}", fn, make))
    return out


SUBJECTS = _subjects()
EXAMPLES = [s for s in SUBJECTS if s.example is not None]


def _tensors(arrays: list[np.ndarray]) -> list[Tensor]:
    return [Tensor(a) for a in arrays]


@pytest.mark.parametrize("subject", [s for s in EXAMPLES if s.op.differentiable], ids=repr)
def test_backward_and_double_backward_match_finite_differences(subject: Subject) -> None:
    ex = subject.example
    inputs = _tensors(subject.make_inputs())
    first = gradcheck(subject, inputs, eps=ex.eps, atol=ex.atol, rtol=ex.rtol)
    assert first, f"{subject.label}: {first}"
    second = gradgradcheck(subject, inputs, eps=ex.eps, atol=ex.atol, rtol=ex.rtol)
    assert second, f"{subject.label}: {second}"


@pytest.mark.parametrize("subject", [s for s in SUBJECTS if s.op.differentiable], ids=repr)
def test_batch_rule_matches_one_backward_per_row(subject: Subject) -> None:
    leaves = [Variable(a, requires_grad=True) for a in subject.make_inputs()]
    out = subject(*leaves)
    if not out.requires_grad:
        pytest.skip("the output does not depend on a float input")
    cot = np.random.default_rng(3).standard_normal((3, *out.shape))
    batched = batched_vjp(out, leaves, cot)
    assert batched is not None
    for row in range(3):
        grads = rtxviz.grad(out, leaves, grad_outputs=Tensor(cot[row]), retain_graph=True, allow_unused=True)
        for i, (b, g) in enumerate(zip(batched, grads, strict=True)):
            want = np.zeros(leaves[i].shape) if g is None else g.numpy()
            np.testing.assert_allclose(Tensor(b[row]).numpy(), want, rtol=1e-10, atol=1e-12,
                                       err_msg=f"{subject.label}: input {i}, cotangent row {row}")


@pytest.mark.parametrize("subject", SUBJECTS, ids=repr)
def test_graph_cache_replay_matches_eager(subject: Subject) -> None:
    init_graph_cache(4)
    first = subject.make_inputs()
    probe = subject(*[Variable(a, requires_grad=True) for a in first])
    weight = Tensor(np.linspace(0.5, 1.5, probe.data.size).reshape(probe.shape)) \
        if probe.dtype.kind == "f" else None

    def step(*xs: Variable) -> object:  # what is captured: a replay draws random numbers as eager does, unseeded
        y = subject.unseeded(*xs)
        if weight is not None and y.requires_grad:
            (y * weight).sum().backward()
        return y

    graph = cache_graph(step, *[Variable(a, requires_grad=True) for a in first])
    again = subject.make_inputs(shift=7)
    replayed = [Variable(a, requires_grad=True) for a in again]
    eager = [Variable(a.copy(), requires_grad=True) for a in again]
    rtxviz.manual_seed(1)
    got = graph.execute(*replayed)
    rtxviz.manual_seed(1)
    want = step(*eager)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12, err_msg=f"{subject.label}: value")
    for i, (r, e) in enumerate(zip(replayed, eager, strict=True)):
        if e.grad is None:
            assert r.grad is None, f"{subject.label}: input {i} got a gradient only in the replay"
            continue
        np.testing.assert_allclose(r.grad.numpy(), e.grad.numpy(), rtol=1e-12, atol=1e-12,
                                   err_msg=f"{subject.label}: gradient of input {i}")


class _Applications(EngineHook):
    """Every op application with a replay kernel: (op, attrs, input arrays)."""

    name = "test_specialize"

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def forward_preprocess(self, op: object, inputs: tuple, attrs: dict) -> None:
        if getattr(op, "specialize", None) is not None:
            self.seen.append((op, attrs, tuple(t.data for t in inputs)))


def _same_bits(got: object, want: object) -> bool:
    got, want = (np.asarray(a.get() if hasattr(a, "get") else a) for a in (got, want))  # a device array: its copy
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def _fortran(a: object) -> object:
    return xp_of(a).asfortranarray(a) if a.ndim > 1 else a


SPECIALIZED = [s for s in SUBJECTS if getattr(s.op, "specialize", None) is not None]


@pytest.mark.parametrize("subject", SPECIALIZED, ids=repr)
def test_replay_kernel_matches_forward_bit_for_bit(subject: Subject) -> None:
    checked = 0
    for dtype in (np.float64, np.float32):
        apps = _Applications()
        leaves = [Variable(a.astype(dtype) if a.dtype.kind == "f" else a, requires_grad=a.dtype.kind == "f")
                  for a in subject.make_inputs()]
        with apps:
            out = subject(*leaves)
            if out.requires_grad:
                (out * 1.5).sum().backward()
        for op, attrs, arrays in apps.seen:
            kernel = op.specialize(attrs, *arrays)
            if kernel is None:
                continue
            for layout in (arrays, tuple(_fortran(a) for a in arrays)):
                ctx = ReplayCtx()
                ctx.attrs, ctx.state = attrs, None
                want = op.forward(ctx, *layout)
                assert _same_bits(kernel(*layout), want), \
                    f"{subject.label}: {op.name}'s kernel differs from its forward on {[a.shape for a in layout]}"
                checked += 1
    if not checked:
        pytest.skip("no application of the op takes its kernel here")
