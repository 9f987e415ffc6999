"""Embedding: a lookup table of rows, with PyTorch's padding_idx (the row starts at zero and gets no gradient).

>>> from rtxviz import Tensor
>>> emb = Embedding(4, 2, padding_idx=0)
>>> emb.weight.tolist()[0], emb(Tensor([[0, 3]])).shape
([0.0, 0.0], (1, 2, 2))
"""

from __future__ import annotations

import operator
from typing import Any

from ..engine import dtypes as _dtypes
from ..engine.ops import nn as _F
from ..engine.tensor import Tensor
from . import init
from ._args import positive_int
from .linear import empty_parameter
from .module import Module, Parameter


class Embedding(Module):
    """A table [num_embeddings, embedding_dim], N(0, 1) at start (row padding_idx zero); input: int64 indices.

    max_norm, scale_grad_by_freq and sparse are PyTorch's arguments; only their defaults are supported (a clear
    error says so otherwise).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Any = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings = positive_int(num_embeddings, "Embedding", "num_embeddings")
        self.embedding_dim = positive_int(embedding_dim, "Embedding", "embedding_dim")
        for label, value, default in (("max_norm", max_norm, None), ("scale_grad_by_freq", scale_grad_by_freq, False),
                                      ("sparse", sparse, False)):
            if value != default:
                raise ValueError(f"Embedding: {label}={value!r} is not supported (only the default {default!r})")
        if padding_idx is not None:
            pad = operator.index(padding_idx)
            if not -self.num_embeddings <= pad < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx {pad} must be within num_embeddings "
                                 f"({self.num_embeddings}): in [{-self.num_embeddings}, {self.num_embeddings - 1}]")
            padding_idx = pad + self.num_embeddings if pad < 0 else pad
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = None, float(norm_type), False, False
        if _weight is None:
            self.weight = empty_parameter((self.num_embeddings, self.embedding_dim), device, dtype)
            self.reset_parameters()
        else:
            w = _weight if isinstance(_weight, Tensor) else Tensor(_weight, dtype=dtype)
            if tuple(w.shape) != (self.num_embeddings, self.embedding_dim):
                raise ValueError(f"Embedding: _weight has shape {tuple(w.shape)}, expected "
                                 f"({self.num_embeddings}, {self.embedding_dim})")
            self.weight = Parameter(w.data.copy(), requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None) -> Embedding:
        """An Embedding holding `embeddings` [V, D] (a copy), frozen (no gradient) unless freeze=False.

        >>> Embedding.from_pretrained(Tensor.ones([3, 2])).weight.requires_grad
        False
        """
        if getattr(embeddings, "ndim", None) != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-dim [V, D], got shape "
                             f"{getattr(embeddings, 'shape', None)}")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze)

    def forward(self, indices: Any) -> Any:
        if not isinstance(indices, Tensor):
            indices = Tensor(indices, dtype=_dtypes.int64, device=self.weight.device)
        return _F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"
