"""Modules: forwards and gradients against PyTorch numbers stored in data/optim_reference.json, paths and
parameter names, state dicts and .npz files, modes, devices, init statistics."""

from __future__ import annotations

import numpy as np
import pytest

from rtxviz import AutogradTape, DTypeError, Tensor, Variable, manual_seed, nn, no_grad
from rtxviz.nn import functional as F

F64 = "float64"


def _t(a: list, dtype: str = F64) -> Tensor:
    return Tensor(np.array(a), dtype=dtype)


def _check(case: dict, out: Variable, leaves: dict, tol: float = 1e-9) -> None:
    np.testing.assert_allclose(out.numpy(), np.array(case["out"]), rtol=tol, atol=tol)
    (out * _t(case["out_weight"])).sum().backward()
    for name, v in leaves.items():
        np.testing.assert_allclose(v.grad.numpy(), np.array(case["grads"][name]), rtol=tol, atol=tol,
                                   err_msg=f"gradient of {name}")


def _load(module: nn.Module, case: dict, **names: str) -> None:
    module.load_state_dict({k: _t(case["inputs"][v]) for k, v in names.items()})


def _x(case: dict, key: str = "x") -> Variable:
    return Variable(np.array(case["inputs"][key]), requires_grad=True, dtype=F64)


def test_linear_matches_pytorch(reference: dict) -> None:
    case = reference["modules"]["linear"]
    lin = nn.Linear(5, 3).double()
    _load(lin, case, weight="weight", bias="bias")
    x = _x(case)
    _check(case, lin(x), {"x": x, "weight": lin.weight, "bias": lin.bias})


@pytest.mark.parametrize("name", ["conv2d_pad1", "conv2d_stride2"])
def test_conv2d_matches_pytorch(name: str, reference: dict) -> None:
    case = reference["modules"][name]
    w = np.array(case["inputs"]["weight"])
    conv = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride=case["attrs"]["stride"],
                     padding=case["attrs"]["padding"]).double()
    _load(conv, case, weight="weight", bias="bias")
    x = _x(case)
    _check(case, conv(x), {"x": x, "weight": conv.weight, "bias": conv.bias})


@pytest.mark.parametrize("name,cls", [("max_pool2d", nn.MaxPool2d), ("avg_pool2d", nn.AvgPool2d)])
def test_pooling_matches_pytorch(name: str, cls: type, reference: dict) -> None:
    case = reference["modules"][name]
    x = _x(case)
    _check(case, cls(case["attrs"]["kernel_size"])(x), {"x": x})


def test_layer_norm_matches_pytorch(reference: dict) -> None:
    case = reference["modules"]["layer_norm"]
    ln = nn.LayerNorm(5).double()
    assert ln.weight.tolist() == [1.0] * 5 and ln.bias.tolist() == [0.0] * 5
    _load(ln, case, weight="weight", bias="bias")
    x = _x(case)
    _check(case, ln(x), {"x": x, "weight": ln.weight, "bias": ln.bias})


def test_embedding_matches_pytorch(reference: dict) -> None:
    case = reference["modules"]["embedding"]
    emb = nn.Embedding(4, 3).double()
    _load(emb, case, weight="weight")
    out = emb(Tensor(np.array(case["inputs"]["idx"])))
    _check(case, out, {"weight": emb.weight})


LOSSES = [("cross_entropy", nn.CrossEntropyLoss, "target"), ("nll_loss", nn.NLLLoss, "target"),
          ("mse_loss", nn.MSELoss, "y"), ("l1_loss", nn.L1Loss, "y"), ("bce_with_logits", nn.BCEWithLogitsLoss, "y")]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,cls,target_key", LOSSES)
def test_loss_modules_match_pytorch(name: str, cls: type, target_key: str, reduction: str, reference: dict) -> None:
    case = reference["modules"][f"{name}_{reduction}"]
    x = _x(case)
    raw = np.array(case["inputs"][target_key])
    target = Tensor(raw) if raw.dtype.kind == "i" else Tensor(raw, dtype=F64)
    _check(case, cls(reduction=reduction)(x, target), {"x": x})


