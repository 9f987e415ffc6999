"""rtxviz.nn: modules, layers, losses, initialisation, gradient clipping and .npz save/load.

>>> from rtxviz import Tensor, manual_seed
>>> from rtxviz import nn
>>> manual_seed(0)
>>> model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
>>> loss = nn.MSELoss()(model(Tensor.ones([2, 4])), Tensor.zeros([2, 3]))
>>> loss.backward()
>>> model[0].weight.grad.shape
(16, 4)
"""

from __future__ import annotations

from . import functional, init
from .layers import (
    GELU,
    AvgPool2d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
    MaxPool2d,
    ModuleList,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from .losses import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import ROOT_NAME, Module, Parameter, StateDictError
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .serialization import load, load_into, save
from .transformer import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .utils import clip_grad_norm_, clip_grad_value_

__all__ = [
    "GELU", "ROOT_NAME", "AvgPool2d", "BCEWithLogitsLoss", "Conv2d", "CrossEntropyLoss", "Dropout", "Embedding",
    "Flatten", "Identity", "L1Loss", "LayerNorm", "Linear", "MSELoss", "MaxPool2d", "Module", "ModuleList",
    "NLLLoss", "Parameter", "ReLU", "Sequential", "Sigmoid", "StateDictError", "Tanh", "clip_grad_norm_",
    "clip_grad_value_", "functional", "init", "load", "load_into", "save",
]
# recurrent and attention modules (rnn.py, transformer.py)
__all__ += [
    "GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "MultiheadAttention", "RNNCell", "Transformer",
    "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer",
]
