"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict, with PyTorch's names for their children
("0", "1", ... or the dict's keys), so state-dict keys match (`layers.0.weight`).

>>> from rtxviz.nn import Linear, ReLU
>>> len(Sequential(Linear(2, 2), ReLU()))
2
>>> heads = ModuleDict({"a": Linear(2, 1), "b": Linear(2, 3)})
>>> list(heads.state_dict())
['a.weight', 'a.bias', 'b.weight', 'b.bias']
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..engine.tensor import Tensor
from .module import Module, Parameter


def _index(container: Module, idx: Any, n: int) -> int:
    """A list index (negative counts from the end) checked against the length, as a list's IndexError."""
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(f"{type(container).__name__}: index {i} is out of range for {n} entries")
    return i + n if i < 0 else i


class Sequential(Module):
    """Modules applied in order; children are named "0", "1", ... (or the keys of an OrderedDict given).

    >>> from collections import OrderedDict
    >>> from rtxviz.nn import Linear, ReLU
    >>> net = Sequential(OrderedDict([("fc", Linear(2, 3)), ("act", ReLU())]))
    >>> [name for name, _ in net.named_children()], net[0] is net.fc
    (['fc', 'act'], True)
    """

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            for name, m in modules[0].items():
                self.add_module(str(name), m)
            return
        if len(modules) == 1 and not isinstance(modules[0], Module) and isinstance(modules[0], Iterable):
            modules = tuple(modules[0])
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: entry {i} is a {type(m).__name__}, not a Module")
            self.add_module(str(i), m)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        mods = list(self.children())
        n = len(mods)
        i = max(0, min(n, operator.index(index) + (n if index < 0 else 0)))
        mods.insert(i, module)
        self._renumber(mods)
        return self

    def _renumber(self, mods: list[Module]) -> None:
        self._modules.clear()
        self._bump()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return self.children()

    def __getitem__(self, idx: int | str | slice) -> Any:
        mods = list(self.children())
        if isinstance(idx, slice):
            return Sequential(*mods[idx])
        if isinstance(idx, str):
            return self._modules[idx]
        return mods[_index(self, idx, len(mods))]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(self, idx, len(self._modules))]
        setattr(self, key, module)

    def __delitem__(self, idx: int | slice) -> None:
        mods = list(self.children())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(self, idx, len(mods))]
        self._renumber(mods)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():  # the registry itself: no generator per call (None entries skipped)
            if m is not None:
                x = m(x)
        return x


class ModuleList(Module):
    """A list of modules registered as children "0", "1", ... (no forward of its own).

    >>> from rtxviz.nn import Linear
    >>> blocks = ModuleList([Linear(2, 2) for _ in range(3)])
    >>> blocks.insert(0, Linear(2, 5))
    >>> [b.out_features for b in blocks], len(blocks[1:])
    ([5, 2, 2, 2], 3)
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        n = len(mods)
        i = max(0, min(n, operator.index(index) + (n if index < 0 else 0)))
        mods.insert(i, module)
        self._modules.clear()
        self._bump()
        for m in mods:
            self.append(m)  # type: ignore[arg-type]

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter([m for m in self._modules.values() if m is not None])

    def __getitem__(self, idx: int | slice) -> Any:
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])  # type: ignore[arg-type]
        return mods[_index(self, idx, len(mods))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(self, idx, len(self._modules))), module)

    def __delitem__(self, idx: int | slice) -> None:
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(self, idx, len(mods))]
        self._modules.clear()
        self._bump()
        for m in mods:
            self.append(m)  # type: ignore[arg-type]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward: call the modules it holds (iterate over it)")


class ModuleDict(Module):
    """A dict of modules registered as children under their keys (no forward of its own).

    >>> from rtxviz.nn import Linear
    >>> d = ModuleDict({"enc": Linear(2, 2)})
    >>> d["dec"] = Linear(2, 1)
    >>> list(d.keys()), "enc" in d, len(d)
    (['enc', 'dec'], True, 2)
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        m = self._modules.get(key)
        if m is None:
            raise KeyError(f"ModuleDict has no key {key!r} (keys {list(self._modules)})")
        return m

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError(f"ModuleDict: keys must be non-empty strings without '.', got {key!r}")
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]
        self._bump()

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._modules))

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> list[str]:
        return list(self._modules)

    def values(self) -> list[Module]:
        return [m for m in self._modules.values() if m is not None]

    def items(self) -> list[tuple[str, Module]]:
        return [(k, m) for k, m in self._modules.items() if m is not None]

    def pop(self, key: str) -> Module:
        m = self[key]
        del self[key]
        return m

    def clear(self) -> None:
        self._modules.clear()
        self._bump()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, m in pairs:
            self[key] = m

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward: call the modules it holds by key")


