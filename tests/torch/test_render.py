"""rtxviz.render on a PyTorch tensor: the autograd graph behind it, module clusters and per-op gradient norms
when it ran under rtxviz.torch's recorder, collapsing for big graphs; SVG through graphviz."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import rtxviz  # noqa: E402
import rtxviz.torch as rt  # noqa: E402
from rtxviz.render import graph_model  # noqa: E402

from .models import resnet18  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 4)
        self.fc2 = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def test_recorded_tensor_draws_modules_and_the_gradients_pytorch_computed():
    torch.manual_seed(0)
    model = Net().double()
    with rt.record(model) as rec:
        h = model.fc1(torch.randn(5, 3, dtype=torch.float64))
        h.retain_grad()
        loss = model.fc2(torch.tanh(h)).square().mean()
        loss.backward()
    m = graph_model(loss)
    ops = {n.label: n for n in m.nodes.values() if n.kind in ("op", "output")}
    assert {"linear", "tanh", "square", "mean"} <= set(ops)
    assert {n.module for n in m.nodes.values() if n.label == "linear"} == {"fc1", "fc2"}
    # the gradient drawn on the edge out of fc1's linear is dL/dh, which PyTorch kept in h.grad
    fc1 = next(k for k, n in m.nodes.items() if n.label == "linear" and n.module == "fc1")
    edge = next(e for e in m.edges if e.src == fc1)
    assert edge.grad.norm == pytest.approx(h.grad.norm().item(), rel=1e-12)
    params = {n.label: n for n in m.nodes.values() if n.kind == "param"}
    assert params["fc2.weight"].grad.norm == pytest.approx(model.fc2.weight.grad.norm().item(), rel=1e-12)
    drawn = [n for n in m.nodes.values() if n.kind in ("op", "output")]
    assert len([e for e in rec.events if e["kind"] == "node"]) == len(drawn)


def test_unrecorded_tensor_still_draws_pytorchs_graph():
    x = torch.randn(2, 3, requires_grad=True)
    y = (x.exp() * 2).sum()
    m = graph_model(y)
    assert [n.label for n in m.nodes.values() if n.kind != "param"] == ["exp", "mul", "sum"]
    with pytest.raises(TypeError, match="render: this PyTorch tensor has no graph"):
        graph_model(x)


def test_resnet18_renders_to_svg_with_module_clusters_and_collapses(tmp_path):
    from rtxviz.render import find_dot

    if find_dot() is None:
        pytest.skip("graphviz's dot is not installed (make setup installs it)")
    torch.manual_seed(0)
    model = resnet18()
    with rt.record(model):
        loss = model(torch.randn(2, 3, 32, 32)).logsumexp(1).mean()
        loss.backward()
    path = rtxviz.render(loss, str(tmp_path / "resnet18.svg"))
    svg = open(path, encoding="utf-8").read()
    assert "layer1.0" in svg and "conv2d" in svg
    small = graph_model(loss).fit(40)
    assert len(small) <= 40 and any(n.kind == "group" for n in small.nodes.values())