def test_loss_rejects_unknown_reduction() -> None:
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_functional_reexports() -> None:
    from rtxviz.engine.ops import nn as ops_nn

    # the ops themselves where the signatures agree; PyTorch's argument order where they do not (weight third)
    assert F.layer_norm is ops_nn.layer_norm and F.batch_norm is ops_nn.batch_norm
    logits, target, w = _t([[0.3, -1.0, 2.0], [1.0, 0.5, -0.5]]), Tensor([2, 0]), _t([1.0, 2.0, 3.0])
    assert F.cross_entropy(logits, target, w).item() == pytest.approx(
        ops_nn.cross_entropy(logits, target, weight=w).item(), rel=1e-12)
    assert F.cross_entropy(logits, target, w).item() != pytest.approx(ops_nn.cross_entropy(logits, target).item())
    assert F.relu(Tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    with pytest.raises(AttributeError):
        F.not_an_op  # noqa: B018


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.GELU()

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.fc(x)) + x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(Block(), Block())
        self.head = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.layers(x))


def test_ops_are_tagged_with_module_paths_and_parameters_named() -> None:
    net = Net()
    with AutogradTape() as tape:
        out = net(Tensor.ones([3, 4]))
        loss = out.sum()
    paths = [(n.name, n.module_path) for n in tape.nodes]
    assert ("gelu", "model.layers.0.act") in paths and ("gelu", "model.layers.1.act") in paths
    assert ("linear", "model.layers.0.fc") in paths and ("linear", "model.head") in paths
    assert ("add", "model.layers.1") in paths  # the residual belongs to the block itself
    assert loss.grad_fn.module_path is None  # outside any module: the scope was restored
    names = {p.name for p in net.parameters()}
    assert names == {f"model.layers.{i}.fc.{w}" for i in (0, 1) for w in ("weight", "bias")} | {
        "model.head.weight", "model.head.bias"}
    # a child attached later inherits the known path at once; name_as renames the tree
    net.extra = nn.Linear(2, 2)
    assert net.extra.weight.name == "model.extra.weight"
    net.name_as("student")
    assert net.layers[1].fc.path == "student.layers.1.fc" and net.head.bias.name == "student.head.bias"
    with AutogradTape() as tape:
        net(Tensor.ones([1, 4]))
    assert {n.module_path for n in tape.nodes} >= {"student.head", "student.layers.0.fc"}


def test_scope_is_restored_after_an_error() -> None:
    from rtxviz.engine.grad_mode import STATE

    lin = nn.Linear(3, 2)
    with pytest.raises(Exception, match="3"):
        lin(Tensor.ones([2, 5]))
    assert STATE.module_path is None


def test_parameters_children_and_sequential() -> None:
    net = Net()
    named = [n for n, _ in net.named_parameters()]
    assert named == ["layers.0.fc.weight", "layers.0.fc.bias", "layers.1.fc.weight", "layers.1.fc.bias",
                     "head.weight", "head.bias"]
    assert len(list(net.parameters())) == 6 and net.num_parameters() == 2 * (16 + 4) + 10
    assert [n for n, _ in net.named_children()] == ["layers", "head"]
    assert len(net.layers) == 2 and isinstance(net.layers[-1], Block)
    assert [n for n, _ in net.named_modules()][:3] == ["", "layers", "layers.0"]
    shared = nn.Linear(2, 2)
    twice = nn.Sequential(shared, shared)
    assert len(list(twice.parameters())) == 2  # shared parameters are listed once
    assert "Linear(in_features=4, out_features=2" in repr(net)


def test_state_dict_roundtrip_and_checks() -> None:
    manual_seed(0)
    a, b = Net(), Net()
    assert not np.array_equal(a.head.weight.numpy(), b.head.weight.numpy())
    ids = [id(p) for p in b.parameters()]
    b.load_state_dict(a.state_dict())
    assert [id(p) for p in b.parameters()] == ids  # loaded in place
    x = Tensor.ones([2, 4])
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    state = a.state_dict()
    state["head.weight"] = Tensor.zeros([3, 4])
    before = b.head.bias.numpy().copy()
    with pytest.raises(nn.StateDictError, match=r"'head.weight'.*\(2, 4\).*\(3, 4\)"):
        b.load_state_dict(state)
    np.testing.assert_array_equal(b.head.bias.numpy(), before)  # nothing written on refusal
    state = a.state_dict()
    state["head.weight"] = a.head.weight.to(dtype="float64")
    with pytest.raises(DTypeError, match="head.weight.*float32.*float64"):
        b.load_state_dict(state)
    state = a.state_dict()
    del state["head.bias"]
    state["head.scale"] = Tensor.ones([1])
    with pytest.raises(nn.StateDictError, match=r"missing keys \['head.bias'\].*unexpected keys \['head.scale'\]"):
        b.load_state_dict(state)
    missing, unexpected = b.load_state_dict(state, strict=False)
    assert missing == ["head.bias"] and unexpected == ["head.scale"]


