"""rtxviz.nn: modules, layers, losses, initialisation, gradient clipping and .npz save/load, as torch.nn.

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
from .module import ROOT_NAME, Module, Parameter, RemovableHandle, StateDictError
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
    "ROOT_NAME", "Module", "Parameter", "RemovableHandle", "StateDictError", "clip_grad_norm_", "clip_grad_value_",
    "functional", "init", "load", "load_into", "save",
]

# -- layers, containers and losses (issue 14: the course's modules) ----------------------------------------------
from .layers import *  # noqa: F403 - the layer files, listed in layers.__all__
from .layers import __all__ as _layers_all
from .losses import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .pooling import AvgPool1d, MaxPool1d
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ += [*_layers_all, "BCELoss", "BCEWithLogitsLoss", "CosineEmbeddingLoss", "CrossEntropyLoss", "HuberLoss",
            "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss", "SmoothL1Loss"]

# 1-D pooling, instance normalisation and upsampling (pooling.py, normalization.py, upsampling.py)
__all__ += ["AvgPool1d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "MaxPool1d", "Upsample",
            "UpsamplingBilinear2d", "UpsamplingNearest2d"]

# recurrent and attention modules (rnn.py, transformer.py)
__all__ += [
    "GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "MultiheadAttention", "RNNCell", "Transformer",
    "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer",
]
