"""Recurrent layers: RNN (tanh or relu), LSTM (with an optional projection), GRU, and their one-step cells.

Constructor arguments, defaults, parameter names (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``,
``bias_hh_l0``, ``weight_hr_l0``, ``..._reverse``), state_dict keys, the gate order (LSTM i, f, g, o; GRU r, z, n),
return values and the initialisation U(-1/sqrt(hidden), 1/sqrt(hidden)) are PyTorch's, so a PyTorch state dict
(its tensors turned into numpy arrays) loads as is.

Speed: each layer projects the inputs of every timestep with one matmul, then runs as one op
(`rtxviz.engine.ops.nn_recurrent.lstm_layer` / `gru_layer` / `rnn_layer`: the time loop on raw arrays, its
backward one helper op). The cells are those ops over one step.

>>> from rtxviz import Tensor, manual_seed
>>> manual_seed(0)
>>> lstm = LSTM(input_size=3, hidden_size=4, num_layers=2, batch_first=True)
>>> out, (h_n, c_n) = lstm(Tensor.ones([2, 5, 3]))
>>> out.shape, h_n.shape, c_n.shape
((2, 5, 4), (2, 2, 4), (2, 2, 4))
"""

from __future__ import annotations

import math
from typing import Any

from ..engine.errors import ShapeError
from ..engine.ops import nn as _F
from ..engine.ops.arithmetic import add
from ..engine.ops.linalg import linear
from ..engine.ops.nn_recurrent import gru_layer, lstm_layer, rnn_layer
from ..engine.ops.shape import cat, flip, narrow, squeeze, stack, unsqueeze
from ..engine.tensor import Tensor
from . import init
from .module import Module, Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _param(shape: tuple[int, ...], device: Any, dtype: Any) -> Parameter:
    return Parameter(Tensor.zeros(list(shape), device=device, dtype=dtype))


def _step(x: Any, t: int) -> Any:
    """Row t of a time-major [T, ...] tensor."""
    return squeeze(narrow(x, 0, t, 1), 0)


