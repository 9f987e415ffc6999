"""Module API as PyTorch's: forward and forward-pre hooks with removable handles, apply, recursive train/eval,
containers, buffers (persistent or not), Dropout2d's channel masks, Embedding's padding row, and clear errors for
bad arguments, wrong input shapes and state dicts that do not fit (each naming the module and the values)."""

from __future__ import annotations

import numpy as np
import pytest

from rtxviz import ShapeError, Tensor, Variable, manual_seed, nn, no_grad
from rtxviz.nn import StateDictError
from rtxviz.nn import functional as F


def test_forward_hooks_see_and_replace_arguments_and_outputs_and_handles_remove_them() -> None:
    lin = nn.Linear(3, 2).double()
    calls: list[str] = []

    def pre(mod: nn.Module, args: tuple) -> tuple:
        calls.append("pre")
        return (args[0] * 2.0,)

    def post(mod: nn.Module, args: tuple, out: Tensor) -> Tensor:
        calls.append("post")
        assert mod is lin and np.allclose(args[0].numpy(), 2.0)  # the hook sees the replaced arguments
        return out + 1.0

    x = Tensor.ones([1, 3], dtype="float64")
    plain = lin(x).numpy()
    doubled = lin(Tensor.full([1, 3], 2.0, dtype="float64")).numpy()
    h_pre, h_post = lin.register_forward_pre_hook(pre), lin.register_forward_hook(post)
    np.testing.assert_allclose(lin(x).numpy(), doubled + 1.0)
    assert calls == ["pre", "post"]
    h_pre.remove()
    h_post.remove()
    h_post.remove()  # removing twice is harmless, as PyTorch's
    np.testing.assert_allclose(lin(x).numpy(), plain)
    order: list[int] = []
    lin.register_forward_hook(lambda m, a, o: order.append(1))
    lin.register_forward_hook(lambda m, a, o: order.append(0), prepend=True)
    lin(x)
    assert order == [0, 1]
    with pytest.raises(TypeError, match="callable"):
        lin.register_forward_hook("not a function")  # type: ignore[arg-type]


def test_hooks_collect_activations_of_every_submodule() -> None:
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    shapes: dict[str, tuple] = {}
    handles = [m.register_forward_hook(lambda m, a, o, n=n: shapes.__setitem__(n, o.shape))
               for n, m in net.named_modules() if n]
    net(Tensor.ones([5, 4]))
    assert shapes == {"0": (5, 3), "1": (5, 3), "2": (5, 2)}
    for h in handles:
        h.remove()
    shapes.clear()
    net(Tensor.ones([5, 4]))
    assert shapes == {}


def test_apply_visits_children_first_then_self() -> None:
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 1)))
    seen: list[str] = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]


def test_train_eval_recurse_through_overrides_and_refuse_non_bools() -> None:
    class Frozen(nn.Module):
        def train(self, mode: bool = True) -> nn.Module:  # a module that stays in eval, as some users write
            return super().train(False)

    net = nn.Sequential(nn.BatchNorm1d(2), nn.Sequential(Frozen(), nn.Dropout()))
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert [m.training for m in net.modules()] == [True, True, True, False, True]
    with pytest.raises(ValueError, match="bool"):
        net.train("yes")  # type: ignore[arg-type]


