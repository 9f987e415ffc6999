"""The page on a watched PyTorch run (rtxviz.torch.watch streaming to a live server): torchvision's resnet18
with its layer3 under torch.utils.checkpoint shows its module groups, gradient colours and the recomputed
checkpoint segment."""

from __future__ import annotations

import pytest

from .conftest import screenshot

torch = pytest.importorskip("torch")

from rtxviz.summary import grad_class, ramp_colour  # noqa: E402

from ..torch.models import resnet18  # noqa: E402


class CheckpointedResNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = resnet18()

    def forward(self, x):
        n = self.net
        x = n.layer2(n.layer1(n.maxpool(n.relu(n.bn1(n.conv1(x))))))
        x = torch.utils.checkpoint.checkpoint(n.layer3, x, use_reentrant=True)
        return n.fc(n.avgpool(n.layer4(x)).flatten(1))


def _rgb(hex_colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)))


def test_page_shows_a_watched_pytorch_run(page, server):
    import rtxviz.torch as rt

    torch.manual_seed(0)
    model = CheckpointedResNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sent = []
    with rt.watch(model, server, run_name="torch-resnet", close_timeout=20) as run:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([1, 2])).backward()
        opt.step()
        sent = run  # the run's stats, read after close
    assert sent.stats()["dropped"] == 0
    # the loss node's gradient, from the stream: dL/dL = 1 (the page colours it with the shared ramp)
    page.goto(server + "/?budget=60")  # a budget small enough that module groups collapse into boxes
    page.wait_for_selector("g.segment", state="attached")
    page.wait_for_function("document.querySelectorAll('g.vnode.kind-group').length >= 3")
    groups = page.evaluate("[...document.querySelectorAll('g.vnode.kind-group text.l1')].map(t => t.textContent)")
    assert any("layer1" in g for g in groups) and any("layer4" in g for g in groups)
    loss = page.evaluate("[...document.querySelectorAll('g.vnode')].filter(n => n.dataset.key === '|cross_entropy|1')"
                         ".map(n => [n.dataset.gradClass, n.dataset.gradColor])")
    assert loss == [[grad_class(1.0), _rgb(ramp_colour(1.0))]]
    classes = page.evaluate("[...document.querySelectorAll('g.vnode')].map(n => n.dataset.gradClass)")
    assert "none" not in classes  # backward reached every drawn value: all coloured
    seg = page.locator("g.segment")
    assert seg.count() == 1 and seg.get_attribute("data-state") == "recomputed"
    label = page.locator("text.segment-label").text_content()
    assert "layer3" in label and "recomputed" in label
    screenshot(page, "viewer-torch-resnet.png")
