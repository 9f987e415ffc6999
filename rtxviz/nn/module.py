"""Module and Parameter: the containers a model is built from.

Paths. Every module gets a qualified path made of the attribute names that lead to it from its root, the root
being named ``"model"`` (or the name given to `Module.name_as`), e.g. ``model.layers.0.fc``. `Module.__call__`
sets that path as the engine's current module scope, so every TapeNode recorded inside carries it in
`node.module_path` (the visualisation groups large graphs by it). Parameters get `Variable.name` set to their
qualified name (``model.fc1.weight``). Paths are computed once, on the first call of a root (or when a child is
attached to a module whose path is already known), not on every call.

>>> from rtxviz.nn import Linear, Sequential, ReLU
>>> model = Sequential(Linear(4, 8), ReLU(), Linear(8, 2))
>>> [name for name, _ in model.named_parameters()]
['0.weight', '0.bias', '2.weight', '2.bias']
>>> model.name_as("model")["0"].weight.name
'model.0.weight'
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ..engine import hooks as _hooks
from ..engine.dtypes import device_or_dtype
from ..engine.errors import DTypeError, RtxvizError
from ..engine.grad_mode import STATE as _GRAD_STATE
from ..engine.tensor import Tensor
from ..engine.variable import Variable

ROOT_NAME = "model"

# Structure versions: one global counter, so a version never comes back (a graph captured against an old
# structure can never match again, even if the module's registries are restored to the same objects).
_STRUCTURE_VERSIONS = itertools.count(1)


class Parameter(Variable):
    """A leaf Variable that a Module owns and an optimizer updates (requires_grad by default).

    >>> p = Parameter(Tensor.zeros([2, 3]))
    >>> p.requires_grad, p.is_leaf, p.shape
    (True, True, (2, 3))
    """

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True, name: str | None = None) -> None:
        if isinstance(data, Tensor):
            data = data.data
        super().__init__(data, requires_grad=requires_grad, name=name)

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("Variable"):]


class StateDictError(RtxvizError, ValueError):
    """A state dict (or saved file) that does not fit the model: missing or unexpected keys, shapes, dtypes."""


_HOOK_IDS = itertools.count()


class RemovableHandle:
    """What `register_forward_hook` and `register_forward_pre_hook` return: `remove()` takes the hook off
    (again is harmless); as a context manager it removes the hook on leaving, as PyTorch's handle.

    >>> from rtxviz.nn import Identity
    >>> seen = []
    >>> m = Identity()
    >>> with m.register_forward_hook(lambda mod, args, out: seen.append(out)):
    ...     _ = m(1)
    >>> _ = m(2)
    >>> seen
    [1]
    """

    __slots__ = ("_registry", "id")

    def __init__(self, registry: dict[int, Any]) -> None:
        self._registry, self.id = registry, next(_HOOK_IDS)

    def remove(self) -> None:
        self._registry.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class Module:
    """Base class of every layer and model: subclass it, assign Parameters and Modules as attributes, and
    implement `forward`. Call the module (not `forward`) so the ops it runs are tagged with its path.

    >>> from rtxviz.nn import Linear
    >>> class TwoLayer(Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc1 = Linear(3, 4)
    ...         self.fc2 = Linear(4, 1)
    ...     def forward(self, x):
    ...         return self.fc2(self.fc1(x).relu())
    >>> net = TwoLayer()
    >>> net(Tensor.ones([2, 3])).shape
    (2, 1)
    >>> net.fc1.path, net.fc1.weight.name
    ('model.fc1', 'model.fc1.weight')
    """

    # Set per instance in __init__; class-level defaults let a subclass that forgets super().__init__() fail
    # with a clear message rather than an AttributeError deep inside.
    _parameters: dict[str, Parameter | None]
    _modules: dict[str, Module | None]
    _buffers: dict[str, Tensor | None]

    def __init__(self) -> None:
        d = self.__dict__
        d["_parameters"] = {}
        d["_modules"] = {}
        d["_buffers"] = {}
        d["_non_persistent"] = set()
        d["_forward_hooks"] = {}
        d["_forward_pre_hooks"] = {}
        d["training"] = True
        d["_path"] = None
        d["_version"] = next(_STRUCTURE_VERSIONS)

    @property
    def structure_version(self) -> int:
        """A number that changes whenever a parameter, buffer, child module or Tensor attribute of this module is
        assigned (or removed). A captured graph (`rtxviz.engine.cache`) records it for every module it
        called and misses when it changed, since a replay would still read the old objects.

        >>> from rtxviz.nn import Linear
        >>> lin = Linear(2, 2)
        >>> v = lin.structure_version
        >>> lin.weight = Parameter(Tensor.zeros([2, 2]))
        >>> lin.structure_version != v
        True
        """
        # setdefault: a module made without Module.__init__ (unpickled from an old file) gets a version now
        return self.__dict__.setdefault("_version", 0)

    def _bump(self) -> None:
        self.__dict__["_version"] = next(_STRUCTURE_VERSIONS)

    # -- attribute registration -----------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if "_parameters" not in d:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        params, modules, buffers = d["_parameters"], d["_modules"], d["_buffers"]
        if isinstance(value, Tensor | Module) or name in params or name in modules or name in buffers \
                or isinstance(d.get(name), Tensor):
            # What a captured graph reads by identity changed: parameters, buffers, children, tensor attributes.
            d["_version"] = next(_STRUCTURE_VERSIONS)
        if isinstance(value, Parameter):
            modules.pop(name, None)
            buffers.pop(name, None)
            d.pop(name, None)
            params[name] = value
            if d["_path"] is not None:
                value.name = f"{d['_path']}.{name}"
        elif isinstance(value, Module):
            params.pop(name, None)
            buffers.pop(name, None)
            d.pop(name, None)
            modules[name] = value
            if d["_path"] is not None:
                value._assign_paths(f"{d['_path']}.{name}")
        elif name in params:
            if value is not None:
                raise TypeError(f"{type(self).__name__}.{name}: assign a Parameter (or None), got "
                                f"{type(value).__name__}")
            params[name] = None
        elif name in modules:
            if value is not None:
                raise TypeError(f"{type(self).__name__}.{name}: assign a Module (or None), got {type(value).__name__}")
            modules[name] = None
        elif name in buffers:
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for registry in ("_parameters", "_modules", "_buffers"):
            reg = d.get(registry)
            if reg is not None and name in reg:
                return reg[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._modules, self._buffers):
            if name in registry:
                del registry[name]
                self._bump()
                return
        if isinstance(self.__dict__.get(name), Tensor):
            self._bump()
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder, e.g. a disabled bias) under `name`."""
        if param is None:
            self._parameters[name] = None
            self._bump()
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A non-trainable tensor that belongs to the module's state (moved by `to`; saved in the state dict
        unless `persistent` is False), as BatchNorm's running statistics. None registers the name without a
        tensor (no state-dict key), as PyTorch's track_running_stats=False does."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{type(self).__name__}.register_buffer: the name must be a non-empty string without "
                           f"'.', got {name!r}")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"{type(self).__name__}.register_buffer({name!r}): expected a Tensor or None, got "
                            f"{type(tensor).__name__}")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        non_persistent = self.__dict__.setdefault("_non_persistent", set())
        if persistent:
            non_persistent.discard(name)
        else:
            non_persistent.add(name)
        self._bump()

    def add_module(self, name: str, module: Module | None) -> None:
        if module is None:
            self._modules[name] = None
            self._bump()
        else:
            setattr(self, name, module)

    # -- paths --------------------------------------------------------------------------------------------
    @property
    def path(self) -> str | None:
        """This module's qualified path (``model.layers.0``), or None before the root was first called."""
        return self.__dict__.get("_path")

    def name_as(self, root: str = ROOT_NAME) -> Module:
        """Make this module a root named `root`: (re)compute the paths of it, its children and parameter names.

        >>> from rtxviz.nn import Linear
        >>> Linear(2, 2).name_as("student").weight.name
        'student.weight'
        """
        self._assign_paths(root)
        return self

    def _assign_paths(self, path: str) -> None:
        stack = [(self, path)]
        while stack:  # iterative: deep Sequentials need no recursion
            mod, p = stack.pop()
            mod.__dict__["_path"] = p
            for pname, param in mod._parameters.items():
                if param is not None:
                    param.name = f"{p}.{pname}"
            for cname, child in mod._modules.items():
                if child is not None:
                    stack.append((child, f"{p}.{cname}"))

    # -- calling ------------------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}: implement forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The hot path of every model: a small module's call costs about as much as the op it runs, so the
        # scope is set and restored inline (no closure per call) and the hook registries are read once.
        d = self.__dict__
        path = d["_path"]
        if path is None:
            self._assign_paths(ROOT_NAME)
            path = d["_path"]
        if _hooks.TRACING:
            # For tracers (the graph cache's capture): which modules ran, in which mode, with which structure.
            _hooks.trace("module_call", module=self, training=d["training"])
        state = _GRAD_STATE
        prev = state.module_path
        state.module_path = path
        try:
            # .get: a module unpickled from an old file may lack the registries
            if d.get("_forward_pre_hooks") or d.get("_forward_hooks"):
                return self._call_with_hooks(args, kwargs)
            return self.forward(*args, **kwargs)
        finally:
            state.module_path = prev

    def _call_with_hooks(self, args: tuple, kwargs: dict) -> Any:
        """forward between its pre-hooks and hooks (copied before running: a hook may remove itself)."""
        d = self.__dict__
        pre_hooks = d.get("_forward_pre_hooks")
        if pre_hooks:
            for hook in list(pre_hooks.values()):
                result = hook(self, args)
                if result is not None:  # as PyTorch: a returned non-tuple is the single argument
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        hooks = d.get("_forward_hooks")
        if hooks:
            for hook in list(hooks.values()):
                result = hook(self, args, output)
                if result is not None:
                    output = result
        return output

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, args)` before each forward; a value it returns replaces the positional arguments
        (a tuple, or one value). Returns a handle whose `remove()` takes the hook off.

        >>> from rtxviz.nn import Identity
        >>> m = Identity()
        >>> handle = m.register_forward_pre_hook(lambda mod, args: (args[0] * 10,))
        >>> m(2)
        20
        >>> handle.remove()
        >>> m(2)
        2
        """
        return self._add_hook("_forward_pre_hooks", hook, prepend)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, args, output)` after each forward; a value it returns replaces the output.
        Returns a handle whose `remove()` takes the hook off.

        >>> from rtxviz.nn import Identity
        >>> m = Identity()
        >>> _ = m.register_forward_hook(lambda mod, args, out: out + 1)
        >>> m(2)
        3
        """
        return self._add_hook("_forward_hooks", hook, prepend)

    def _add_hook(self, registry_name: str, hook: Callable[..., Any], prepend: bool) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"{type(self).__name__}.{registry_name.strip('_')[:-1]}: the hook must be callable, got "
                            f"{type(hook).__name__}")
        registry = self.__dict__.setdefault(registry_name, {})
        handle = RemovableHandle(registry)
        registry[handle.id] = hook
        if prepend:  # dicts keep insertion order: rebuild with the new hook first
            items = list(registry.items())
            registry.clear()
            registry.update([items[-1], *items[:-1]])
        return handle

    # -- traversal ----------------------------------------------------------------------------------------
    def children(self) -> Iterator[Module]:
        for m in self._modules.values():
            if m is not None:
                yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path `target` relative to this one ("" is this module).

        >>> from rtxviz.nn import Linear, Sequential
        >>> Sequential(Linear(2, 2), Sequential(Linear(2, 3))).get_submodule("1.0").out_features
        3
        """
        mod: Module = self
        if not target:
            return mod
        for part in target.split("."):
            child = mod._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (looking up {target!r})")
            mod = child
        return mod

    def _owner_and_name(self, target: str, what: str) -> tuple[Module, str]:
        """The module that holds dotted `target`'s last name, and that name ("a.b.weight": (self.a.b, "weight"))."""
        path, _, name = target.rpartition(".")
        if not name:
            raise AttributeError(f"{type(self).__name__}.get_{what}: the target must name a {what}, got {target!r}")
        return self.get_submodule(path), name

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path `target` ("0.weight"), as PyTorch's.

        >>> from rtxviz.nn import Linear, Sequential
        >>> Sequential(Linear(2, 3)).get_parameter("0.bias").shape
        (3,)
        """
        mod, name = self._owner_and_name(target, "parameter")
        p = mod._parameters.get(name)
        if p is None:
            raise AttributeError(f"{type(mod).__name__} has no parameter {name!r} (looking up {target!r}; its "
                                 f"parameters: {[k for k, v in mod._parameters.items() if v is not None]})")
        return p

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path `target` ("0.running_mean"), as PyTorch's."""
        mod, name = self._owner_and_name(target, "buffer")
        b = mod._buffers.get(name)
        if b is None:
            raise AttributeError(f"{type(mod).__name__} has no buffer {name!r} (looking up {target!r}; its "
                                 f"buffers: {[k for k, v in mod._buffers.items() if v is not None]})")
        return b

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call `fn` on every submodule (children first, as PyTorch) and then on this module; returns self.
        The usual use is custom initialisation.

        >>> from rtxviz.nn import Linear, Sequential, init
        >>> def zero_linear(m):
        ...     if isinstance(m, Linear):
        ...         init.zeros_(m.weight)
        >>> net = Sequential(Linear(2, 2), Linear(2, 1)).apply(zero_linear)
        >>> net[1].weight.tolist()
        [[0.0, 0.0]]
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Every module of the tree, this one first (name ""), each once, in definition order."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, mod = stack.pop()
            if id(mod) in seen:
                continue
            seen.add(id(mod))
            yield name, mod
            kids = [(f"{name}.{k}" if name else k, m) for k, m in mod._modules.items() if m is not None]
            stack.extend(reversed(kids))

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(relative name, parameter) pairs, each parameter once (shared parameters are not repeated)."""
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for mname, mod in mods:
            for pname, p in mod._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mname}.{pname}" if mname else pname), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        for mname, mod in self.named_modules(prefix):
            for bname, b in mod._buffers.items():
                if b is not None:
                    yield (f"{mname}.{bname}" if mname else bname), b

    def buffers(self) -> Iterator[Tensor]:
        for _, b in self.named_buffers():
            yield b

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- modes and gradients ------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active, BatchNorm on batch statistics) for this module and, recursively, its
        children (each child's own `train`, so an override is honoured); returns self.

        >>> from rtxviz.nn import Dropout, Sequential
        >>> net = Sequential(Dropout(), Sequential(Dropout())).eval()
        >>> [m.training for m in net.modules()]
        [False, False, False, False]
        """
        if not isinstance(mode, bool):
            raise ValueError(f"{type(self).__name__}.train: mode must be a bool, got {mode!r}")
        self.__dict__["training"] = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self) -> Module:
        """Evaluation mode (dropout off); returns self. Pair it with `no_grad()` for inference."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (to None, or to zeros with set_to_none=False)."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = Variable.from_tensor(Tensor._wrap(p.grad.xp.zeros_like(p.data)), requires_grad=False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set requires_grad on every parameter (False freezes the module); returns self.

        >>> from rtxviz.nn import Linear
        >>> [p.requires_grad for p in Linear(2, 2).requires_grad_(requires_grad=False).parameters()]
        [False, False]
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    # -- devices and dtypes -------------------------------------------------------------------------------
    def to(self, device: Any = None, dtype: Any = None) -> Module:
        """Move (and/or cast floating parameters) in place: the Parameter objects stay the same, so an
        optimizer built before the move keeps working. Returns self.

        >>> from rtxviz.nn import Linear
        >>> Linear(2, 2).to(dtype="float64").weight.dtype.name
        'float64'
        """
        device, dtype = device_or_dtype(device, dtype)  # Module.to(rtxviz.float64), as PyTorch's
        for p in self.parameters():
            p.data = Tensor._wrap(p.data).to(device, dtype if p.data.dtype.kind == "f" else None).data
            if p.grad is not None:
                g = Tensor._wrap(p.grad.data).to(device, dtype if p.grad.data.dtype.kind == "f" else None)
                p.grad = Variable.from_tensor(g, requires_grad=False)
        for mod in self.modules():
            for name, b in mod._buffers.items():
                if b is not None:
                    nb = b.to(device, dtype if b.data.dtype.kind == "f" else None)
                    if nb is not b:
                        mod._buffers[name] = nb
                        mod._bump()
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> Module:
        return self.to(f"cuda:{index}")

    def double(self) -> Module:
        return self.to(dtype="float64")

    def float(self) -> Module:
        return self.to(dtype="float32")

    def half(self) -> Module:
        """Refused: the engine computes in float32 and float64 only (float16 arrays become float32)."""
        raise DTypeError(f"{type(self).__name__}.half: float16 is not supported (the engine computes in float32 and "
                         "float64 only); use .float() or .double()")

    def bfloat16(self) -> Module:
        """Refused: the engine computes in float32 and float64 only."""
        raise DTypeError(f"{type(self).__name__}.bfloat16: bfloat16 is not supported (the engine computes in "
                         "float32 and float64 only); use .float() or .double()")

    # -- state --------------------------------------------------------------------------------------------
    def _state_entries(self) -> Iterator[tuple[str, Tensor]]:
        """(key, parameter or persistent buffer) in PyTorch's state-dict order: module by module (pre-order),
        each module's parameters, then its buffers; each tensor once."""
        seen: set[int] = set()
        for mname, mod in self.named_modules():
            skip = mod.__dict__.get("_non_persistent", ())
            entries = list(mod._parameters.items()) + [(k, b) for k, b in mod._buffers.items() if k not in skip]
            for key, t in entries:
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mname}.{key}" if mname else key), t

    def state_dict(self) -> dict[str, Tensor]:
        """Every parameter and persistent buffer by relative name, as plain Tensors sharing the module's memory,
        in PyTorch's order (module by module: parameters, then buffers).

        >>> from rtxviz.nn import Linear
        >>> list(Linear(2, 3).state_dict())
        ['weight', 'bias']
        """
        return {name: Tensor._wrap(t.data) for name, t in self._state_entries()}

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> tuple[list[str], list[str]]:
        """Copy values into the parameters and buffers, in place (on each one's own device).

        Shapes and dtypes must match exactly; with `strict` the key sets must match too. Every problem is
        checked before anything is written, so a refused load leaves the model unchanged. Returns
        (missing_keys, unexpected_keys).
        """
        targets: dict[str, Tensor] = dict(self._state_entries())
        missing = [k for k in targets if k not in state]
        unexpected = [k for k in state if k not in targets]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise StateDictError(f"load_state_dict({type(self).__name__}): " + "; ".join(parts))
        arrays: dict[str, Any] = {}
        for key, target in targets.items():
            if key not in state:
                continue
            value = state[key]
            arr = value.data if isinstance(value, Tensor) else value
            if not hasattr(arr, "shape") or not hasattr(arr, "dtype"):
                arr = np.asarray(arr)
            if tuple(arr.shape) != tuple(target.shape):
                raise StateDictError(
                    f"load_state_dict({type(self).__name__}): shape mismatch for {key!r}: the model has "
                    f"{tuple(target.shape)}, the state has {tuple(arr.shape)}"
                )
            if np.dtype(arr.dtype) != target.data.dtype:
                raise DTypeError(
                    f"load_state_dict({type(self).__name__}): dtype mismatch for {key!r}: the model has "
                    f"{target.data.dtype}, the state has {np.dtype(arr.dtype)}; convert the model with "
                    f".to(dtype=...) or the state first"
                )
            arrays[key] = arr
        for key, arr in arrays.items():
            target = targets[key]
            target.data[...] = Tensor._wrap(arr).to(target.device).data
        return missing, unexpected

    # -- display ------------------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        kids = list(self.named_children())
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not kids:
            return head + ")"
        lines = [head]
        for name, m in kids:
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        return "\n".join(lines) + "\n)"

