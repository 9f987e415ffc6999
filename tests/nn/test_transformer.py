"""MultiheadAttention and the Transformer layers and stacks against PyTorch (numbers stored by
tests/nn/make_rnn_reference.py, float64): outputs, attention weights and the gradients of every input and
parameter, for masks (bool, float, per head, key padding), is_causal, norm_first, batch_first, unbatched input;
state_dict keys; errors naming the shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rtxviz import Tensor, nn
from rtxviz.engine import DTypeError, ShapeError

from .test_rnn import check_case, reference


def _ids(cases: list) -> list[str]:
    return [c["name"] for c in cases]


@pytest.mark.parametrize("case", reference()["attention"], ids=_ids(reference()["attention"]))
def test_multihead_attention_matches_pytorch(case: dict) -> None:
    check_case(case)


@pytest.mark.parametrize("case", reference()["transformer"], ids=_ids(reference()["transformer"]))
def test_transformer_layer_matches_pytorch(case: dict) -> None:
    check_case(case)


def test_state_dict_keys_and_shapes_match_pytorch() -> None:
    keys = reference()["state_dict_keys"]
    ours = {
        "MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True)":
            nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True),
        "Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)":
            nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16),
    }
    for label, module in ours.items():
        assert [[k, list(t.shape)] for k, t in module.state_dict().items()] == keys[label], label


def test_square_subsequent_mask_matches_pytorch() -> None:
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(mask.numpy(), np.asarray(reference()["square_subsequent_mask_4"]))


def test_stack_layers_are_independent_copies() -> None:
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), num_layers=3)
    weights = [layer.linear1.weight for layer in enc.layers]
    assert len({id(w) for w in weights}) == 3 and len({id(w.data) for w in weights}) == 3
    assert len(list(enc.parameters())) == 3 * 12


def test_init_follows_pytorch() -> None:
    """Xavier-uniform in_proj (bound sqrt(6 / (E + 3E))), zero in_proj and out_proj biases."""
    mha = nn.MultiheadAttention(64, 4)
    bound = np.sqrt(6 / (64 + 192))
    w = mha.in_proj_weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()


def test_dropout_acts_only_in_training() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = Tensor(np.random.default_rng(0).standard_normal((4, 2, 8)).astype(np.float32))
    layer.eval()
    a, b = layer(x).numpy(), layer(x).numpy()
    np.testing.assert_array_equal(a, b)
    layer.train()
    assert not np.allclose(layer(x).numpy(), a)


def test_causal_attention_ignores_later_positions() -> None:
    """With the causal mask, changing the last position leaves every earlier output unchanged."""
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype="float64")
    x = np.random.default_rng(1).standard_normal((2, 5, 8))
    y = x.copy()
    y[:, -1] += 3.0
    a = layer(Tensor(x), src_mask=mask, is_causal=True).numpy()
    b = layer(Tensor(y), src_mask=mask, is_causal=True).numpy()
    np.testing.assert_allclose(a[:, :-1], b[:, :-1], atol=1e-12)
    assert not np.allclose(a[:, -1], b[:, -1])


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m(Tensor.zeros([4, 2, 7]), Tensor.zeros([5, 2, 8]), Tensor.zeros([5, 2, 8])), ShapeError,
     r"MultiheadAttention: query must have 8 features in its last dim, got shape \(4, 2, 7\)"),
    (lambda m: m(Tensor.zeros([4, 2, 8]), Tensor.zeros([5, 3, 8]), Tensor.zeros([5, 3, 8])), ShapeError,
     "have different batch sizes"),
    (lambda m: m(Tensor.zeros([4, 2, 8]), Tensor.zeros([5, 2, 8]), Tensor.zeros([6, 2, 8])), ShapeError,
     "must agree in their sequence and batch dims"),
    (lambda m: m(Tensor.zeros([4, 2, 8]), Tensor.zeros([5, 2, 8]), Tensor.zeros([5, 2, 8]),
                 attn_mask=Tensor(np.zeros((4, 4), dtype=bool))), ShapeError,
     r"attn_mask must have shape \(4, 5\) or \(4, 4, 5\)"),
    (lambda m: m(Tensor.zeros([4, 2, 8]), Tensor.zeros([5, 2, 8]), Tensor.zeros([5, 2, 8]),
                 key_padding_mask=Tensor(np.zeros((2, 4), dtype=bool))), ShapeError,
     r"key_padding_mask must have shape \(2, 5\)"),
    (lambda m: m(Tensor.zeros([4, 2, 8]), Tensor.zeros([5, 2, 8]), Tensor.zeros([5, 2, 8]),
                 key_padding_mask=Tensor(np.zeros((2, 5), dtype=np.int64))), DTypeError,
     "key_padding_mask must be a bool or float Tensor"),
    (lambda m: m(Tensor.zeros([4, 8]), Tensor.zeros([5, 2, 8]), Tensor.zeros([5, 2, 8])), ShapeError,
     "must all be 3-D"),
    (lambda m: m(Tensor.zeros([4, 2, 8]), Tensor.zeros([4, 2, 8]), Tensor.zeros([4, 2, 8]), is_causal=True),
     ValueError, "is_causal is a hint"),
])
def test_bad_calls_name_the_module_and_the_shapes(call: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(nn.MultiheadAttention(8, 2))


def test_bad_constructor_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="embed_dim 10 must be divisible by num_heads 3"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="activation must be 'relu', 'gelu' or a callable"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