class _RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters of every layer and direction, shapes, the layer loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if not 0.0 <= float(dropout) <= 1.0 or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout!r}")
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size must be >= 0, got {proj_size}")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size {proj_size} must be smaller than hidden_size {hidden_size}")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = int(input_size), int(hidden_size), int(num_layers)
        self.bias, self.batch_first, self.dropout = bool(bias), bool(batch_first), float(dropout)
        self.bidirectional, self.proj_size = bool(bidirectional), int(proj_size)
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        self._flat_names: list[list[str]] = []  # per layer and direction: the names of its parameters
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes: list[tuple[str, tuple[int, ...]]] = [("weight_ih", (gate_size, layer_input)),
                                                             ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for base, shape in shapes:
                    setattr(self, base + suffix, _param(shape, device, dtype))
                    names.append(base + suffix)
                self._flat_names.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _layer_params(self, layer: int, direction: int) -> dict[str, Any]:
        names = self._flat_names[layer * (2 if self.bidirectional else 1) + direction]
        return {n.split("_l")[0]: getattr(self, n) for n in names}

    # -- shapes -------------------------------------------------------------------------------------------
    def _check_input(self, x: Any) -> bool:
        """Whether x is batched; raises on a wrong rank or feature size."""
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(x).__name__}")
        if x.ndim not in (2, 3):
            raise ShapeError(f"{name}: input must be 2-D (unbatched [L, {self.input_size}]) or 3-D ("
                             f"{'[N, L, H_in]' if self.batch_first else '[L, N, H_in]'}), got shape {x.shape}")
        if x.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input has {x.shape[-1]} features in its last dim, expected input_size "
                             f"{self.input_size} (input shape {x.shape})")
        return x.ndim == 3

    def _check_state(self, state: Any, label: str, batched: bool, batch: int, size: int) -> None:
        layers = self.num_layers * (2 if self.bidirectional else 1)
        expected = (layers, batch, size) if batched else (layers, size)
        if not isinstance(state, Tensor) or tuple(state.shape) != expected:
            got = tuple(state.shape) if isinstance(state, Tensor) else type(state).__name__
            raise ShapeError(f"{type(self).__name__}: {label} must have shape {expected} "
                             f"(num_layers·directions, {'batch, ' if batched else ''}size), got {got}")

    def _zeros(self, x: Tensor, batch: int, size: int) -> Tensor:
        layers = self.num_layers * (2 if self.bidirectional else 1)
        return Tensor.zeros([layers, batch, size], device=x.device, dtype=x.dtype)

    # -- the loop over layers -----------------------------------------------------------------------------
    def _run(self, x: Any, states: list[Any]) -> tuple[Any, list[Any]]:
        """x time-major [T, N, F]; states: per state (h, and c for the LSTM) a [layers·dirs, N, size] tensor.
        Returns (output [T, N, dirs·P], final states in the same layout)."""
        directions = 2 if self.bidirectional else 1
        finals: list[list[Any]] = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                init_states = [_step(s, k) for s in states]
                seq = flip(x, 0) if direction == 1 else x
                out, last = self._direction(seq, init_states, self._layer_params(layer, direction))
                outs.append(flip(out, 0) if direction == 1 else out)
                for acc, value in zip(finals, last, strict=True):
                    acc.append(value)
            x = outs[0] if directions == 1 else cat(outs, 2)
            if self.dropout > 0.0 and self.training and layer < self.num_layers - 1:
                x = _F.dropout(x, self.dropout, True)
        return x, [stack(f, 0) for f in finals]

    def _direction(self, x: Any, states: list[Any], p: dict[str, Any]) -> tuple[Any, list[Any]]:
        raise NotImplementedError  # each subclass runs one direction of one layer

    def _forward(self, x: Any, hx: Any, n_states: int) -> tuple[Any, list[Any], bool]:
        batched = self._check_input(x)
        if not batched:
            x = unsqueeze(x, 1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        batch = x.shape[1]
        real_hidden = self.proj_size or self.hidden_size
        sizes = [real_hidden, self.hidden_size][:n_states]
        labels = ["h_0", "c_0"][:n_states]
        if hx is None:
            states = [self._zeros(x, batch, s) for s in sizes]
        else:
            given = [hx] if n_states == 1 else list(hx) if isinstance(hx, tuple | list) else None
            if given is None or len(given) != n_states:
                raise TypeError(f"{type(self).__name__}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            for s, label, size in zip(given, labels, sizes, strict=True):
                self._check_state(s, label, batched, batch, size)
            states = [s if batched else unsqueeze(s, 1) for s in given]
        out, finals = self._run(x, states)
        if not batched:
            out = squeeze(out, 1)
            finals = [squeeze(f, 1) for f in finals]
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, finals, batched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        for key, default in (("num_layers", 1), ("bias", True), ("batch_first", False), ("dropout", 0.0),
                             ("bidirectional", False)):
            if getattr(self, key) != default:
                s += f", {key}={getattr(self, key)}"
        return s


def _biased_projection(x: Any, p: dict[str, Any], fold_hh: bool) -> Any:
    """Every timestep's input projection x·W_ihᵀ + b_ih (+ b_hh when `fold_hh`), as one matmul."""
    bias = p.get("bias_ih")
    if bias is not None and fold_hh:
        bias = add(bias, p["bias_hh"])
    return linear(x, p["weight_ih"], bias)


class RNN(_RNNBase):
    """An Elman RNN: h_t = act(x_t·W_ihᵀ + b_ih + h_{t-1}·W_hhᵀ + b_hh), act tanh or relu.

    forward(input, h_0=None) -> (output, h_n): output [L, N, D·H] (batch_first: [N, L, D·H]; unbatched
    [L, D·H]), h_n [num_layers·D, N, H].

    >>> from rtxviz import Tensor
    >>> out, h = RNN(2, 3, nonlinearity="relu")(Tensor.ones([4, 2]))
    >>> out.shape, h.shape
    ((4, 3), (1, 3))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def _direction(self, x: Any, states: list[Any], p: dict[str, Any]) -> tuple[Any, list[Any]]:
        xw = _biased_projection(x, p, fold_hh=True)
        y = rnn_layer(xw, states[0], p["weight_hh"], self.nonlinearity)
        return y, [_step(y, x.shape[0] - 1)]

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        out, finals, _ = self._forward(input, hx, 1)
        return out, finals[0]


class LSTM(_RNNBase):
    """Long short-term memory, PyTorch's gates (i, f, g, o) and optional projection of h (proj_size).

    forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n)): output [L, N, D·P] (P = proj_size or hidden_size),
    h_n [num_layers·D, N, P], c_n [num_layers·D, N, H]; batch_first and unbatched input as PyTorch.

    >>> from rtxviz import Tensor
    >>> out, (h, c) = LSTM(2, 4, proj_size=3, bidirectional=True)(Tensor.ones([5, 1, 2]))
    >>> out.shape, h.shape, c.shape
    ((5, 1, 6), (2, 1, 3), (2, 1, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)

    def _direction(self, x: Any, states: list[Any], p: dict[str, Any]) -> tuple[Any, list[Any]]:
        xw = _biased_projection(x, p, fold_hh=True)
        y = lstm_layer(xw, states[0], states[1], p["weight_hh"], p.get("weight_hr"))
        size = self.proj_size or self.hidden_size
        last = _step(y, x.shape[0] - 1)
        return narrow(y, 2, 0, size), [narrow(last, 1, 0, size), narrow(last, 1, size, self.hidden_size)]

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, tuple[Any, Any]]:
        out, finals, _ = self._forward(input, hx, 2)
        return out, (finals[0], finals[1])


