"""rtxviz.optim: SGD, Adam, AdamW, RMSprop, Adagrad, NAdam, RAdam, LBFGS, learning-rate schedulers (all of
torch.optim.lr_scheduler's, also in `lr_scheduler`) and gradient clipping, with PyTorch's arguments, defaults,
param_groups and state_dict layout.

>>> from rtxviz import Tensor
>>> from rtxviz.nn import Linear, MSELoss
>>> model = Linear(2, 1)
>>> opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
>>> sched = lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=3)
>>> for _ in range(3):
...     opt.zero_grad()
...     MSELoss()(model(Tensor.ones([4, 2])), Tensor.zeros([4, 1])).backward()
...     opt.step(); sched.step()
>>> sorted(opt.state_dict()["state"][0])
['momentum_buffer']
"""

from __future__ import annotations

from ..nn.utils import clip_grad_norm_, clip_grad_value_
from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiplicativeLR,
    MultiStepLR,
    OneCycleLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["LBFGS", "SGD", "Adagrad", "Adam", "AdamW", "ChainedScheduler", "ConstantLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "CyclicLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR",
           "MultiStepLR", "MultiplicativeLR", "NAdam", "OneCycleLR", "Optimizer", "PolynomialLR", "RAdam", "RMSprop",
           "ReduceLROnPlateau", "SequentialLR", "StepLR", "clip_grad_norm_", "clip_grad_value_", "lr_scheduler"]
