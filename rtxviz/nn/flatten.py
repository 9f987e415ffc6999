"""Flatten and Unflatten: reshape a range of dims into one, and one dim into several.

>>> from rtxviz import Tensor
>>> x = Tensor.zeros([2, 3, 4])
>>> Flatten()(x).shape, Unflatten(1, (3, 4))(Flatten()(x)).shape
((2, 12), (2, 3, 4))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..engine.errors import ShapeError
from .module import Module


class Flatten(Module):
    """Flatten dims start_dim..end_dim into one (by default everything but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x: Any) -> Any:
        nd = max(x.ndim, 1)
        s = self.start_dim + nd if self.start_dim < 0 else self.start_dim
        e = self.end_dim + nd if self.end_dim < 0 else self.end_dim
        if not 0 <= s <= e < nd:
            raise ShapeError(f"Flatten: dims {self.start_dim}..{self.end_dim} do not fit input shape {x.shape}")
        shape = x.shape
        return x.reshape((*shape[:s], math.prod(shape[s:e + 1]), *shape[e + 1:]))

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dim `dim` into `unflattened_size` (one entry may be -1), as PyTorch's nn.Unflatten.

    >>> from rtxviz import Tensor
    >>> Unflatten(-1, (2, -1))(Tensor.zeros([3, 8])).shape
    (3, 2, 4)
    """

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        sizes = tuple(int(s) for s in unflattened_size)
        if not sizes or sum(s == -1 for s in sizes) > 1 or any(s < -1 or s == 0 for s in sizes):
            raise ValueError(f"Unflatten: unflattened_size must be positive sizes with at most one -1, got "
                             f"{unflattened_size!r}")
        self.dim, self.unflattened_size = int(dim), sizes

    def forward(self, x: Any) -> Any:
        nd = x.ndim
        d = self.dim + nd if self.dim < 0 else self.dim
        if not 0 <= d < nd:
            raise ShapeError(f"Unflatten: dim {self.dim} is out of range for input shape {x.shape}")
        sizes, n = self.unflattened_size, x.shape[d]
        known = math.prod(s for s in sizes if s != -1)
        if (-1 in sizes and n % known) or (-1 not in sizes and known != n):
            raise ShapeError(f"Unflatten: unflattened_size {sizes} does not fit dim {self.dim} of size {n} "
                             f"(input shape {x.shape})")
        return x.reshape((*x.shape[:d], *sizes, *x.shape[d + 1:]))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
