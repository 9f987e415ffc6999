"""rtxviz.optim: SGD, Adam, AdamW, RMSprop, learning-rate schedulers and gradient clipping.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Linear, MSELoss
>>> model = Linear(2, 1)
>>> opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
>>> opt.zero_grad()
>>> MSELoss()(model(Tensor.ones([4, 2])), Tensor.zeros([4, 1])).backward()
>>> opt.step()
"""

from __future__ import annotations

from ..nn.utils import clip_grad_norm_, clip_grad_value_
from . import lr_scheduler
from .adam import Adam, AdamW
from .lr_scheduler import CosineAnnealingLR, LRScheduler, StepLR
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "CosineAnnealingLR", "LRScheduler", "Optimizer", "RMSprop", "StepLR",
           "clip_grad_norm_", "clip_grad_value_", "lr_scheduler"]
