"""Generate tests/nn/data/rnn_reference.json with PyTorch (run by hand, never by the tests):

    /tmp/torchvenv/bin/python tests/nn/make_rnn_reference.py

Each case builds one PyTorch module in float64 (RNN, LSTM, GRU, their cells, MultiheadAttention, the Transformer
layers and stacks) and stores: its constructor arguments, its state_dict as nested lists, the inputs (drawn here
with numpy), the outputs (a nested result flattened in order, None kept as null), and the gradients of every
float input and every parameter for loss = sum_i sum(output_i * weight_i), the weights drawn here too. The tests
load the state dict into rtxviz's module of the same name and compare everything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

torch.set_default_dtype(torch.float64)
OUT = Path(__file__).parent / "data" / "rnn_reference.json"
rng = np.random.default_rng(2024)


def arr(t: torch.Tensor) -> Any:
    return t.detach().cpu().numpy().tolist()


def flatten(result: Any) -> list:
    """(out, (h, c)) -> [out, h, c]; None kept."""
    if result is None or isinstance(result, torch.Tensor):
        return [result]
    out: list = []
    for r in result:
        out += flatten(r)
    return out


def float_input(*shape: int) -> dict:
    return {"data": rng.standard_normal(shape).tolist(), "dtype": "float64"}


def bool_input(array: np.ndarray) -> dict:
    return {"data": array.astype(bool).tolist(), "dtype": "bool"}


def float_mask(array: np.ndarray) -> dict:
    return {"data": array.tolist(), "dtype": "float64"}


def to_torch(spec: dict) -> torch.Tensor:
    if spec["dtype"] == "bool":
        return torch.tensor(spec["data"], dtype=torch.bool)
    return torch.tensor(spec["data"], dtype=torch.float64, requires_grad=True)


def resolve(value: Any, tensors: dict) -> Any:
    """{"input": name} -> that tensor; lists of them (an LSTM's (h0, c0)) resolve element-wise."""
    if isinstance(value, dict) and "input" in value:
        return tensors[value["input"]]
    if isinstance(value, list):
        return tuple(resolve(v, tensors) for v in value)
    return value


def case(name: str, module_name: str, kwargs: dict, inputs: dict, args: list, call_kwargs: dict | None = None,
         build: Any = None, stack: dict | None = None) -> dict:
    torch.manual_seed(len(name))
    if build is not None:
        module = build()
    else:
        module = getattr(nn, module_name)(**kwargs)
    module = module.double().train()
    tensors = {k: to_torch(v) for k, v in inputs.items()}
    call_kwargs = call_kwargs or {}
    result = module(*[resolve(a, tensors) for a in args],
                    **{k: resolve(v, tensors) for k, v in call_kwargs.items()})
    outputs = flatten(result)
    weights = [None if o is None else rng.standard_normal(tuple(o.shape)) for o in outputs]
    loss = sum((o * torch.tensor(w)).sum() for o, w in zip(outputs, weights, strict=True) if o is not None)
    loss.backward()
    grads = {k: arr(t.grad) for k, t in tensors.items() if t.requires_grad and t.grad is not None}
    grads.update({"param:" + k: arr(p.grad) for k, p in module.named_parameters() if p.grad is not None})
    out = {
        "name": name, "module": module_name, "kwargs": kwargs,
        "state": {k: arr(v) for k, v in module.state_dict().items()},
        "inputs": inputs, "args": args, "call_kwargs": call_kwargs,
        "outputs": [None if o is None else arr(o) for o in outputs],
        "weights": [None if w is None else w.tolist() for w in weights],
        "grads": grads,
    }
    if stack is not None:
        out["stack"] = stack
    return out


T, N, I, H = 5, 3, 4, 6


def recurrent_cases() -> list:
    cases = []
    configs = [
        ("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("RNN", {"num_layers": 2, "bias": False}),
        ("RNN", {"bidirectional": True, "batch_first": True}),
        ("LSTM", {}), ("LSTM", {"num_layers": 2}), ("LSTM", {"bidirectional": True}),
        ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
        ("LSTM", {"proj_size": 3}), ("LSTM", {"proj_size": 3, "num_layers": 2, "bidirectional": True}),
        ("LSTM", {"bias": False, "num_layers": 3}),
        ("GRU", {}), ("GRU", {"num_layers": 2, "batch_first": True}), ("GRU", {"bidirectional": True}),
        ("GRU", {"num_layers": 2, "bidirectional": True, "bias": False}),
    ]
    for module, extra in configs:
        kwargs = {"input_size": I, "hidden_size": H, **extra}
        layers = extra.get("num_layers", 1) * (2 if extra.get("bidirectional") else 1)
        out_h = extra.get("proj_size", 0) or H
        x_shape = (N, T, I) if extra.get("batch_first") else (T, N, I)
        tag = "-".join(f"{k}={v}" for k, v in extra.items()) or "default"
        # zero initial state
        cases.append(case(f"{module} {tag}", module, kwargs, {"x": float_input(*x_shape)}, [{"input": "x"}]))
        # given initial state
        inputs = {"x": float_input(*x_shape), "h0": float_input(layers, N, out_h)}
        hx: Any = {"input": "h0"}
        if module == "LSTM":
            inputs["c0"] = float_input(layers, N, H)
            hx = [{"input": "h0"}, {"input": "c0"}]
        cases.append(case(f"{module} {tag} with state", module, kwargs, inputs, [{"input": "x"}, hx]))
    # unbatched input, with and without state
    for module in ("RNN", "LSTM", "GRU"):
        kwargs = {"input_size": I, "hidden_size": H, "num_layers": 2}
        cases.append(case(f"{module} unbatched", module, kwargs, {"x": float_input(T, I)}, [{"input": "x"}]))
        inputs = {"x": float_input(T, I), "h0": float_input(2, H)}
        hx = {"input": "h0"}
        if module == "LSTM":
            inputs["c0"] = float_input(2, H)
            hx = [{"input": "h0"}, {"input": "c0"}]
        cases.append(case(f"{module} unbatched with state", module, kwargs, inputs, [{"input": "x"}, hx]))
    # dropout between layers is off in eval mode: checked with a module put in eval by the test
    return cases


def cell_cases() -> list:
    cases = []
    for module, extra in [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu", "bias": False}), ("LSTMCell", {}),
                          ("LSTMCell", {"bias": False}), ("GRUCell", {}), ("GRUCell", {"bias": False})]:
        kwargs = {"input_size": I, "hidden_size": H, **extra}
        tag = "-".join(f"{k}={v}" for k, v in extra.items()) or "default"
        cases.append(case(f"{module} {tag}", module, kwargs, {"x": float_input(N, I)}, [{"input": "x"}]))
        inputs = {"x": float_input(N, I), "h0": float_input(N, H)}
        hx: Any = {"input": "h0"}
        if module == "LSTMCell":
            inputs["c0"] = float_input(N, H)
            hx = [{"input": "h0"}, {"input": "c0"}]
        cases.append(case(f"{module} {tag} with state", module, kwargs, inputs, [{"input": "x"}, hx]))
        unbatched = {"x": float_input(I), "h0": float_input(H)}
        hx = {"input": "h0"}
        if module == "LSTMCell":
            unbatched["c0"] = float_input(H)
            hx = [{"input": "h0"}, {"input": "c0"}]
        cases.append(case(f"{module} {tag} unbatched", module, kwargs, unbatched, [{"input": "x"}, hx]))
    return cases


L, S, E, HEADS = 4, 5, 8, 2


def causal_bool(n: int) -> np.ndarray:
    return np.triu(np.ones((n, n), dtype=bool), 1)  # True: blocked (PyTorch's bool masks)


def padding(n: int, s: int) -> np.ndarray:
    m = np.zeros((n, s), dtype=bool)
    m[0, -2:] = True
    m[1, -1] = True
    return m


def attention_cases() -> list:
    cases = []
    base = {"embed_dim": E, "num_heads": HEADS, "dropout": 0.0}

    def qkv(batch_first: bool = False, kdim: int = E, vdim: int = E, n: int = 2, unbatched: bool = False) -> dict:
        def shape(length: int, dim: int) -> tuple:
            if unbatched:
                return (length, dim)
            return (n, length, dim) if batch_first else (length, n, dim)
        return {"q": float_input(*shape(L, E)), "k": float_input(*shape(S, kdim)), "v": float_input(*shape(S, vdim))}

    args = [{"input": "q"}, {"input": "k"}, {"input": "v"}]
    cases.append(case("MHA default", "MultiheadAttention", base, qkv(), args))
    cases.append(case("MHA need_weights=False", "MultiheadAttention", base, qkv(), args, {"need_weights": False}))
    cases.append(case("MHA per-head weights", "MultiheadAttention", base, qkv(), args,
                      {"average_attn_weights": False}))
    cases.append(case("MHA batch_first no bias", "MultiheadAttention", {**base, "batch_first": True, "bias": False},
                      qkv(batch_first=True), args))
    cases.append(case("MHA kdim vdim", "MultiheadAttention", {**base, "kdim": 3, "vdim": 7}, qkv(kdim=3, vdim=7),
                      args))
    cases.append(case("MHA add_bias_kv", "MultiheadAttention", {**base, "add_bias_kv": True}, qkv(), args))
    cases.append(case("MHA add_zero_attn", "MultiheadAttention", {**base, "add_zero_attn": True}, qkv(), args))
    cases.append(case("MHA unbatched", "MultiheadAttention", base, qkv(unbatched=True), args))
    bool_mask = np.zeros((L, S), dtype=bool)
    bool_mask[0, 3:] = True
    bool_mask[2, 0] = True
    for need in (True, False):
        inputs = {**qkv(), "mask": bool_input(bool_mask)}
        cases.append(case(f"MHA bool attn_mask need_weights={need}", "MultiheadAttention", base, inputs, args,
                          {"attn_mask": {"input": "mask"}, "need_weights": need}))
        inputs = {**qkv(), "kpm": bool_input(padding(2, S))}
        cases.append(case(f"MHA key_padding_mask need_weights={need}", "MultiheadAttention", base, inputs, args,
                          {"key_padding_mask": {"input": "kpm"}, "need_weights": need}))
        float_attn = rng.standard_normal((L, S))
        inputs = {**qkv(), "mask": float_mask(float_attn), "kpm": bool_input(padding(2, S))}
        cases.append(case(f"MHA float attn_mask and key_padding_mask need_weights={need}", "MultiheadAttention",
                          base, inputs, args, {"attn_mask": {"input": "mask"}, "key_padding_mask": {"input": "kpm"},
                                               "need_weights": need}))
        per_head = rng.standard_normal((2 * HEADS, L, S)) < -1.0
        inputs = {**qkv(), "mask": bool_input(per_head)}
        cases.append(case(f"MHA 3-D attn_mask need_weights={need}", "MultiheadAttention", base, inputs, args,
                          {"attn_mask": {"input": "mask"}, "need_weights": need}))
    self_x = {"x": float_input(L, 2, E), "mask": bool_input(causal_bool(L))}
    for need in (True, False):
        cases.append(case(f"MHA is_causal need_weights={need}", "MultiheadAttention", base, self_x,
                          [{"input": "x"}] * 3, {"attn_mask": {"input": "mask"}, "is_causal": True,
                                                 "need_weights": need}))
    return cases


D, NHEAD, FF = 8, 2, 16


def transformer_cases() -> list:
    cases = []
    layer_base = {"d_model": D, "nhead": NHEAD, "dim_feedforward": FF, "dropout": 0.0}
    variants = [{}, {"norm_first": True}, {"batch_first": True, "activation": "gelu"}, {"bias": False},
                {"layer_norm_eps": 1e-3, "norm_first": True, "batch_first": True}]
    for extra in variants:
        kwargs = {**layer_base, **extra}
        bf = extra.get("batch_first", False)
        tag = "-".join(f"{k}={v}" for k, v in extra.items()) or "default"
        src = float_input(*((2, L, D) if bf else (L, 2, D)))
        cases.append(case(f"EncoderLayer {tag}", "TransformerEncoderLayer", kwargs, {"src": src},
                          [{"input": "src"}]))
        tgt = float_input(*((2, L, D) if bf else (L, 2, D)))
        memory = float_input(*((2, S, D) if bf else (S, 2, D)))
        cases.append(case(f"DecoderLayer {tag}", "TransformerDecoderLayer", kwargs, {"tgt": tgt, "memory": memory},
                          [{"input": "tgt"}, {"input": "memory"}]))
    # masks
    cases.append(case("EncoderLayer causal", "TransformerEncoderLayer", layer_base,
                      {"src": float_input(L, 2, D), "mask": bool_input(causal_bool(L))}, [{"input": "src"}],
                      {"src_mask": {"input": "mask"}, "is_causal": True}))
    cases.append(case("EncoderLayer float causal and padding", "TransformerEncoderLayer",
                      {**layer_base, "norm_first": True},
                      {"src": float_input(L, 2, D),
                       "mask": float_mask(np.where(causal_bool(L), -np.inf, 0.0)),
                       "kpm": bool_input(padding(2, L))}, [{"input": "src"}],
                      {"src_mask": {"input": "mask"}, "src_key_padding_mask": {"input": "kpm"}}))
    cases.append(case("DecoderLayer causal with memory padding", "TransformerDecoderLayer",
                      {**layer_base, "norm_first": True},
                      {"tgt": float_input(L, 2, D), "memory": float_input(S, 2, D),
                       "mask": bool_input(causal_bool(L)), "mkpm": bool_input(padding(2, S)),
                       "tkpm": bool_input(np.array([[False, False, False, True], [False] * 4]))},
                      [{"input": "tgt"}, {"input": "memory"}],
                      {"tgt_mask": {"input": "mask"}, "memory_key_padding_mask": {"input": "mkpm"},
                       "tgt_key_padding_mask": {"input": "tkpm"}, "tgt_is_causal": True}))
    cases.append(case("DecoderLayer unbatched", "TransformerDecoderLayer", layer_base,
                      {"tgt": float_input(L, D), "memory": float_input(S, D)}, [{"input": "tgt"}, {"input": "memory"}]))
    # stacks: the layer deep-copied num_layers times, with and without a final norm
    for norm in (False, True):
        stack = {"layer": layer_base, "num_layers": 2, "norm": norm}

        def build_encoder(norm: bool = norm) -> nn.Module:
            layer = nn.TransformerEncoderLayer(**layer_base)
            return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(D) if norm else None,
                                         enable_nested_tensor=False)

        def build_decoder(norm: bool = norm) -> nn.Module:
            layer = nn.TransformerDecoderLayer(**layer_base)
            return nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(D) if norm else None)

        cases.append(case(f"Encoder norm={norm}", "TransformerEncoder", {}, {
            "src": float_input(L, 2, D), "mask": float_mask(np.where(causal_bool(L), -np.inf, 0.0))},
            [{"input": "src"}], {"mask": {"input": "mask"}}, build=build_encoder, stack=stack))
        cases.append(case(f"Decoder norm={norm}", "TransformerDecoder", {}, {
            "tgt": float_input(L, 2, D), "memory": float_input(S, 2, D), "mask": bool_input(causal_bool(L))},
            [{"input": "tgt"}, {"input": "memory"}], {"tgt_mask": {"input": "mask"}}, build=build_decoder,
            stack=stack))
    return cases


def main() -> None:
    data = {
        "torch": torch.__version__,
        "recurrent": recurrent_cases(), "cells": cell_cases(),
        "attention": attention_cases(), "transformer": transformer_cases(),
        "state_dict_keys": state_dict_keys(),
        "square_subsequent_mask_4": arr(nn.Transformer.generate_square_subsequent_mask(4)),
    }
    OUT.write_text(json.dumps(data, allow_nan=True))
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


def state_dict_keys() -> dict:
    """Key lists (in order) and shapes of a few modules' state dicts, including nn.Transformer's."""
    modules = {
        "LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3)":
            nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3),
        "GRU(4, 6, bias=False)": nn.GRU(4, 6, bias=False),
        "MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True)":
            nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True),
        "Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)":
            nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16),
    }
    return {k: [[name, list(t.shape)] for name, t in m.state_dict().items()] for k, m in modules.items()}


if __name__ == "__main__":
    main()
