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
