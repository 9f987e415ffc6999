"""Op names users know, for PyTorch's autograd nodes and the functions that made them.

A node seen being made is named after the function the user called (``linear``, ``conv2d``, ``add``); one made
inside a composite (a C++ function that records several nodes) after its grad_fn class, in snake case, without
the ``Backward`` suffix PyTorch adds.

>>> op_from_grad_fn("NativeLayerNormBackward0")
'native_layer_norm'
>>> op_from_grad_fn("CheckpointFunctionBackward")
'checkpoint'
>>> op_from_function("__iadd__"), op_from_function("__getitem__"), op_from_function("conv2d")
('add_', 'getitem', 'conv2d')
"""

from __future__ import annotations

import re

#: the grad_fn name PyTorch gives the node that accumulates into a leaf's `.grad`
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
#: the grad_fn of torch.utils.checkpoint's reentrant variant (the whole segment is one node in forward)
REENTRANT_CHECKPOINT = "CheckpointFunctionBackward"

_SUFFIX = re.compile(r"Backward\d*$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
#: Python operators, by their dunder names without underscores
_DUNDERS = {
    "iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_", "radd": "add", "rmul": "mul",
    "truediv": "div", "rtruediv": "rdiv", "floordiv": "floor_divide", "rsub": "rsub", "neg": "neg",
}
_KNOWN = {"checkpoint_function": "checkpoint"}


def op_from_grad_fn(name: str) -> str:
    """The op name for an autograd node PyTorch calls `name` (``AddmmBackward0`` -> ``addmm``).

    >>> op_from_grad_fn("AddmmBackward0"), op_from_grad_fn("torch::autograd::AccumulateGrad")
    ('addmm', 'accumulate_grad')
    """
    base = _SUFFIX.sub("", name.rpartition("::")[2])
    snake = _CAMEL.sub("_", base).lower() or name
    return _KNOWN.get(snake, snake)


def op_from_function(name: str) -> str:
    """The op name for a torch function or Tensor method called `name` (dunders by their operator).

    >>> op_from_function("__matmul__"), op_from_function("relu_")
    ('matmul', 'relu_')
    """
    if name.startswith("__") and name.endswith("__"):
        bare = name.strip("_")
        return _DUNDERS.get(bare, bare)
    return name
