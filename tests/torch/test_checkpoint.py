"""torch.utils.checkpoint, reentrant and not: the recomputation in backward is reported as recomputed nodes of
their segment, between the segment's `recompute_begin` and `recompute_end`, and changes no gradient."""

from __future__ import annotations

import copy

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
