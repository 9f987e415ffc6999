"""The layers, gathered from the files they live in by concern (linear, conv, pooling, normalization,
activation, dropout, sparse, flatten, container), so `from rtxviz.nn.layers import Conv2d` keeps working.

>>> from rtxviz import Tensor, manual_seed
>>> manual_seed(0)
>>> net = Sequential(Linear(4, 8), ReLU(), Linear(8, 3))
>>> net(Tensor.ones([5, 4])).shape
(5, 3)
"""

from __future__ import annotations

from .activation import (
    CELU,
    ELU,
    GELU,
    SELU,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Softsign,
    Tanh,
)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .dropout import Dropout, Dropout2d
from .flatten import Flatten, Unflatten
from .linear import Bilinear, Identity, Linear
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from .padding import *  # noqa: F403 - the padding layers, listed in padding.__all__
from .padding import __all__ as _padding_all
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool2d,
    MaxPool2d,
)
from .sparse import Embedding

__all__ = [
    "CELU", "ELU", "GELU", "SELU", "AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv1d",
    "Conv2d", "ConvTranspose2d", "Dropout", "Dropout2d", "Embedding", "Flatten", "GroupNorm", "Hardswish",
    "Hardtanh", "Identity", "LayerNorm", "LeakyReLU", "Linear", "LogSigmoid", "LogSoftmax", "MaxPool2d", "Mish",
    "ModuleDict", "ModuleList", "ParameterList", "ReLU", "ReLU6", "SELU", "Sequential", "SiLU", "Sigmoid",
    "Softmax", "Softplus", "Softsign", "Tanh", "Unflatten",
    # PyTorch's next reach (a porting review): learnt slopes, bilinear forms, padding and adaptive pooling
    "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Bilinear", "PReLU", "ParameterDict",
    *_padding_all,
]
