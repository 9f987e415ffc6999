"""Activation modules, with PyTorch's arguments: ReLU, ReLU6, LeakyReLU, ELU, SELU, CELU, GELU (approximate
"none" or "tanh"), PReLU (a learnt slope), SiLU, Mish, Hardswish, Hardtanh, Softplus, Softsign, LogSigmoid, Tanh,
Sigmoid, Softmax, LogSoftmax. Each runs the engine's op of the same name (PReLU: F.prelu, a where of two ops).

`inplace=True` is accepted for PyTorch's constructors' sake and computed out of place: the values and
gradients are the same, and the graph the viewer draws has its usual nodes.

>>> from rtxviz import Tensor
>>> x = Tensor.from_slice([-2.0, 0.5], [2])
>>> LeakyReLU(0.25)(x).tolist(), Hardtanh(-1.0, 0.25)(x).tolist()
([-0.5, 0.5], [-1.0, 0.25])
>>> [round(v, 4) for v in Softmax(dim=0)(x).tolist()]
[0.0759, 0.9241]
"""

from __future__ import annotations

from typing import Any

from ..engine.ops import nn as _F
from ..engine.ops import unary as _U
from ..engine.ops.index import where as _where
from ..engine.tensor import Tensor
from ._args import positive_int
from .functional import prelu as _prelu
from .module import Module, Parameter


class _Activation(Module):
    """An elementwise activation; `inplace` is kept for repr and ignored (see the module docstring)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Activation):
    def forward(self, x: Any) -> Any:
        return _U.relu(x)


class ReLU6(_Activation):
    """min(max(x, 0), 6)."""

    def forward(self, x: Any) -> Any:
        return _U.hardtanh(x, 0.0, 6.0)


class LeakyReLU(_Activation):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.negative_slope = float(negative_slope)

    def forward(self, x: Any) -> Any:
        return _U.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(_Activation):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.alpha = float(alpha)

    def forward(self, x: Any) -> Any:
        return _U.elu(x, self.alpha)


class CELU(ELU):
    def forward(self, x: Any) -> Any:
        return _U.celu(x, self.alpha)


class SELU(_Activation):
    def forward(self, x: Any) -> Any:
        return _U.selu(x)


class GELU(Module):
    """GELU, exact (erf) by default; approximate="tanh" for the tanh form."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Any) -> Any:
        return _U.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class PReLU(Module):
    """max(0, x) + a · min(0, x) with a learnt slope `a`: one for every channel (num_parameters = C, dim 1 of
    the input) or one shared (num_parameters=1), each starting at `init`; state-dict key `weight`.

    >>> from rtxviz import Tensor
    >>> PReLU(init=0.5)(Tensor.from_slice([-2.0, 3.0], [2])).tolist()
    [-1.0, 3.0]
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        n = positive_int(num_parameters, "PReLU", "num_parameters")
        # PyTorch's attribute (an int); it shadows Module.num_parameters() on PReLU instances, which PyTorch lacks
        self.__dict__["num_parameters"] = n
        self.init = float(init)
        self.weight = Parameter(Tensor.zeros([n], device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.weight.data[...] = self.init

    def forward(self, x: Any) -> Any:
        return _prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class SiLU(_Activation):
    """x·σ(x) (swish)."""

    def forward(self, x: Any) -> Any:
        return _U.silu(x)


class Mish(_Activation):
    """x·tanh(softplus(x))."""

    def forward(self, x: Any) -> Any:
        return _U.mish(x)


class Hardswish(_Activation):
    """x·relu6(x + 3)/6."""

    def forward(self, x: Any) -> Any:
        return _U.hardswish(x)


class Hardtanh(_Activation):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        if not min_val < max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) must be smaller than max_val ({max_val})")
        self.min_val, self.max_val = float(min_val), float(max_val)

    def forward(self, x: Any) -> Any:
        return _U.hardtanh(x, self.min_val, self.max_val)


class Softplus(Module):
    """log(1 + e^(β·x))/β, and x itself where β·x > threshold (as PyTorch, for stability).

    >>> from rtxviz import Tensor
    >>> [round(v, 4) for v in Softplus(beta=2.0, threshold=1.0)(Tensor.from_slice([0.0, 3.0], [2])).tolist()]
    [0.3466, 3.0]
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)

    def forward(self, x: Any) -> Any:
        scaled = x if self.beta == 1.0 else x * self.beta
        soft = _U.softplus(scaled)
        if self.beta != 1.0:
            soft = soft * (1.0 / self.beta)
        return _where(scaled > self.threshold, x, soft)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    def forward(self, x: Any) -> Any:
        return _U.softsign(x)


class LogSigmoid(Module):
    def forward(self, x: Any) -> Any:
        return _U.logsigmoid(x)


class Tanh(Module):
    def forward(self, x: Any) -> Any:
        return _U.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Any) -> Any:
        return _U.sigmoid(x)


def legacy_softmax_dim(ndim: int) -> int:
    """PyTorch's choice when Softmax is given no dim: 0 for 0-, 1- and 3-dim inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """Softmax over `dim` (None: PyTorch's legacy choice, `legacy_softmax_dim`)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Any) -> Any:
        return _F.softmax(x, legacy_softmax_dim(x.ndim) if self.dim is None else self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax) over `dim`, in one stable op."""

    def forward(self, x: Any) -> Any:
        return _F.log_softmax(x, legacy_softmax_dim(x.ndim) if self.dim is None else self.dim)