def test_save_and_load_npz(tmp_path) -> None:
    manual_seed(1)
    a, b = Net(), Net()
    path = nn.save(a, tmp_path / "net")
    assert path.endswith(".npz")
    with np.load(path, allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(k for k, _ in a.named_parameters())
    nn.load_into(b, path)
    for (ka, pa), (kb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert ka == kb and np.array_equal(pa.numpy(), pb.numpy())
    wrong = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 3))
    other = nn.save(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), tmp_path / "small.npz")
    with pytest.raises(nn.StateDictError, match=r"'1.weight'.*\(3, 4\).*\(2, 4\).*small.npz"):
        nn.load_into(wrong, other)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "pickled.npz", w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="pickle"):
        nn.load(tmp_path / "pickled.npz")


def test_train_eval_and_dropout() -> None:
    net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    assert net.training and net[1].training
    net.eval()
    assert not net.training and not net[1].training
    x = Tensor.ones([4, 8])
    np.testing.assert_array_equal(net(x).numpy(), net(x).numpy())
    net.train()
    manual_seed(0)
    y = nn.Dropout(0.5)(Tensor.ones([1000]))
    vals = set(np.unique(y.numpy()).tolist())
    assert vals == {0.0, 2.0}
    assert 400 < int((y.numpy() == 0).sum()) < 600


def test_zero_grad_and_no_grad_inference() -> None:
    net = Net()
    net(Tensor.ones([2, 4])).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    with no_grad():
        out = net(Tensor.ones([2, 4]))
    assert out.grad_fn is None and not out.requires_grad


def test_to_dtype_in_place_keeps_parameter_identity() -> None:
    net = Net()
    params = list(net.parameters())
    net.to(dtype="float64")
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert all(p.dtype.name == "float64" for p in params)
    assert net(Tensor.ones([1, 4], dtype="float64")).dtype.name == "float64"


def test_to_device_runs_forward_and_backward(device: str) -> None:
    net = Net().to(device)
    out = net(Tensor.ones([2, 4], device=device))
    out.sum().backward()
    assert str(net.head.weight.grad.device).startswith(device)


def test_init_is_seeded_and_follows_the_formulas() -> None:
    manual_seed(3)
    a = nn.Linear(400, 300)
    manual_seed(3)
    b = nn.Linear(400, 300)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    bound = 1 / np.sqrt(400)  # kaiming_uniform(a=sqrt(5)) = U(±1/sqrt(fan_in))
    w = a.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.01 * bound
    p = nn.Parameter(Tensor.zeros([200, 300]))
    nn.init.kaiming_normal_(p, nonlinearity="relu")
    assert abs(p.numpy().std() - np.sqrt(2 / 300)) < 0.02 * np.sqrt(2 / 300)
    nn.init.xavier_uniform_(p)
    assert np.abs(p.numpy()).max() <= np.sqrt(6 / 500)
    assert abs(p.numpy().std() - np.sqrt(2 / 500)) < 0.02 * np.sqrt(2 / 500)
    nn.init.xavier_normal_(p, gain=2.0)
    assert abs(p.numpy().std() - 2 * np.sqrt(2 / 500)) < 0.04 * np.sqrt(2 / 500)
    c = nn.Conv2d(3, 8, 3)
    assert np.abs(c.weight.numpy()).max() <= 1 / np.sqrt(27) and c.weight.shape == (8, 3, 3, 3)


