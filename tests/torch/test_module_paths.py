"""Which module a node is attributed to: the module whose forward made it, for nodes the function mode sees being
made (built-in ops) and for those it does not (a custom `torch.autograd.Function`, whose `apply` is no torch
function), and none for ops outside the model. The expected paths come from the models' own definitions."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import rtxviz.torch as rt  # noqa: E402


class Cube(torch.autograd.Function):
    """x**3 by hand, saving x for backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


class CubeAct(nn.Module):
    """Returns the custom Function's output: its consumer is in another module."""

    def forward(self, x):
        return Cube.apply(x)


class CubeThenLinear(nn.Module):
    """Feeds the custom Function's output to a child module."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 3)

    def forward(self, x):
        return self.inner(Cube.apply(x))


class CubeThenTanh(nn.Module):
    """Consumes the custom Function's output itself."""

    def forward(self, x):
        return torch.tanh(Cube.apply(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.act = CubeAct()
        self.mix = CubeThenLinear()
        self.squash = CubeThenTanh()
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.squash(self.mix(self.act(self.lin(x)))))


def _nodes(model, x):
    with rt.record(model) as rec:
        model(x).sum().backward()
    return [e for e in rec.events if e["kind"] == "node"]


def test_custom_function_nodes_get_the_module_that_applied_them():
    torch.manual_seed(0)
    nodes = _nodes(Net().double(), torch.randn(2, 3, dtype=torch.float64))
    cubes = [e for e in nodes if e["attrs"]["grad_fn"] == "CubeBackward"]
    # in the order forward applied them: act, mix, squash (producers first)
    assert [e["module"] for e in cubes] == ["act", "mix", "squash"]
    assert all(e["op"] == "cube" and e["shape"] == [2, 3] and e["dtype"] == "float64" for e in cubes)
    # the built-in ops beside them keep theirs
    assert {(e["op"], e["module"]) for e in nodes} >= {("linear", "mix.inner"), ("tanh", "squash"),
                                                        ("linear", "head"), ("sum", None)}


@pytest.mark.parametrize("root", [CubeAct, CubeThenTanh])
def test_custom_function_reports_the_bytes_it_saved(root):
    torch.manual_seed(0)
    nodes = _nodes(root().double(), torch.randn(4, 5, dtype=torch.float64, requires_grad=True))
    (cube,) = [e for e in nodes if e["attrs"]["grad_fn"] == "CubeBackward"]
    assert cube["module"] == root.__name__  # the root module, by its class name
    assert cube["saved_bytes"] == 4 * 5 * 8  # ctx.save_for_backward(x): one float64 tensor of 4x5


def test_ops_outside_the_model_have_no_module():
    # `x * 2` runs before the model is called, a custom Function after it returns: neither is in a module
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh()).double()
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    with rt.record(model) as rec:
        Cube.apply(model(x * 2)).sum().backward()
    by_op = {e["op"]: e["module"] for e in rec.events if e["kind"] == "node"}
    assert by_op == {"mul": None, "t": "0", "linear": "0", "tanh": "1", "cube": None, "sum": None}
