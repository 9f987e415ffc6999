"""torch.utils.checkpoint, reentrant and not: the recomputation in backward is reported as recomputed nodes of
their segment, between the segment's `recompute_begin` and `recompute_end`, and changes no gradient."""

from __future__ import annotations

import copy
from functools import partial

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import rtxviz.torch as rt  # noqa: E402


class Net(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.stem = nn.Linear(3, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(checkpoint(self.block, self.stem(x), use_reentrant=self.reentrant))


def _segment(events, seg):
    phases = [(i, e["phase"]) for i, e in enumerate(events) if e["kind"] == "checkpoint" and e["segment"] == seg]
    return dict((p, i) for i, p in phases)


@pytest.mark.parametrize("reentrant", [True, False])
def test_recomputation_is_reported_in_its_segment(reentrant):
    torch.manual_seed(0)
    model = Net(reentrant).double()
    plain = copy.deepcopy(model)
    x = torch.randn(2, 3, dtype=torch.float64)
    with rt.record(model) as rec:
        model(x).sum().backward()
    plain(x).sum().backward()
    for (n, a), b in zip(model.named_parameters(), plain.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad), n  # watching the recomputation changed no gradient

    ev = rec.events
    begins = [e for e in ev if e["kind"] == "checkpoint" and e["phase"] == "begin"]
    assert [e["name"] for e in begins] == ["block"]
    seg = begins[0]["segment"]
    at = _segment(ev, seg)
    assert at["begin"] < at["end"] < at["recompute_begin"] < at["recompute_end"]
    inside = [e for e in ev[at["recompute_begin"]:at["recompute_end"]] if e["kind"] == "node"]
    assert inside and all(e.get("recomputed") and e["segment"] == seg for e in inside)
    assert ("tanh", "block.1") in {(e["op"], e["module"]) for e in inside}
    outside = [e for e in ev if e["kind"] == "node" and e not in inside]
    assert not any(e.get("recomputed") for e in outside)
    backward_at = next(i for i, e in enumerate(ev) if e["kind"] == "backward_begin")
    assert at["recompute_begin"] > backward_at  # recomputed in backward, not in forward
    if reentrant:
        # the forward graph holds one node for the whole segment; the recomputed graph gets gradients
        ck = [e for e in outside if e["op"] == "checkpoint"]
        assert len(ck) == 1 and ck[0]["segment"] == seg and at["begin"] < ev.index(ck[0]) < at["end"]
        grads = {e["node"] for e in ev if e["kind"] == "grad"}
        assert {e["id"] for e in inside} <= grads
    else:
        # the segment's forward nodes stay in the graph; the recomputation only refills what they saved
        assert {"tanh", "linear"} <= {e["op"] for e in outside if (e["module"] or "").startswith("block")}


def _segment_grad_fns(out: torch.Tensor, stop: torch.Tensor) -> list[str]:
    """PyTorch's own graph: the grad_fn names between `out` and the checkpoint's input `stop` (the ops of fn)."""
    names, todo, seen = [], [out.grad_fn], set()
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen or fn is stop.grad_fn or fn.name() == "torch::autograd::AccumulateGrad":
            continue
        seen.add(fn)
        names.append(fn.name())
        todo.extend(c for c, _ in fn.next_functions)
    return sorted(names)


def _plain_function_run(early_stop: bool):
    from torch.utils.checkpoint import set_checkpoint_early_stop

    torch.manual_seed(0)
    w = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)

    def fn(x):  # a plain function: no module inside, so no module hook sees its recomputation
        return torch.tanh(x @ w).sin() * x.cos()

    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    with rt.record(None) as rec, set_checkpoint_early_stop(early_stop):
        h = x * 2
        y = checkpoint(fn, h, use_reentrant=False)
        ops_of_fn = _segment_grad_fns(y, h)
        y.sum().backward()
    return rec.events, ops_of_fn, (w.grad.clone(), x.grad.clone()), (fn, w, x)


def test_non_reentrant_checkpoint_of_a_plain_function_is_seen():
    events, ops_of_fn, grads, (fn, w, x) = _plain_function_run(early_stop=False)
    begins = [e for e in events if e["kind"] == "checkpoint" and e["phase"] == "begin"]
    assert len(begins) == 1
    seg = begins[0]["segment"]
    at = _segment(events, seg)
    assert at["begin"] < at["end"] < at["recompute_begin"] < at["recompute_end"]
    inside = [e for e in events[at["recompute_begin"]:at["recompute_end"]] if e["kind"] == "node"]
    assert all(e.get("recomputed") and e["segment"] == seg for e in inside)
    # every op of fn, as PyTorch's graph has them, recomputed once (early stop off: fn runs to its end)
    assert sorted(e["attrs"]["grad_fn"] for e in inside) == ops_of_fn == sorted(
        ["MmBackward0", "TanhBackward0", "SinBackward0", "CosBackward0", "MulBackward0"])
    # named as forward named them: the functions fn calls (`x @ w` is matmul, though its grad_fn is MmBackward0)
    assert sorted(e["op"] for e in inside) == sorted(["matmul", "tanh", "sin", "cos", "mul"])
    assert not any(e.get("recomputed") for e in events if e["kind"] == "node" and e not in inside)
    # and the gradients are PyTorch's, unwatched
    w.grad = x.grad = None
    checkpoint(fn, x * 2, use_reentrant=False).sum().backward()
    assert torch.equal(grads[0], w.grad) and torch.equal(grads[1], x.grad)


def test_early_stop_reports_only_the_ops_pytorch_reran():
    events, ops_of_fn, _, _ = _plain_function_run(early_stop=True)
    inside = [e for e in events if e["kind"] == "node" and e.get("recomputed")]
    # PyTorch stops once the tensors backward needs are rebuilt: at most fn's ops, each one of them
    assert inside and len(inside) <= len(ops_of_fn)
    assert {e["attrs"]["grad_fn"] for e in inside} <= set(ops_of_fn)


def test_create_graph_backward_marks_nothing_recomputed():
    # with create_graph the backward formulas run with grad on: they are not a recomputation
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with rt.record(None) as rec:
        (g,) = torch.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
        g.sum().backward()
    assert not any(e.get("recomputed") for e in rec.events if e["kind"] == "node")
    assert not any(e["kind"] == "checkpoint" for e in rec.events)


class ConvNet(nn.Module):
    """A checkpointed Conv2d block between two plain layers."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.stem = nn.Conv2d(1, 2, 3, padding=1)
        self.block = nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.ReLU(), nn.Conv2d(2, 2, 1))
        self.head = nn.Linear(2 * 5 * 5, 1)

    def forward(self, x):
        return self.head(checkpoint(self.block, self.stem(x), use_reentrant=self.reentrant).flatten(1))


class _Calls(torch.overrides.TorchFunctionMode):
    """The test's own view of forward: (function name, module path) of every call whose output has a grad_fn."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.calls: list[tuple[str, str]] = []
        self.path: list[str] = []
        for name, m in model.named_modules():
            m.register_forward_pre_hook(partial(self._enter, name))
            m.register_forward_hook(self._leave)

    def _enter(self, name: str, module: nn.Module, args: tuple) -> None:
        self.path.append(name)

    def _leave(self, module: nn.Module, args: tuple, output: object) -> None:
        self.path.pop()  # (a forward hook that returns something replaces the output)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.grad_fn is not None:
            self.calls.append((func.__name__, self.path[-1]))
        return out


@pytest.mark.parametrize("reentrant", [True, False])
def test_recomputed_ops_are_named_as_forward_names_them(reentrant):
    from torch.utils.checkpoint import set_checkpoint_early_stop

    torch.manual_seed(0)
    model = ConvNet(reentrant).double()
    x = torch.randn(3, 1, 5, 5, dtype=torch.float64)
    # what forward calls inside the block, seen by a function mode of the test's own (on a copy, unwatched)
    spy = _Calls(copy.deepcopy(model.block))
    with spy:
        spy.model(torch.randn(3, 2, 5, 5, dtype=torch.float64, requires_grad=True))
    expected = sorted((op, "block" + ("." + path if path else "")) for op, path in spy.calls)
    assert expected == sorted([("conv2d", "block.0"), ("relu", "block.1"), ("conv2d", "block.2")])

    with rt.record(model) as rec, set_checkpoint_early_stop(False):
        model(x).sum().backward()
    nodes = [e for e in rec.events if e["kind"] == "node"]
    recomputed = sorted((e["op"], e["module"]) for e in nodes if e.get("recomputed"))
    assert recomputed == expected
    if not reentrant:  # the forward's own nodes of the block: the same names, each once
        forward = sorted((e["op"], e["module"]) for e in nodes
                         if not e.get("recomputed") and (e["module"] or "").startswith("block"))
        assert forward == recomputed


def test_early_stopped_recomputation_keeps_forward_names():
    # PyTorch's early stop raises out of the block's forward once what backward needs is rebuilt: what was rerun
    # keeps forward's names all the same (the block's last conv is not rerun: nothing needs it again)
    from torch.utils.checkpoint import set_checkpoint_early_stop

    torch.manual_seed(0)
    model = ConvNet(reentrant=False).double()
    with rt.record(model) as rec, set_checkpoint_early_stop(True):
        model(torch.randn(3, 1, 5, 5, dtype=torch.float64)).sum().backward()
        model(torch.randn(3, 1, 5, 5, dtype=torch.float64)).sum().backward()  # the mode was popped: again
    recomputed = [(e["op"], e["module"]) for e in rec.events if e["kind"] == "node" and e.get("recomputed")]
    assert recomputed == [("conv2d", "block.0"), ("relu", "block.1")] * 2
    assert torch._C._len_torch_function_stack() == 0  # no mode of the recorder's left behind


class Expit(nn.Module):
    """An op that saves its output (so its own saving runs inside the call) and whose grad_fn is named otherwise
    (`torch.special.expit` makes a SigmoidBackward0)."""

    def forward(self, x):
        return torch.special.expit(x) * 2


class ExpitNet(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.lin = nn.Linear(3, 3)
        self.blk = Expit()

    def forward(self, x):
        return checkpoint(self.blk, self.lin(x), use_reentrant=self.reentrant)


@pytest.mark.parametrize("reentrant", [True, False])
def test_an_op_saving_its_output_is_named_when_recomputed(reentrant):
    from torch.utils.checkpoint import set_checkpoint_early_stop

    torch.manual_seed(0)
    model = ExpitNet(reentrant).double()
    spy = _Calls(copy.deepcopy(model.blk))
    with spy:
        spy.model(torch.randn(2, 3, dtype=torch.float64, requires_grad=True))
    expected = sorted((op, "blk") for op, _ in spy.calls)
    assert expected == [("mul", "blk"), ("special_expit", "blk")]
    with rt.record(model) as rec, set_checkpoint_early_stop(False):
        model(torch.randn(2, 3, dtype=torch.float64)).sum().backward()
    nodes = [e for e in rec.events if e["kind"] == "node" and e.get("recomputed")]
    assert sorted((e["op"], e["module"]) for e in nodes) == expected
    if reentrant:  # its recomputed graph is an ordinary one (backward runs over it): expit keeps its output
        (expit,) = [e for e in nodes if e["op"] == "special_expit"]
        assert expit["saved_bytes"] == 2 * 3 * 8