def test_flatten_activations_and_clear_errors() -> None:
    x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert nn.Flatten()(x).shape == (2, 12) and nn.Flatten(0, 1)(x).shape == (6, 4)
    v = Tensor([-1.0, 0.0, 2.0])
    assert nn.ReLU()(v).tolist() == [0.0, 0.0, 2.0]
    np.testing.assert_allclose(nn.Tanh()(v).numpy(), np.tanh([-1.0, 0.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(v).numpy(), 1 / (1 + np.exp([1.0, 0.0, -2.0])), rtol=1e-6)
    np.testing.assert_allclose(nn.GELU()(v).numpy(), [-0.15865525, 0.0, 1.95449974], rtol=1e-6)
    with pytest.raises(Exception, match=r"Linear\(3, 2\).*5 features"):
        nn.Linear(3, 2)(Tensor.ones([1, 5]))

    class Forgot(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(1, 1)

    with pytest.raises(RuntimeError, match="super"):
        Forgot()


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_op_first_and_second_order_gradients_by_finite_differences(with_bias: bool) -> None:
    from rtxviz.engine.gradcheck import gradcheck, gradgradcheck
    from rtxviz.engine.ops.linalg import linear

    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((2, 3, 4)), dtype=F64)  # a batch of sequences: dW sums over two dims
    w = Tensor(rng.standard_normal((5, 4)), dtype=F64)
    b = Tensor(rng.standard_normal(5), dtype=F64)
    inputs = [x, w, b] if with_bias else [x, w]

    def f(*args: Tensor) -> Tensor:
        return linear(*args).tanh()  # tanh makes the second derivative non-trivial

    assert gradcheck(f, inputs)
    assert gradgradcheck(f, inputs)


def test_cross_entropy_module_passes_ignore_index() -> None:
    logits = Tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 5.0, 0.0, 0.0]], dtype=F64)
    target = Tensor([0, -100])
    expected = -np.log(np.exp(2.0) / (np.exp(2.0) + 3.0))  # the second row is ignored
    assert nn.CrossEntropyLoss()(logits, Tensor([0, 0])).item() != pytest.approx(expected)
    assert nn.CrossEntropyLoss(ignore_index=-100)(logits, target).item() == pytest.approx(expected, rel=1e-12)
    assert nn.NLLLoss(ignore_index=-100)(F.log_softmax(logits, dim=1), target).item() == pytest.approx(
        expected, rel=1e-12)


# -- structure versions and module_call trace events (what the graph cache checks) --------------------------------
def test_structure_version_changes_on_assignment_of_what_a_replay_reads() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5))
    lin = model[0]
    seen = {lin.structure_version}

    def changed(before: int) -> bool:
        now = lin.structure_version
        fresh = now not in seen
        seen.add(now)
        return now != before and fresh  # a version never comes back

    v = lin.structure_version
    lin.weight = nn.Parameter(Tensor.zeros([2, 3]))
    assert changed(v)
    v = lin.structure_version
    lin.bias = None
    assert changed(v)
    v = lin.structure_version
    lin.register_buffer("scale", Tensor.ones([2]))
    assert changed(v)
    v = lin.structure_version
    lin.scale = Tensor.zeros([2])
    assert changed(v)
    v = lin.structure_version
    lin.table = Tensor.zeros([4])  # a plain tensor attribute: read by reference by a replay
    assert changed(v)
    v = lin.structure_version
    del lin.table
    assert changed(v)
    v = lin.structure_version
    lin.child = nn.ReLU()
    assert changed(v)
    v = lin.structure_version
    del lin.child
    assert changed(v)
    # not structure: plain Python attributes, the mode, values changed in place, state loaded in place
    v = lin.structure_version
    lin.note = "hello"
    model.eval()
    lin.weight.data += 1.0
    lin.load_state_dict({"weight": np.ones((2, 3), dtype=np.float32), "scale": np.ones(2, dtype=np.float32)})
    assert lin.structure_version == v
    # the parent's structure changes when a child is swapped, not when the child changes inside
    s = model.structure_version
    lin.weight = nn.Parameter(Tensor.zeros([2, 3]))
    assert model.structure_version == s
    model.add_module("1", nn.Dropout(0.1))
    assert model.structure_version != s
    with pytest.raises(AttributeError):
        model.structure_version = 5


def test_to_bumps_the_version_only_when_it_replaces_a_buffer() -> None:
    lin = nn.Linear(2, 2)
    lin.register_buffer("scale", Tensor.ones([2]))
    v = lin.structure_version
    lin.to(dtype="float32")  # already float32: the buffer object stays
    assert lin.structure_version == v and lin._buffers["scale"].dtype.name == "float32"
    lin.to(dtype="float64")
    assert lin.structure_version != v and lin._buffers["scale"].dtype.name == "float64"


def test_module_call_is_traced_only_for_tracing_hooks() -> None:
    from rtxviz.engine import hooks

    calls: list = []

    class Tracer(hooks.EngineHook):
        traces = True

        def event(self, kind: str, **fields: object) -> None:
            if kind == "module_call":
                calls.append((type(fields["module"]).__name__, fields["training"]))

    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model(Tensor.ones([1, 2]))
    assert calls == []
    with Tracer():
        model.eval()
        model(Tensor.ones([1, 2]))
    assert calls == [("Sequential", False), ("Linear", False), ("Dropout", False)]
