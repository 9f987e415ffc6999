"""no_grad / enable_grad / is_grad_enabled: per thread, nestable, usable three ways.

>>> from rtxviz import no_grad, is_grad_enabled
>>> with no_grad():
...     is_grad_enabled()
False
>>> no_grad(lambda: is_grad_enabled())
False
>>> @no_grad
... def infer():
...     return is_grad_enabled()
>>> infer()
False
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from . import hooks as _hooks


class _GradState(threading.local):
    """Thread-local switches read on every op (attribute access on a threading.local is cheap)."""

    def __init__(self) -> None:
        self.enabled = True
        self.module_path: str | None = None


STATE = _GradState()


def is_grad_enabled() -> bool:
    """Whether ops record a graph on this thread."""
    return STATE.enabled


class _GradModeSwitch:
    """A context manager, decorator, and function-runner that sets grad mode for its extent."""

    mode: bool = True

    def __new__(cls, fn: Callable[..., Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        if fn is None:
            return super().__new__(cls)
        if not callable(fn) or isinstance(fn, type):
            raise TypeError(f"{cls.__name__}: expected a function, got {type(fn).__name__}")
        # The spec's closure form, `no_grad(lambda: ...)` or `no_grad(f, *args)`, runs at once and returns
        # the result; a named function alone (`@no_grad` above a def) is wrapped instead.
        if args or kwargs or getattr(fn, "__name__", "") == "<lambda>":
            with cls():
                return fn(*args, **kwargs)
        return super().__new__(cls)(fn)

    def __enter__(self) -> _GradModeSwitch:
        self._prev = STATE.enabled
        STATE.enabled = self.mode
        if _hooks.ACTIVE:
            _hooks.emit("grad_mode", enabled=self.mode, scope=type(self).__name__, phase="enter")
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.enabled = self._prev
        if _hooks.ACTIVE:
            _hooks.emit("grad_mode", enabled=self._prev, scope=type(self).__name__, phase="exit")

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with type(self)():
                return fn(*a, **kw)

        return wrapper


class no_grad(_GradModeSwitch):
    """Disable graph recording: `with no_grad():`, `@no_grad`, or `no_grad(lambda: ...)`."""

    mode = False


class enable_grad(_GradModeSwitch):
    """Re-enable graph recording inside a no_grad scope."""

    mode = True


class set_grad_enabled(_GradModeSwitch):
    """`with set_grad_enabled(flag):` sets grad mode to `flag`."""

    def __new__(cls, mode: bool) -> set_grad_enabled:
        obj = object.__new__(cls)
        obj.mode = bool(mode)
        return obj


class inference_mode(_GradModeSwitch):
    """`torch.inference_mode`: `with inference_mode():` or `@inference_mode()` (or without the parentheses) records
    nothing, as no_grad (rtxviz has no separate inference tensors); `inference_mode(False)` changes nothing.

    >>> from rtxviz import tensor
    >>> w = tensor([1.0], requires_grad=True)
    >>> with inference_mode():
    ...     (w * 2).requires_grad
    False
    """

    inference = True

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode above a def
            return object.__new__(cls)(mode)
        obj = object.__new__(cls)
        obj.inference = bool(mode)
        return obj

    def __enter__(self) -> _GradModeSwitch:
        # inference_mode(False) keeps the grad mode found on entry
        self.mode = False if self.inference else STATE.enabled
        return super().__enter__()
