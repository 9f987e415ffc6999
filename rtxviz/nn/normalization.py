"""Normalisation layers: BatchNorm1d, BatchNorm2d (running statistics, train/eval, momentum or a cumulative
average), InstanceNorm1d/2d/3d, GroupNorm and LayerNorm, with PyTorch's arguments, parameter and buffer names, so a
PyTorch state dict (running_mean, running_var, num_batches_tracked included) loads as is.

>>> from rtxviz import Tensor
>>> bn = BatchNorm2d(3)
>>> list(bn.state_dict())
['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
>>> _ = bn(Tensor.ones([2, 3, 4, 4]))
>>> bn.num_batches_tracked.item(), [round(v, 3) for v in bn.running_mean.tolist()]
(1, [0.1, 0.1, 0.1])
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..engine import dtypes as _dtypes
from ..engine.errors import ShapeError
from ..engine.ops import nn as _F
from ..engine.ops.shape import squeeze as _squeeze
from ..engine.ops.shape import unsqueeze as _unsqueeze
from ..engine.tensor import Tensor
from . import init
from ._args import input_dims, positive_int
from .module import Module, Parameter


class _RunningStats(Module):
    """What BatchNorm and InstanceNorm share: the running statistics' buffers under PyTorch's names (registered as
    None when not tracked, so the state dict's keys are PyTorch's either way), and their reset."""

    num_features: int
    track_running_stats: bool

    def _register_running_stats(self, device: Any, dtype: Any) -> None:
        c = [self.num_features]
        if self.track_running_stats:
            self.register_buffer("running_mean", Tensor.zeros(c, device=device, dtype=dtype))
            self.register_buffer("running_var", Tensor.ones(c, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", Tensor.zeros([], device=device, dtype=_dtypes.int64))
        else:
            for buffer in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(buffer, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.data[...] = 0
            self.running_var.data[...] = 1
            self.num_batches_tracked.data[...] = 0


class _BatchNorm(_RunningStats):
    """What BatchNorm1d and BatchNorm2d share; a subclass says which input ranks it takes."""

    _dims: tuple[int, ...] = ()
    _layout = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        self.num_features = positive_int(num_features, name, "num_features")
        self.eps = float(eps)
        if momentum is not None and (isinstance(momentum, bool) or not 0.0 <= float(momentum) <= 1.0):
            raise ValueError(f"{name}: momentum must be a float in [0, 1] or None (a cumulative average), got "
                             f"{momentum!r}")
        self.momentum = None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        c = [self.num_features]
        if self.affine:
            self.weight = Parameter(Tensor.ones(c, device=device, dtype=dtype))
            self.bias = Parameter(Tensor.zeros(c, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self._register_running_stats(device, dtype)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, x: Any) -> Any:
        name = type(self).__name__
        input_dims(name, x, self._dims, self._layout)
        if x.shape[1] != self.num_features:
            raise ShapeError(f"{name}({self.num_features}): input has {x.shape[1]} channels in dim 1 (input shape "
                             f"{tuple(x.shape)}), expected {self.num_features}")
        # Batch statistics while training, and in eval too when there are no running statistics (as PyTorch).
        # While training, the op itself counts the batch and, with momentum None, takes 1/count as the factor,
        # so that a graph-cache replay of the step updates the statistics just as an eager call does.
        use_batch = self.training or self.running_mean is None
        if self.training:
            if not self.track_running_stats:
                return _F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
            return _F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, True, self.momentum,
                                 self.eps, num_batches_tracked=self.num_batches_tracked)
        return _F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch, 0.0,
                             self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of [N, C] or [N, C, L] per channel (statistics over N and L).

    >>> from rtxviz import Tensor
    >>> bn = BatchNorm1d(2, momentum=None)
    >>> _ = bn(Tensor.from_slice([1.0, 2.0, 3.0, 6.0], [2, 2]))
    >>> bn.running_mean.tolist(), bn.running_var.tolist()  # momentum None: the plain average of the batches
    ([2.0, 4.0], [2.0, 8.0])
    """

    _dims = (2, 3)
    _layout = "[N, C] or [N, C, L]"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of [N, C, H, W] per channel (statistics over N, H and W)."""

    _dims = (4,)
    _layout = "[N, C, H, W]"


class _InstanceNorm(_RunningStats):
    """What InstanceNorm1d/2d/3d share: PyTorch's defaults (no affine parameters, no running statistics), its
    parameter and buffer names (num_batches_tracked is kept, and stays 0, as PyTorch's), and the unbatched input
    [C, *space], normalised as a batch of one (unsqueeze, the op, squeeze)."""

    _space = 1  # spatial dims of the batched input [N, C, *space]
    _layout = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        name = type(self).__name__
        self.num_features = positive_int(num_features, name, "num_features")
        self.eps = float(eps)
        if momentum is not None and (isinstance(momentum, bool) or not 0.0 <= float(momentum) <= 1.0):
            raise ValueError(f"{name}: momentum must be a float in [0, 1] or None, got {momentum!r}")
        self.momentum = None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        c = [self.num_features]
        if self.affine:
            self.weight = Parameter(Tensor.ones(c, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        if self.affine and bias:
            self.bias = Parameter(Tensor.zeros(c, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self._register_running_stats(device, dtype)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, x: Any) -> Any:
        name, nd = type(self).__name__, self._space
        input_dims(name, x, (nd + 1, nd + 2), self._layout)
        channel_dim = x.ndim - nd - 1
        if x.shape[channel_dim] != self.num_features:
            message = (f"{name}({self.num_features}): input has {x.shape[channel_dim]} channels in dim "
                       f"{channel_dim} (input shape {tuple(x.shape)}), expected {self.num_features}")
            if self.affine:
                raise ShapeError(message)
            # as PyTorch: without affine parameters num_features is not used, so it only warns
            warnings.warn(message + " (num_features is not used when affine=False)", stacklevel=2)
        batched = x.ndim == nd + 2
        xb = x if batched else _unsqueeze(x, 0)
        # The input's own statistics while training, and in eval too without running statistics (as PyTorch);
        # momentum None means no update here (PyTorch passes 0.0), and num_batches_tracked is never counted.
        use_input_stats = self.training or not self.track_running_stats
        out = _F.instance_norm(xb, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                               0.0 if self.momentum is None else self.momentum, self.eps)
        return out if batched else _squeeze(out, 0)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of [N, C, L] or unbatched [C, L]: each (sample, channel) over its positions.

    >>> from rtxviz import Tensor
    >>> y = InstanceNorm1d(2)(Tensor.from_slice([1.0, 3.0, 2.0, 6.0], [2, 2]))  # unbatched [C, L]
    >>> [[round(v, 3) for v in row] for row in y.tolist()]
    [[-1.0, 1.0], [-1.0, 1.0]]
    >>> list(InstanceNorm1d(2, affine=True, track_running_stats=True).state_dict())
    ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    """

    _space = 1
    _layout = "[C, L] unbatched or [N, C, L] batched"


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of [N, C, H, W] or unbatched [C, H, W]: each (sample, channel) over its H·W
    positions.

    >>> from rtxviz import Tensor
    >>> InstanceNorm2d(3)(Tensor.ones([3, 4, 4])).shape
    (3, 4, 4)
    """

    _space = 2
    _layout = "[C, H, W] unbatched or [N, C, H, W] batched"


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of [N, C, D, H, W] or unbatched [C, D, H, W]."""

    _space = 3
    _layout = "[C, D, H, W] unbatched or [N, C, D, H, W] batched"


class GroupNorm(Module):
    """Group normalisation: the channels of [N, C, ...] in num_groups groups, each normalised over its channels
    and positions; then a per-channel weight and bias (affine).

    >>> from rtxviz import Tensor
    >>> GroupNorm(2, 4)(Tensor.ones([3, 4, 5])).shape
    (3, 4, 5)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_groups = positive_int(num_groups, "GroupNorm", "num_groups")
        self.num_channels = positive_int(num_channels, "GroupNorm", "num_channels")
        if self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels={self.num_channels} must be divisible by "
                             f"num_groups={self.num_groups}")
        self.eps, self.affine = float(eps), bool(affine)
        if self.affine:
            self.weight = Parameter(Tensor.ones([self.num_channels], device=device, dtype=dtype))
            self.bias = Parameter(Tensor.zeros([self.num_channels], device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ShapeError(f"GroupNorm({self.num_groups}, {self.num_channels}): expected input [N, "
                             f"{self.num_channels}, ...], got shape {tuple(x.shape)}")
        return _F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class LayerNorm(Module):
    """Normalise over the last dims `normalized_shape`, then scale and shift (weight 1, bias 0 at start;
    elementwise_affine=False: neither; bias=False: the weight only).

    >>> LayerNorm(4, bias=False).state_dict().keys()
    dict_keys(['weight'])
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(
            int(s) for s in normalized_shape)
        if not shape or min(shape) < 1:
            raise ValueError(f"LayerNorm: normalized_shape must be positive sizes, got {normalized_shape!r}")
        self.normalized_shape, self.eps = shape, float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(Tensor.ones(list(shape), device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        if self.elementwise_affine and bias:
            self.bias = Parameter(Tensor.zeros(list(shape), device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        k = len(self.normalized_shape)
        if tuple(x.shape[x.ndim - k:]) != self.normalized_shape or x.ndim < k:
            raise ShapeError(f"LayerNorm({self.normalized_shape}): the input's last {k} dims must be "
                             f"{self.normalized_shape}, got input shape {tuple(x.shape)}")
        return _F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
