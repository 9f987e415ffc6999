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

from typing import TYPE_CHECKING, Any

from . import hooks as _hooks
from . import tensor as _tensor_module
from .backward import RetainGrad, run_backward
from .device import Device
from .dtypes import is_float
from .errors import DeviceError, DTypeError, GraphError, ShapeError
from .tensor import Tensor, _to_array


def _check_grad(v: Any, value: Any) -> None:
    """A gradient assigned to ``v.grad`` must be a tensor of v's shape and device (as in PyTorch): an optimizer would
    otherwise fail part-way through its step, or broadcast the update into the wrong shape. Another float dtype is
    let through (unlike PyTorch): the optimizers cast it to the parameter's, as they always have."""
    what = f"Variable.grad{' of `' + v.name + '`' if getattr(v, 'name', None) else ''}"
    if not isinstance(value, Tensor):
        raise TypeError(f"{what}: assign a Tensor or None, got {type(value).__name__}")
    if value.shape != v.shape:
        raise ShapeError(f"{what}: the assigned gradient has shape {tuple(value.shape)}, the tensor {tuple(v.shape)}")
    if value.device != v.device:
        raise DeviceError(f"{what}: the assigned gradient is on {value.device}, the tensor on {v.device}")


class Variable(Tensor):
    """A tracked value. Leaves are made by `Variable.from_tensor`; non-leaves by ops (they carry a node).

    `grad` is None until a backward pass reaches this leaf; backward passes accumulate into it.
    """

    __slots__ = ()  # Tensor holds every slot: one layout, so a Tensor can become a Variable in place
    _is_var = True
    _node: Any
    requires_grad: bool
    _grad: Variable | None
    name: str | None
    _retains_grad: bool
    _hooks: list | None

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None,
                 device: Device | str | None = None, name: str | None = None) -> None:
        self.data = _to_array(data, dtype, device, "Variable")
        self._node = None
        self.requires_grad = False
        self._grad = None
        self.name = name
        self._retains_grad = False
        self._hooks = None
        if requires_grad:
            self.requires_grad_(True)

    @property
    def grad(self) -> Variable | None:
        """The accumulated gradient (None until a backward pass reaches this leaf, or after a reset)."""
        return self._grad

    @grad.setter
    def grad(self, value: Variable | None) -> None:
        if value is not None:
            _check_grad(self, value)
        self._grad = value
        if _hooks.TRACING:  # the graph cache's capture must see `p.grad = None` even when it was None already
            _hooks.trace("grad_assigned", variable=self, value=value)

    @staticmethod
    def _wrap(array: Any, node: Any = None) -> Variable:
        v = object.__new__(Variable)
        v.data = array
        v._node = node
        v.requires_grad = node is not None
        v._grad = None
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
            return  # idempotent: a second RetainGrad hook would add the gradient twice
        self._retains_grad = True
        self._node_hooks().append(RetainGrad(self))

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
                 create_graph: bool = False, *, gradient: Any = None) -> None:
        """Compute the gradient of this value with respect to every leaf that requires grad.

        `grad_output` (PyTorch's keyword: `gradient`) is required unless this value has exactly one element.
        """
        if gradient is not None:
            if grad_output is not None:
                raise TypeError("backward: give the output gradient once, as grad_output or as gradient")
            grad_output = gradient
        run_backward([self], [grad_output], retain_graph=retain_graph, create_graph=create_graph)

    def __repr__(self) -> str:
        extra = ""
        if self._node is not None:
            extra = f", grad_fn=<{self._node.op.name}>"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        dev = "" if self.device.kind == "cpu" else f", device={self.device}"
        return f"Variable({self._values_repr()}, dtype={self.dtype.name}{dev}{extra})"

    __hash__ = object.__hash__

    # -- op methods: generated by tests/engine/test_tensor_methods.py, do not edit by hand --
    if TYPE_CHECKING:
        def to(x: Variable, device: Device | str | None = None, dtype: Any = None) -> Any:
            """Move or cast a Variable, differentiably: gradients flow back to the original device and dtype."""
    # -- end of op methods --


def _become_leaf(t: Tensor) -> None:
    """Turn the plain Tensor `t` into a leaf Variable that requires grad, in place (`Tensor.requires_grad_`): the
    classes share one layout, so only the class and the Variable fields change; its data stays where it is."""
    t.__class__ = Variable
    v: Variable = t  # type: ignore[assignment]  # it is one now
    v._node = None
    v._grad = None
    v.name = None
    v._retains_grad = False
    v._hooks = None
    v.requires_grad = True


_tensor_module._BECOME_LEAF = _become_leaf


class _HookHandle:
    def __init__(self, hooks: list, fn: Any) -> None:
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)