class GRU(_RNNBase):
    """Gated recurrent unit, PyTorch's gates (r, z, n): n = tanh(W_in·x + b_in + r·(W_hn·h + b_hn)).

    forward(input, h_0=None) -> (output, h_n), shapes as RNN's.

    >>> from rtxviz import Tensor
    >>> out, h = GRU(2, 3, num_layers=2)(Tensor.ones([4, 5, 2]))
    >>> out.shape, h.shape
    ((4, 5, 3), (2, 5, 3))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def _direction(self, x: Any, states: list[Any], p: dict[str, Any]) -> tuple[Any, list[Any]]:
        xw = _biased_projection(x, p, fold_hh=False)  # b_hn sits inside r·(...), so b_hh stays per step
        y = gru_layer(xw, states[0], p["weight_hh"], p.get("bias_hh"))
        return y, [_step(y, x.shape[0] - 1)]

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        out, finals, _ = self._forward(input, hx, 1)
        return out, finals[0]


# -- cells --------------------------------------------------------------------------------------------------
class _CellBase(Module):
    """weight_ih [G·H, I], weight_hh [G·H, H], bias_ih, bias_hh [G·H]; U(±1/sqrt(H)) at start."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bool(bias)
        g = self.gates * hidden_size
        self.weight_ih = _param((g, input_size), device, dtype)
        self.weight_hh = _param((g, hidden_size), device, dtype)
        if bias:
            self.bias_ih = _param((g,), device, dtype)
            self.bias_hh = _param((g,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _prepare(self, x: Any, hx: Any, n_states: int) -> tuple[Any, list[Any], bool]:
        """(x [N, I], states [N, H] each, batched) with zero states where none are given."""
        name = type(self).__name__
        if not isinstance(x, Tensor) or x.ndim not in (1, 2):
            got = x.shape if isinstance(x, Tensor) else type(x).__name__
            raise ShapeError(f"{name}: input must be 1-D [{self.input_size}] or 2-D [N, {self.input_size}], got "
                             f"{got}")
        if x.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input has {x.shape[-1]} features, expected input_size {self.input_size} "
                             f"(input shape {x.shape})")
        batched = x.ndim == 2
        if not batched:
            x = unsqueeze(x, 0)
        n = x.shape[0]
        if hx is None:
            states = [Tensor.zeros([n, self.hidden_size], device=x.device, dtype=x.dtype) for _ in range(n_states)]
        else:
            given = [hx] if n_states == 1 else list(hx) if isinstance(hx, tuple | list) else []
            if len(given) != n_states:
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            expected = (n, self.hidden_size) if batched else (self.hidden_size,)
            for s in given:
                if not isinstance(s, Tensor) or tuple(s.shape) != expected:
                    got = tuple(s.shape) if isinstance(s, Tensor) else type(s).__name__
                    raise ShapeError(f"{name}: the state must have shape {expected} for input {tuple(x.shape)}, "
                                     f"got {got}")
            states = given if batched else [unsqueeze(s, 0) for s in given]
        return x, states, batched

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """h' = act(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh), act tanh or relu.

    >>> from rtxviz import Tensor
    >>> RNNCell(3, 2)(Tensor.ones([4, 3])).shape
    (4, 2)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Any, hx: Any = None) -> Any:
        x, (h,), batched = self._prepare(input, hx, 1)
        bias = None if self.bias_ih is None else add(self.bias_ih, self.bias_hh)
        out = _step(rnn_layer(unsqueeze(linear(x, self.weight_ih, bias), 0), h, self.weight_hh, self.nonlinearity), 0)
        return out if batched else squeeze(out, 0)


class LSTMCell(_CellBase):
    """One LSTM step: forward(input, (h, c)=None) -> (h', c').

    >>> from rtxviz import Tensor
    >>> h, c = LSTMCell(3, 2)(Tensor.ones([3]))
    >>> h.shape, c.shape
    ((2,), (2,))
    """

    gates = 4

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        x, (h, c), batched = self._prepare(input, hx, 2)
        bias = None if self.bias_ih is None else add(self.bias_ih, self.bias_hh)
        y = _step(lstm_layer(unsqueeze(linear(x, self.weight_ih, bias), 0), h, c, self.weight_hh), 0)
        h_new, c_new = narrow(y, 1, 0, self.hidden_size), narrow(y, 1, self.hidden_size, self.hidden_size)
        return (h_new, c_new) if batched else (squeeze(h_new, 0), squeeze(c_new, 0))


class GRUCell(_CellBase):
    """One GRU step: forward(input, h=None) -> h'.

    >>> from rtxviz import Tensor
    >>> GRUCell(3, 2)(Tensor.ones([5, 3])).shape
    (5, 2)
    """

    gates = 3

    def forward(self, input: Any, hx: Any = None) -> Any:
        x, (h,), batched = self._prepare(input, hx, 1)
        out = _step(gru_layer(unsqueeze(linear(x, self.weight_ih, self.bias_ih), 0), h, self.weight_hh,
                              self.bias_hh), 0)
        return out if batched else squeeze(out, 0)
