"""The autograd engine: tensors, devices, Variables, the tape, ops and the backward walk."""

from __future__ import annotations

from . import (
    autograd,  # torch.autograd's spellings (rtxviz.autograd)
    ops,  # noqa: F401 - attaches op methods to Tensor
)
from .allocator import tune_malloc
from .backward import grad, run_backward
from .cache import (
    CachedGraph,
    GraphCacheError,
    cache_graph,
    get_cached_graph,
    graph_cache_stats,
    init_graph_cache,
    run_cached,
)
from .checkpoint import CheckpointError, CheckpointManager, CheckpointStrategy, checkpoint, checkpoint_sequential
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    is_tensor,
    linspace,
    logspace,
    multinomial,
    numel,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .device import Device, cuda_is_available
from .dtypes import get_default_dtype, set_default_dtype
from .errors import DeviceError, DimError, DTypeError, GraphError, RtxvizError, ShapeError
from .functional import HessianComputer, JacobianComputer, hessian, hvp, jacobian, jvp, vjp
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradCheckResult, GradientChecker, gradcheck, gradgradcheck
from .graph import AutogradTape, BackwardContext, BackwardFunction, Function, Op, TapeNode, apply, record_operation
from .hooks import EngineHook, add_hook, remove_hook
from .memory import memory_stats, reset_peak_memory_stats
from .ops.einsum import einsum
from .ops.shape import cat, clone, stack, where
from .ops.sorting import argsort, sort, topk
from .random import manual_seed
from .tensor import Tensor
from .variable import Variable
from .versions import InplaceError

# freed activation buffers stay in the process between training steps instead of page-faulting in again each
# step (allocator.py says why and what it costs; RTXVIZ_MALLOC_TUNING=0 turns it off)
tune_malloc()

__all__ = [
    "AutogradTape", "BackwardContext", "BackwardFunction", "CheckpointError", "CheckpointManager",
    "CheckpointStrategy", "checkpoint", "checkpoint_sequential", "CachedGraph", "GraphCacheError", "cache_graph",
    "get_cached_graph", "graph_cache_stats", "init_graph_cache", "run_cached", "Device", "DeviceError", "DimError",
    "DTypeError",
    "EngineHook", "GradCheckResult", "GradientChecker", "GraphError", "HessianComputer", "JacobianComputer", "Op",
    "RtxvizError", "ShapeError", "TapeNode", "Tensor", "Variable", "add_hook", "apply", "cat",
    "cuda_is_available", "enable_grad", "grad", "gradcheck", "gradgradcheck", "hessian", "hvp",
    "is_grad_enabled", "jacobian", "jvp", "manual_seed", "memory_stats", "no_grad", "record_operation",
    "remove_hook", "reset_peak_memory_stats", "run_backward", "set_grad_enabled", "stack", "vjp", "where",
    # PyTorch's habits
    "InplaceError", "arange", "argsort", "clone", "einsum", "empty", "empty_like", "eye", "from_numpy", "full",
    "full_like", "get_default_dtype", "linspace", "logspace", "ones", "ones_like", "rand", "rand_like", "randint",
    "randint_like", "randn", "randn_like", "randperm", "set_default_dtype", "sort", "tensor", "topk", "zeros",
    "zeros_like",
    # PyTorch's names from ported training scripts (torch.autograd, as_tensor, multinomial...)
    "Function", "as_tensor", "autograd", "inference_mode", "is_tensor", "multinomial", "numel",
]
