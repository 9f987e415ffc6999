"""RNN, LSTM, GRU and their cells against PyTorch: outputs, final states and the gradients of every input and
parameter, for numbers stored by tests/nn/make_rnn_reference.py (float64); state_dict keys; errors."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rtxviz import Tensor, Variable, nn
from rtxviz.engine import ShapeError, grad

DATA = Path(__file__).parent / "data" / "rnn_reference.json"


@cache
def reference() -> dict:
    return json.loads(DATA.read_text())


def build(case: dict) -> nn.Module:
    """The rtxviz module of a reference case, in float64, with PyTorch's state dict loaded."""
    if "stack" in case:
        stack = case["stack"]
        kind = case["module"].replace("TransformerEncoder", "TransformerEncoderLayer").replace(
            "TransformerDecoder", "TransformerDecoderLayer")
        layer = getattr(nn, kind)(**stack["layer"])
        norm = nn.LayerNorm(stack["layer"]["d_model"]) if stack["norm"] else None
        module = getattr(nn, case["module"])(layer, stack["num_layers"], norm=norm)
    else:
        module = getattr(nn, case["module"])(**case["kwargs"])
    module = module.double()
    module.load_state_dict({k: np.asarray(v, dtype=np.float64) for k, v in case["state"].items()})
    return module


def _resolve(value: Any, tensors: dict) -> Any:
    if isinstance(value, dict) and "input" in value:
        return tensors[value["input"]]
    if isinstance(value, list):
        return tuple(_resolve(v, tensors) for v in value)
    return value


def _flatten(result: Any) -> list:
    if result is None or isinstance(result, Tensor):
        return [result]
    out: list = []
    for r in result:
        out += _flatten(r)
    return out


def check_case(case: dict, atol: float = 1e-10) -> None:
    """Run one case: outputs, then the gradients of Σ output·weight in every float input and parameter."""
    module = build(case)
    tensors: dict[str, Any] = {}
    for name, spec in case["inputs"].items():
        if spec["dtype"] == "bool":
            tensors[name] = Tensor(np.asarray(spec["data"], dtype=bool))
        else:
            tensors[name] = Variable(np.asarray(spec["data"], dtype=np.float64), requires_grad=True)
    result = module(*[_resolve(a, tensors) for a in case["args"]],
                    **{k: _resolve(v, tensors) for k, v in case["call_kwargs"].items()})
    outputs = _flatten(result)
    assert len(outputs) == len(case["outputs"]), case["name"]
    loss = None
    for i, (ours, theirs, w) in enumerate(zip(outputs, case["outputs"], case["weights"], strict=True)):
        if theirs is None:
            assert ours is None, f"{case['name']}: output {i} should be None"
            continue
        np.testing.assert_allclose(ours.numpy(), np.asarray(theirs), atol=atol, rtol=1e-9,
                                   err_msg=f"{case['name']}: output {i}")
        term = (ours * Tensor(np.asarray(w, dtype=np.float64))).sum()
        loss = term if loss is None else loss + term
    wrt = {k: t for k, t in tensors.items() if isinstance(t, Variable)}
    wrt.update({"param:" + k: p for k, p in module.named_parameters()})
    grads = grad(loss, list(wrt.values()), allow_unused=True)
    for (key, _), g in zip(wrt.items(), grads, strict=True):
        expected = case["grads"].get(key)
        if expected is None:  # PyTorch has no gradient there (an input it did not use): ours is none or zero
            assert g is None or not np.any(g.numpy()), f"{case['name']}: gradient of {key} should be zero"
            continue
        assert g is not None, f"{case['name']}: no gradient for {key}"
        np.testing.assert_allclose(g.numpy(), np.asarray(expected), atol=atol, rtol=1e-9,
                                   err_msg=f"{case['name']}: gradient of {key}")


def _ids(cases: list) -> list[str]:
    return [c["name"] for c in cases]


@pytest.mark.parametrize("case", reference()["recurrent"], ids=_ids(reference()["recurrent"]))
def test_recurrent_layer_matches_pytorch(case: dict) -> None:
    check_case(case)