class ParameterList(Module):
    """A list of Parameters registered as "0", "1", ... (Tensors given are made Parameters).

    >>> from rtxviz import Tensor
    >>> ps = ParameterList([Tensor.zeros([2]), Tensor.ones([3])])
    >>> [name for name, _ in ps.named_parameters()], ps[1].shape
    (['0', '1'], (3,))
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    @staticmethod
    def _as_parameter(value: Any) -> Parameter:
        if isinstance(value, Parameter):
            return value
        if isinstance(value, Tensor):
            return Parameter(value)
        raise TypeError(f"ParameterList: entries must be Parameters or Tensors, got {type(value).__name__}")

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self._parameters)), self._as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter([p for p in self._parameters.values() if p is not None])

    def __getitem__(self, idx: int) -> Parameter:
        ps = list(self._parameters.values())
        return ps[_index(self, idx, len(ps))]  # type: ignore[return-value]

    def __setitem__(self, idx: int, value: Any) -> None:
        setattr(self, str(_index(self, idx, len(self._parameters))), self._as_parameter(value))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ParameterList has no forward: use the parameters it holds")

    def extra_repr(self) -> str:
        return ", ".join(f"({i}): Parameter of shape {tuple(p.shape)}" for i, p in enumerate(self))



class ParameterDict(Module):
    """A dict of Parameters registered under their keys (Tensors given are made Parameters), so the state-dict
    keys are the dict's keys.

    >>> from rtxviz import Tensor
    >>> ps = ParameterDict({"scale": Tensor.ones([3])})
    >>> ps["shift"] = Tensor.zeros([3])
    >>> list(ps.state_dict()), "scale" in ps, ps["shift"].requires_grad
    (['scale', 'shift'], True, True)
    """

    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _as_parameter(key: str, value: Any) -> Parameter:
        if isinstance(value, Parameter):
            return value
        if isinstance(value, Tensor):
            return Parameter(value)
        raise TypeError(f"ParameterDict[{key!r}]: values must be Parameters or Tensors, got {type(value).__name__}")

    def __getitem__(self, key: str) -> Parameter:
        p = self._parameters.get(key)
        if p is None:
            raise KeyError(f"ParameterDict has no key {key!r} (keys {list(self._parameters)})")
        return p

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError(f"ParameterDict: keys must be non-empty strings without '.', got {key!r}")
        self.register_parameter(key, self._as_parameter(key, value))

    def __delitem__(self, key: str) -> None:
        if key not in self._parameters:
            raise KeyError(f"ParameterDict has no key {key!r} (keys {list(self._parameters)})")
        del self._parameters[key]
        self._bump()

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._parameters))

    def __contains__(self, key: object) -> bool:
        return key in self._parameters

    def keys(self) -> list[str]:
        return list(self._parameters)

    def values(self) -> list[Parameter]:
        return [p for p in self._parameters.values() if p is not None]

    def items(self) -> list[tuple[str, Parameter]]:
        return [(k, p) for k, p in self._parameters.items() if p is not None]

    def get(self, key: str, default: Any = None) -> Any:
        p = self._parameters.get(key)
        return default if p is None else p

    def pop(self, key: str) -> Parameter:
        p = self[key]
        del self[key]
        return p

    def clear(self) -> None:
        self._parameters.clear()
        self._bump()

    def update(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for key, value in pairs:
            self[key] = value

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ParameterDict has no forward: use the parameters it holds by key")

    def extra_repr(self) -> str:
        return ", ".join(f"({k}): Parameter of shape {tuple(p.shape)}" for k, p in self.items())