def test_batchnorm_train_and_eval_semantics() -> None:
    bn = nn.BatchNorm2d(2).double()
    x = Tensor(np.random.default_rng(0).standard_normal((4, 2, 3, 3)))
    y = bn(x).numpy()
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0.0, atol=1e-12)  # batch statistics while training
    mean, var = x.numpy().mean(axis=(0, 2, 3)), x.numpy().var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * var, rtol=1e-12)
    assert bn.num_batches_tracked.item() == 1 and bn.num_batches_tracked.dtype.name == "int64"
    bn.eval()
    expected = (x.numpy() - bn.running_mean.numpy()[None, :, None, None]) / np.sqrt(
        bn.running_var.numpy()[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(bn(x).numpy(), expected, rtol=1e-12)
    assert bn.num_batches_tracked.item() == 1  # eval leaves the statistics alone
    untracked = nn.BatchNorm1d(3, track_running_stats=False)
    assert list(untracked.state_dict()) == ["weight", "bias"] and untracked.running_mean is None
    bn.reset_running_stats()
    assert bn.running_mean.tolist() == [0.0, 0.0] and bn.num_batches_tracked.item() == 0


def test_batchnorm_converts_with_double_but_keeps_its_counter_int64() -> None:
    bn = nn.BatchNorm1d(3).double()
    assert bn.running_mean.dtype.name == "float64" and bn.num_batches_tracked.dtype.name == "int64"


def test_non_persistent_buffers_stay_out_of_the_state_dict() -> None:
    m = nn.Module()
    m.register_buffer("kept", Tensor.zeros([2]))
    m.register_buffer("scratch", Tensor.ones([2]), persistent=False)
    assert list(m.state_dict()) == ["kept"]
    assert [n for n, _ in m.named_buffers()] == ["kept", "scratch"]
    with pytest.raises(KeyError, match="'.'"):
        m.register_buffer("a.b", Tensor.zeros([1]))


def test_dropout2d_zeroes_whole_channels_and_scales_the_rest() -> None:
    manual_seed(3)
    drop = nn.Dropout2d(0.4)
    x = Variable(np.ones((8, 16, 3, 3)), requires_grad=True)
    y = drop(x).numpy()
    per_channel = y.reshape(8 * 16, 9)
    assert np.all(per_channel.std(axis=1) == 0.0)  # one decision per (sample, channel)
    kept = per_channel[:, 0] != 0
    np.testing.assert_allclose(per_channel[kept, 0], 1.0 / 0.6)
    assert 0.3 < 1.0 - kept.mean() < 0.5
    drop(x).sum().backward()  # the gradient is the same mask
    assert set(np.unique(x.grad.numpy()).round(6)) <= {0.0, round(1 / 0.6, 6)}
    assert drop.eval()(x) is x
    with pytest.raises(ShapeError, match="dropout2d"):
        nn.Dropout2d()(Tensor.ones([4, 3]))
    with pytest.raises(ValueError, match="Dropout2d: p must be between 0 and 1"):
        nn.Dropout2d(1.5)


def test_embedding_padding_row_starts_at_zero_and_gets_no_gradient() -> None:
    emb = nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4 and emb.weight.numpy()[4].tolist() == [0.0, 0.0, 0.0]
    emb(Tensor([[4, 1], [4, 4]])).sum().backward()
    assert emb.weight.grad.numpy()[4].tolist() == [0.0, 0.0, 0.0]
    assert emb.weight.grad.numpy()[1].tolist() == [1.0, 1.0, 1.0]
    frozen = nn.Embedding.from_pretrained(Tensor.ones([3, 2]), padding_idx=0)
    assert not frozen.weight.requires_grad and frozen.weight.tolist()[0] == [1.0, 1.0]
    with pytest.raises(ValueError, match="max_norm"):
        nn.Embedding(3, 2, max_norm=1.0)
    with pytest.raises(ValueError, match="padding_idx 5"):
        nn.Embedding(5, 2, padding_idx=5)


def test_containers_behave_as_lists_and_dicts() -> None:
    blocks = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    blocks += [nn.Linear(2, 3)]
    blocks[1] = nn.Tanh()
    del blocks[0]
    assert [type(b).__name__ for b in blocks] == ["Tanh", "Linear"]
    assert [n for n, _ in blocks.named_children()] == ["0", "1"]
    with pytest.raises(IndexError, match="ModuleList: index 5"):
        blocks[5]
    d = nn.ModuleDict({"a": nn.Linear(2, 2)})
    d.update([("b", nn.ReLU())])
    assert d.keys() == ["a", "b"] and isinstance(d.pop("b"), nn.ReLU) and len(d) == 1
    with pytest.raises(KeyError, match="ModuleDict has no key 'zz'"):
        d["zz"]
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    seq.insert(1, nn.Tanh())
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "ReLU"]
    ps = nn.ParameterList([Tensor.zeros([2])])
    ps.append(nn.Parameter(Tensor.ones([1])))
    assert [n for n, _ in ps.named_parameters()] == ["0", "1"] and all(p.requires_grad for p in ps)
    with pytest.raises(TypeError, match="ParameterList"):
        ps.append([1.0])


def test_softmax_default_dim_and_activation_arguments() -> None:
    x = Tensor(np.random.default_rng(1).standard_normal((2, 3, 4)))
    np.testing.assert_allclose(nn.Softmax()(x).numpy().sum(axis=0), 1.0)  # 3-D: dim 0, PyTorch's legacy rule
    np.testing.assert_allclose(nn.Softmax(dim=-1)(x).numpy().sum(axis=-1), 1.0)
    assert nn.ReLU(inplace=True)(Tensor.from_slice([-1.0, 1.0], [2])).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="GELU: approximate"):
        nn.GELU("fast")