@pytest.mark.parametrize("case", reference()["cells"], ids=_ids(reference()["cells"]))
def test_cell_matches_pytorch(case: dict) -> None:
    check_case(case)


def test_state_dict_keys_and_shapes_match_pytorch() -> None:
    keys = reference()["state_dict_keys"]
    ours = {
        "LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3)":
            nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3),
        "GRU(4, 6, bias=False)": nn.GRU(4, 6, bias=False),
    }
    for label, module in ours.items():
        assert [[k, list(t.shape)] for k, t in module.state_dict().items()] == keys[label], label


def test_init_is_uniform_within_one_over_sqrt_hidden() -> None:
    from rtxviz import manual_seed
    manual_seed(3)
    lstm = nn.LSTM(10, 25, num_layers=2)
    values = np.concatenate([p.numpy().ravel() for p in lstm.parameters()])
    bound = 1 / np.sqrt(25)
    assert values.min() >= -bound and values.max() <= bound
    # uniform on (-bound, bound): mean 0 and variance bound²/3 (about 11k draws)
    assert abs(values.mean()) < 0.01 and abs(values.var() - bound**2 / 3) < 0.01 * bound**2 * 3


def test_dropout_between_layers_only_in_training() -> None:
    """Dropout acts between layers while training and not in eval; one layer never drops."""
    case = next(c for c in reference()["recurrent"] if c["name"] == "LSTM num_layers=2")
    module = build(case)
    module.dropout = 0.5
    x = Tensor(np.asarray(case["inputs"]["x"]["data"]))
    module.eval()
    np.testing.assert_allclose(module(x)[0].numpy(), np.asarray(case["outputs"][0]), atol=1e-10)
    module.train()
    assert not np.allclose(module(x)[0].numpy(), np.asarray(case["outputs"][0]), atol=1e-6)


def test_lstm_trains_a_step_in_float32() -> None:
    lstm = nn.LSTM(3, 8, batch_first=True)
    out, (h, c) = lstm(Tensor(np.ones((2, 7, 3), dtype=np.float32)))
    (out.sum() + c.sum()).backward()
    assert out.dtype == np.float32 and lstm.weight_hh_l0.grad.shape == (32, 8)


@pytest.mark.parametrize("module, call, message", [
    (lambda: nn.LSTM(4, 6), lambda m: m(Tensor.zeros([5, 3, 7])), "LSTM: input has 7 features"),
    (lambda: nn.GRU(4, 6), lambda m: m(Tensor.zeros([5, 3, 2, 4])), "GRU: input must be 2-D"),
    (lambda: nn.RNN(4, 6, num_layers=2), lambda m: m(Tensor.zeros([5, 3, 4]), Tensor.zeros([1, 3, 6])),
     r"RNN: h_0 must have shape \(2, 3, 6\)"),
    (lambda: nn.LSTM(4, 6), lambda m: m(Tensor.zeros([5, 3, 4]), (Tensor.zeros([1, 3, 6]), Tensor.zeros([1, 2, 6]))),
     r"LSTM: c_0 must have shape \(1, 3, 6\)"),
    (lambda: nn.LSTMCell(4, 6), lambda m: m(Tensor.zeros([3, 5])), "LSTMCell: input has 5 features"),
    (lambda: nn.GRUCell(4, 6), lambda m: m(Tensor.zeros([3, 4]), Tensor.zeros([2, 6])),
     r"GRUCell: the state must have shape \(3, 6\)"),
])
def test_bad_shapes_name_the_module_and_the_shapes(module: Any, call: Any, message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        call(module())


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="RNN: nonlinearity"):
        nn.RNN(2, 3, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="LSTM: proj_size 4 must be smaller than hidden_size 3"):
        nn.LSTM(2, 3, proj_size=4)
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\)"):
        nn.LSTM(2, 3)(Tensor.zeros([4, 1, 2]), Tensor.zeros([1, 1, 3]))
