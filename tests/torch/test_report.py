"""grad_report on a PyTorch model: the norms PyTorch's tensors hold, update ratios from a snapshot, and the
parameters that got no gradient."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import rtxviz  # noqa: E402


class TwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(3, 4)
        self.used = torch.nn.Linear(4, 1)
        self.unused = torch.nn.Linear(4, 1)  # never called: no gradient

    def forward(self, x):
        return self.used(torch.relu(self.body(x)))


def test_grad_report_on_a_torch_model():
    torch.manual_seed(0)
    model = TwoHeads().double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(5, 3, dtype=torch.float64)).square().mean().backward()
    snap = rtxviz.grad_report.snapshot(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    rep = rtxviz.grad_report(model, before=snap)
    assert rep.unused == ["unused.weight", "unused.bias"]
    for n, p in model.named_parameters():
        row = rep.row(n)
        assert row.shape == tuple(p.shape)
        assert row.param_norm == pytest.approx(p.norm().item(), rel=1e-12)
        if p.grad is not None:
            assert row.grad_norm == pytest.approx(p.grad.norm().item(), rel=1e-12)
            step = (p.detach() - before[n]).norm().item()
            assert row.update_ratio == pytest.approx(step / p.norm().item(), rel=1e-9)
    assert "no gradient: unused.weight, unused.bias" in rep.text()
