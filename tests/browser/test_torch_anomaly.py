"""The page on a watched PyTorch run where rtxviz.torch.detect_anomaly stops a NaN made in forward: the node of
the op that made it is marked (the first-NaN mark, as on an rtxviz run) and the Alerts panel lists it with the
user's file and line."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from rtxviz.debug import AnomalyError  # noqa: E402


class LogNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x)
        return torch.log(h).sum()  # log of a negative number: NaN


CAUSE_LINE = inspect.getsourcelines(LogNet.forward)[1] + 2


def test_page_marks_the_forward_nan_of_a_watched_pytorch_run(page, server):
    import rtxviz.torch as rt

    torch.manual_seed(0)
    model = LogNet()
    with torch.no_grad():
        model.lin.weight.copy_(torch.eye(3))
        model.lin.bias.zero_()
    with pytest.raises(AnomalyError), rt.watch(model, server, run_name="torch-nan", close_timeout=20) as run, \
            rt.detect_anomaly():
        model(torch.tensor([[1.0, -2.0, 3.0]])).backward()
    assert run.stats()["dropped"] == 0
    page.goto(server + "/")
    page.wait_for_selector("#alerts li.origin")
    log = page.locator("g.vnode[data-key='LogNet|log|1']")
    classes = log.get_attribute("class").split()
    assert "anomaly" in classes and "origin" in classes
    # what the browser draws: the first-NaN node's box is filled red; the linear before it is not
    fill = page.evaluate("k => getComputedStyle(document.querySelector(`g.vnode[data-key='${k}'] rect.body`)).fill",
                         "LogNet|log|1")
    assert fill == "rgb(254, 226, 226)"
    assert log.locator("text.badge-text").text_content() == "NaN/Inf"  # its badge, though no gradient came
    lin = page.locator("g.vnode[data-key='lin|linear|1']")
    assert "anomaly" not in lin.get_attribute("class").split() and lin.locator("text.badge-text").count() == 0
    alert = page.locator("#alerts li.origin")
    assert alert.count() == 1
    text = alert.text_content()
    assert text.startswith("forward: log node #") and "in LogNet" in text
    assert f"{__file__}:{CAUSE_LINE}" in text and "torch.log(h)" in text
    alert.click()
    assert "log" in page.locator("#inspector-body h3").text_content()

