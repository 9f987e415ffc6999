"""Variable: a Tensor that takes part in the graph: its gradient, the node that made it, backward.

>>> from rtxviz import Tensor, Variable, Device
>>> device = Device.cpu()
>>> x = Variable.from_tensor(Tensor.from_slice([2.0, 3.0], [2], device))
>>> w = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2], device))
>>> z = x.multiply(w).sum()
>>> z.backward()
>>> x.grad.tolist(), w.grad.tolist()
([1.0, 2.0], [2.0, 3.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import graph as _graph
from . import hooks as _hooks
from .device import Device, as_device, to_device
from .dtypes import is_float
from .errors import DTypeError, GraphError
from .tensor import Tensor, _to_array


class Variable(Tensor):
    """A tracked value. Leaves are made by `Variable.from_tensor`; non-leaves by ops (they carry a node).

    `grad` is None until a backward pass reaches this leaf; backward passes accumulate into it.
    """

    __slots__ = ("_node", "requires_grad", "grad", "name", "_retains_grad", "_hooks", "__weakref__")
    _is_var = True

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None,
                 device: Device | str | None = None, name: str | None = None) -> None:
        self.data = _to_array(data, dtype, device, "Variable")
        self._node = None
        self.requires_grad = False
        self.grad = None
        self.name = name
        self._retains_grad = False
        self._hooks = None
        if requires_grad:
            self.requires_grad_(True)

    @staticmethod
    def _wrap(array: Any, node: Any) -> Variable:
        v = object.__new__(Variable)
        v.data = array
        v._node = node
        v.requires_grad = node is not None
        v.grad = None
        v.name = None
        v._retains_grad = False
        v._hooks = None
        return v

    @staticmethod
    def from_tensor(tensor: Tensor, requires_grad: bool = True, name: str | None = None) -> Variable:
        """A leaf Variable over `tensor`'s data (shared, not copied), tracked by default as in the spec."""
        if not isinstance(tensor, Tensor):
            tensor = Tensor(tensor)
        v = Variable._wrap(tensor.data, None)
        v.name = name
        if requires_grad:
            v.requires_grad_(True)
        return v

    # -- graph properties ------------------------------------------------------------------------------
    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self) -> Any:
        """The TapeNode that produced this value (None for leaves), as PyTorch's `grad_fn`."""
        return self._node

    @property
    def node(self) -> Any:
        return self._node

    def requires_grad_(self, flag: bool = True) -> Variable:
        if self._node is not None:
            if not flag:
                raise GraphError("requires_grad_: cannot turn off requires_grad on a non-leaf; use detach()")
            return self
        if flag and not is_float(self.data.dtype):
            raise DTypeError(
                f"requires_grad_: only floating-point tensors can require grad, got dtype {self.data.dtype}"
            )
        self.requires_grad = bool(flag)
        return self

    def detach(self) -> Variable:
        """A new leaf sharing this value's data, cut from the graph (requires_grad False)."""
        out = Variable._wrap(self.data, None)
        if _hooks.ACTIVE:
            _hooks.emit("detach", source=self, result=out)
        return out

    def zero_grad(self) -> None:
        self.grad = None

    def retain_grad(self) -> None:
        """Keep `.grad` on this non-leaf after backward (leaves always keep theirs)."""
        if self._node is None or self._retains_grad:
            return  # idempotent: a second _RetainGrad hook would add the gradient twice
        self._retains_grad = True
        self._node_hooks().append(_RetainGrad(self))

    def register_hook(self, fn: Any) -> Any:
        """Call `fn(grad)` when this value's gradient is computed; a non-None return replaces the gradient.

        Returns a handle with `.remove()`.
        """
        if not self.requires_grad:
            raise GraphError("register_hook: cannot register a hook on a tensor that does not require grad")
        if self._node is None:
            if self._hooks is None:
                self._hooks = []
            target = self._hooks
        else:
            target = self._node_hooks()
        target.append(fn)
        return _HookHandle(target, fn)

    def _node_hooks(self) -> list:
        node = self._node
        if node.pre_hooks is None:
            node.pre_hooks = []
        return node.pre_hooks

    def backward(self, grad_output: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False) -> None:
        """Compute the gradient of this value with respect to every leaf that requires grad.

        `grad_output` is required unless this value has exactly one element.
        """
        from .backward import run_backward

        run_backward([self], [grad_output], retain_graph=retain_graph, create_graph=create_graph)

    def to(self, device: Device | str | None = None, dtype: Any = None) -> Variable:
        """Move or cast, differentiably: gradients flow back to the original device and dtype."""
        from .ops.convert import to_device_dtype

        return to_device_dtype(self, None if device is None else as_device(device), dtype)

    def __repr__(self) -> str:
        extra = ""
        if self._node is not None:
            extra = f", grad_fn=<{self._node.op.name}>"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        dev = "" if self.device.kind == "cpu" else f", device={self.device}"
        return f"Variable({self._values_repr()}, dtype={self.dtype.name}{dev}{extra})"

    __hash__ = object.__hash__


_graph._Variable = Variable


class _RetainGrad:
    """A node pre-hook that stores the arriving gradient on a non-leaf Variable."""

    def __init__(self, var: Variable) -> None:
        import weakref

        self.ref = weakref.ref(var)

    def __call__(self, grad: Any) -> None:
        var = self.ref()
        if var is not None:
            var.grad = grad if var.grad is None else var.grad + grad


class _HookHandle:
    def __init__(self, hooks: list, fn: Any) -> None:
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)


def as_tensor_like(value: Any, like: Tensor | None) -> Tensor:
    """Coerce an op argument: Tensors pass; scalars and arrays become constant Tensors of `like`'s dtype
    and device, so `x * 2.0` keeps x's float32 and `x + np_array` works."""
    if isinstance(value, Tensor):
        return value
    if like is None:
        t = Tensor(value)
    else:
        arr = like.data
        if isinstance(value, bool | int | float | np.number):
            xp = np if type(arr) is np.ndarray else _xp(arr)
            t = Tensor._wrap(xp.asarray(value, dtype=arr.dtype))
        else:
            converted = _to_array(value, None, None, "operand")
            if converted.dtype != arr.dtype and converted.dtype.kind == "f" and arr.dtype.kind == "f":
                converted = converted.astype(arr.dtype)
            if type(arr) is not np.ndarray:
                converted = to_device(converted, Device("cuda", arr.device.id))
            t = Tensor._wrap(converted)
    if _hooks.TRACING:  # a constant of the computation, as a tracer sees it (the graph cache bakes it in)
        _hooks.trace("constant", tensor=t)
    return t


def _xp(arr: Any) -> Any:
    from .device import xp_of

    return xp_of(arr)
