"""Differentiable device moves and dtype casts: the gradient goes back to the source device and dtype."""

from __future__ import annotations

from typing import Any

from ..device import Device, as_device, device_of, to_device
from ..dtypes import as_dtype, device_or_dtype, is_float
from ..graph import Op, apply
from ..tensor import Tensor
from ..variable import Variable
from ._base import Example, implements, own_rule_batched


class ToDeviceDtype(Op):
    name = "to"
    kind = "convert"
    rule = "dX = dY moved back to X's device and dtype"
    batched = staticmethod(own_rule_batched)
    # a cast to float32 and back: linear, so finite differences with a large step are exact up to rounding
    examples = (Example(lambda x: to(to(x, dtype="float32"), dtype="float64"), ((3, 4),), eps=1e-2, atol=1e-4),)

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.state = (device_of(x), x.dtype)
        device, dtype = ctx.attrs["device"], ctx.attrs["dtype"]
        out = x if device is None else to_device(x, device)
        if dtype is not None and out.dtype != dtype:
            out = out.astype(dtype)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        device, dtype = ctx.state
        return (apply(ToDeviceDtype, (g,), {"device": device, "dtype": dtype}),)


def to_device_dtype(x: Any, device: Device | None, dtype: Any) -> Any:
    """`x` on `device` with `dtype` (either may be None for unchanged); `x` itself when nothing changes.

    A cast to an integer or bool dtype ends the graph, as in PyTorch: its values are a step function of x's, whose
    derivative is zero wherever it exists, so the result is a plain Tensor (passing the gradient through would be
    a straight-through estimator nobody asked for)."""
    dt = None if dtype is None else as_dtype(dtype, "to")
    same_device = device is None or device == x.device
    same_dtype = dt is None or dt == x.dtype
    if same_device and same_dtype:
        return x
    attrs = {"device": None if same_device else device, "dtype": dt}
    if dt is not None and not is_float(dt) and x._is_var:
        return apply(ToDeviceDtype, (Tensor._wrap(x.data),), attrs)
    return apply(ToDeviceDtype, (x,), attrs)


@implements(ToDeviceDtype, reference=None)
def to(x: Variable, device: Device | str | None = None, dtype: Any = None) -> Any:
    """Move or cast a Variable, differentiably: gradients flow back to the original device and dtype.
    (`Tensor.to` on a plain Tensor copies without a graph.) A dtype may come first, as ``x.to(rtxviz.float64)``;
    a cast to int64 or bool gives a plain Tensor, with no gradient."""
    device, dtype = device_or_dtype(device, dtype)
    return to_device_dtype(x, None if device is None else as_device(device), dtype)


Variable.to = to  # type: ignore[method-assign]  # the differentiable form overrides Tensor.to for Variables