@pytest.mark.parametrize("make,match", [
    (lambda: nn.Conv2d(4, 6, 3, groups=4), r"Conv2d: groups=4 must divide in_channels=4 and out_channels=6"),
    (lambda: nn.Conv2d(3, 4, 3, stride=2, padding="same"), r"Conv2d: padding='same' needs stride 1"),
    (lambda: nn.Conv2d(3, 4, 3, padding="full"), r"Conv2d: padding must be .*'full'"),
    (lambda: nn.Conv1d(3, 4, 0), r"Conv1d: kernel_size must be >= 1"),
    (lambda: nn.Conv2d(3, 4, 3, padding_mode="mirror"), r"Conv2d: padding_mode must be one of"),
    (lambda: nn.ConvTranspose2d(3, 4, 3, padding="same"), r"ConvTranspose2d: padding must be an int or a tuple"),
    (lambda: nn.BatchNorm2d(3, momentum=2.0), r"BatchNorm2d: momentum must be a float in \[0, 1\] or None"),
    (lambda: nn.GroupNorm(4, 6), r"GroupNorm: num_channels=6 must be divisible by num_groups=4"),
    (lambda: nn.MaxPool2d(2, padding=2), r"MaxPool2d: padding \(2, 2\) must be at most half the \(dilated\) "
                                         r"kernel size \(2, 2\)"),
    (lambda: nn.MaxPool2d(2, return_indices=True), r"MaxPool2d: return_indices=True is not supported"),
    (lambda: nn.CrossEntropyLoss(label_smoothing=1.5), r"CrossEntropyLoss: label_smoothing must be between"),
    (lambda: nn.KLDivLoss(reduction="avg"), r"KLDivLoss: reduction must be one of .*'batchmean'"),
    (lambda: nn.Linear(3, -1), r"Linear: out_features must be >= 0"),
    (lambda: nn.Unflatten(1, (2, -1, -1)), r"Unflatten: unflattened_size"),
])
def test_bad_arguments_are_refused_naming_the_module_and_value(make, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("module,x,match", [
    (nn.Conv2d(3, 4, 3), Tensor.ones([2, 2, 5, 5]), r"Conv2d\(3, 4\): input has 2 channels .*\(2, 2, 5, 5\)"),
    (nn.Conv1d(3, 4, 3), Tensor.ones([2, 3, 5, 5]),
     r"Conv1d: expected 2D or 3D input \(\[C, L\] unbatched or \[N, C, L\] batched\), got 4D"),
    (nn.BatchNorm2d(3), Tensor.ones([2, 3, 4]), r"BatchNorm2d: expected 4D input .*got 3D input of shape"),
    (nn.BatchNorm1d(3), Tensor.ones([2, 4]), r"BatchNorm1d\(3\): input has 4 channels"),
    (nn.GroupNorm(2, 4), Tensor.ones([2, 6, 3]), r"GroupNorm\(2, 4\): expected input \[N, 4, ...\]"),
    (nn.LayerNorm([3, 4]), Tensor.ones([2, 4, 3]), r"LayerNorm\(\(3, 4\)\): the input's last 2 dims"),
    (nn.MaxPool2d(2), Tensor.ones([4, 4]), r"MaxPool2d: expected 3D or 4D input"),
    (nn.Linear(3, 2), Tensor.ones([4, 5]), r"Linear\(3, 2\): input has 5 features"),
    (nn.Unflatten(1, (2, 4)), Tensor.ones([3, 6]), r"Unflatten: unflattened_size \(2, 4\) does not fit dim 1"),
])
def test_wrong_inputs_get_errors_naming_the_module_and_shapes(module: nn.Module, x: Tensor, match: str) -> None:
    with pytest.raises((ValueError, ShapeError), match=match):
        module(x)


def test_batchnorm_in_training_needs_more_than_one_value_per_channel() -> None:
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(Tensor.ones([1, 3]))
    bn = nn.BatchNorm1d(3).eval()
    with no_grad():
        assert bn(Tensor.ones([1, 3])).shape == (1, 3)  # eval uses the running statistics


def test_state_dicts_that_do_not_fit_are_refused_with_keys_and_shapes() -> None:
    bn = nn.BatchNorm2d(3)
    state = {k: v.numpy().copy() for k, v in bn.state_dict().items()}
    del state["running_var"]
    with pytest.raises(StateDictError, match=r"load_state_dict\(BatchNorm2d\): missing keys \['running_var'\]"):
        bn.load_state_dict(state)
    state["running_var"] = np.ones(4, dtype=np.float32)
    with pytest.raises(StateDictError, match=r"shape mismatch for 'running_var': the model has \(3,\), the state "
                                             r"has \(4,\)"):
        bn.load_state_dict(state)
    state["running_var"] = np.ones(3, dtype=np.float32)
    state["extra"] = np.zeros(1)
    with pytest.raises(StateDictError, match=r"unexpected keys \['extra'\]"):
        bn.load_state_dict(state)
    missing, unexpected = bn.load_state_dict(state, strict=False)
    assert (missing, unexpected) == ([], ["extra"])


def test_one_hot_and_functional_errors() -> None:
    assert F.one_hot(Tensor([3, 0])).tolist() == [[0, 0, 0, 1], [1, 0, 0, 0]]
    with pytest.raises(ValueError, match=r"one_hot: class values must be smaller than num_classes \(2\), got 3"):
        F.one_hot(Tensor([3]), 2)
    with pytest.raises(Exception, match="one_hot: expected an integer"):
        F.one_hot(Tensor.ones([2]))
    with pytest.raises(ValueError, match="conv2d: padding='same' needs stride 1"):
        F.conv2d(Tensor.ones([1, 1, 4, 4]), Tensor.ones([1, 1, 3, 3]), stride=2, padding="same")
    with pytest.raises(ValueError, match="cosine_embedding_loss: every target must be 1 or -1"):
        F.cosine_embedding_loss(Tensor.ones([2, 3]), Tensor.ones([2, 3]), Tensor([1, 0]))


def test_conv_transpose_output_size_picks_the_output_padding() -> None:
    up = nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1)
    x = Tensor.ones([1, 2, 4, 4])
    assert up(x).shape == (1, 2, 7, 7) and up(x, output_size=(8, 8)).shape == (1, 2, 8, 8)
    with pytest.raises(ValueError, match=r"output_size \(10, 10\) is not reachable"):
        up(x, output_size=(10, 10))


@pytest.mark.parametrize("momentum", [0.1, None])
def test_a_graph_cache_replay_of_a_batchnorm_step_updates_the_statistics_as_eager_calls(momentum) -> None:
    from rtxviz.engine.cache import cache_graph, init_graph_cache

    rng = np.random.default_rng(5)
    batches = [Tensor(rng.standard_normal((6, 3))) for _ in range(3)]
    eager, cached = nn.BatchNorm1d(3, momentum=momentum).double(), nn.BatchNorm1d(3, momentum=momentum).double()
    for x in batches:
        eager(x).pow(2).sum().backward()

    def step(x: Tensor) -> Tensor:
        loss = cached(x).pow(2).sum()
        loss.backward()
        return loss

    init_graph_cache(4)
    graph = cache_graph(step, batches[0])
    for x in batches[1:]:
        graph.execute(x)
    assert cached.num_batches_tracked.item() == eager.num_batches_tracked.item() == 3
    np.testing.assert_allclose(cached.running_mean.numpy(), eager.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(cached.running_var.numpy(), eager.running_var.numpy(), rtol=1e-12)
