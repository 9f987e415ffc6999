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

from ..render.torch_graph import ACCUMULATE_GRAD, METADATA_KEY, op_from_grad_fn

#: the grad_fn of torch.utils.checkpoint's reentrant variant (the whole segment is one node in forward)
REENTRANT_CHECKPOINT = "CheckpointFunctionBackward"
#: Python operators, by their dunder names without underscores
_DUNDERS = {
    "iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_", "radd": "add", "rmul": "mul",
    "truediv": "div", "rtruediv": "rdiv", "floordiv": "floor_divide", "rsub": "rsub", "neg": "neg",
}

__all__ = ["ACCUMULATE_GRAD", "METADATA_KEY", "REENTRANT_CHECKPOINT", "op_from_function", "op_from_grad_fn"]


def op_from_function(name: str) -> str:
    """The op name for a torch function or Tensor method called `name` (dunders by their operator).

    >>> op_from_function("__matmul__"), op_from_function("relu_")
    ('matmul', 'relu_')
    """
    if name.startswith("__") and name.endswith("__"):
        bare = name.strip("_")
        return _DUNDERS.get(bare, bare)
    return name
