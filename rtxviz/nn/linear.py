"""Linear, Bilinear and Identity.

Weights are laid out as PyTorch's (Linear [out, in]) and initialised as PyTorch does by default
(Kaiming-uniform with a = sqrt(5), bias U(±1/sqrt(fan_in))), from rtxviz's seeded generator, so a PyTorch state
dict loads as is.

>>> from rtxviz import Tensor
>>> Linear(3, 2)(Tensor.ones([4, 3])).shape
(4, 2)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..engine.errors import ShapeError
from ..engine.ops.linalg import linear as _linear
from ..engine.tensor import Tensor
from . import init
from ._args import positive_int
from .functional import bilinear as _bilinear
from .module import Module, Parameter


def empty_parameter(shape: Sequence[int], device: Any, dtype: Any) -> Parameter:
    """A zero Parameter of `shape`, to be filled by the layer's reset_parameters."""
    return Parameter(Tensor.zeros(list(shape), device=device, dtype=dtype))


class Identity(Module):
    """Returns its input; any constructor arguments are ignored, as PyTorch's (a placeholder in a model).

    >>> Identity(54, unused="x")(3)
    3
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class Linear(Module):
    """y = x @ Wᵀ + b, W [out_features, in_features].

    >>> from rtxviz import Tensor
    >>> Linear(3, 2, bias=False).state_dict().keys()
    dict_keys(['weight'])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = positive_int(in_features, "Linear", "in_features", 0)
        self.out_features = positive_int(out_features, "Linear", "out_features", 0)
        self.weight = empty_parameter((self.out_features, self.in_features), device, dtype)
        if bias:
            self.bias = empty_parameter((self.out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight.numel():
            init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            init.default_bias_(self.bias, self.in_features)

    def forward(self, x: Any) -> Any:
        shape = x.shape
        if not shape or shape[-1] != self.in_features:
            raise ShapeError(f"Linear({self.in_features}, {self.out_features}): input has "
                             f"{shape[-1] if shape else 'no'} features in its last dim (input shape "
                             f"{tuple(shape)}), expected {self.in_features}")
        # The registry directly: `self.weight` finds nothing in the instance dict and lands in
        # Module.__getattr__ after a failed lookup, which costs more than this layer's bookkeeping on small inputs.
        params = self.__dict__["_parameters"]
        return _linear(x, params["weight"], params["bias"])

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1ᵀ · W_o · x2 + b_o for each output feature o, W [out_features, in1_features, in2_features]; inputs
    [*, in1_features] and [*, in2_features] with the same leading dims. Weight and bias start as PyTorch's:
    U(-1/sqrt(in1_features), 1/sqrt(in1_features)).

    >>> from rtxviz import Tensor
    >>> Bilinear(2, 3, 4)(Tensor.ones([5, 2]), Tensor.ones([5, 3])).shape
    (5, 4)
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features = positive_int(in1_features, "Bilinear", "in1_features")
        self.in2_features = positive_int(in2_features, "Bilinear", "in2_features")
        self.out_features = positive_int(out_features, "Bilinear", "out_features")
        self.weight = empty_parameter((self.out_features, self.in1_features, self.in2_features), device, dtype)
        if bias:
            self.bias = empty_parameter((self.out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in1_features)
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Any, input2: Any) -> Any:
        params = self.__dict__["_parameters"]
        return _bilinear(input1, input2, params["weight"], params["bias"])

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
