"""TorchRecorder: a PyTorch training loop reported as rtxviz events (the schema rtxviz's own runs stream).

PyTorch's public seams, each for what only it sees (docs/torch.md says why each one):

- a `TorchFunctionMode` sees every torch call in forward: it names the node each call made after the function
  the user called (``linear``, not ``AddmmBackward0``), with the module path, shape, dtype and device of its
  output; and it sees ``backward()`` / ``torch.autograd.backward`` / ``torch.autograd.grad`` being called, with
  their roots, before anything runs;
- there, the walk over ``grad_fn.next_functions`` reports every node of the graph (those no function call was
  seen making, inside C++ composites, named after their grad_fn class) and puts a hook on each
  (``Node.register_hook``): their gradients are reported as backward runs;
- module forward pre/post hooks keep the module path (``layer1.0.conv1``), and, since they also run while
  ``torch.utils.checkpoint`` recomputes a segment in backward (where no function mode is active: PyTorch pops a
  mode while it handles a call, and backward is such a call), they find the recomputed nodes, and push a second
  function mode for the rerun that names them as forward named theirs; they also name a custom
  ``autograd.Function``'s node after the module that applied it (``Function.apply`` is no torch call);
- ``torch.autograd.graph.saved_tensors_hooks`` counts the bytes each node keeps for backward (inside a
  non-reentrant checkpoint, the checkpoint's own hooks take over: what it drops is, rightly, not counted);
- optimizer step hooks (``register_optimizer_step_pre_hook``/``post_hook``) give each parameter's update.

>>> import torch
>>> events = []
>>> lin = torch.nn.Linear(2, 1)
>>> with TorchRecorder(events.append, lin):
...     lin(torch.ones(3, 2)).sum().backward()
>>> [e["kind"] for e in events if e["kind"] in ("node", "backward_begin")]
['node', 'node', 'node', 'backward_begin']
>>> [(e["op"], e["module"]) for e in events if e["kind"] == "node"]
[('t', 'Linear'), ('linear', 'Linear'), ('sum', None)]
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..summary import norm as summary_norm
from .convert import as_numpy, combine, dtype_name, stats_of
from .names import ACCUMULATE_GRAD, METADATA_KEY, REENTRANT_CHECKPOINT, op_from_function, op_from_grad_fn

_now = time.time
_BACKWARDS = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)
#: per-step tables are cleared when they reach this size (a loop that never marks steps stays bounded)
_TABLE_MAX = 1 << 16
#: the recorders attached now, oldest first: rtxviz.torch.detect_anomaly reports what it finds to each
ATTACHED: list[TorchRecorder] = []


class _Label:
    """What the function mode saw making a node: the op name, module path, output meta, bytes saved."""

    __slots__ = ("op", "module", "shape", "dtype", "device", "saved", "t")

    def __init__(self, op: str, module: str | None, t: torch.Tensor, saved: int) -> None:
        self.op, self.module, self.saved = op, module, saved
        self.t = _now()  # when forward made it: the node event carries this time (the walk emits it later)
        self.shape, self.dtype, self.device = list(t.shape), dtype_name(t.dtype), str(t.device)


class _Mode(TorchFunctionMode):
    """Names nodes as forward makes them; catches the start of every backward."""

    def __init__(self, recorder: TorchRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        rec = self.recorder
        if kwargs is None:
            kwargs = {}
        if rec.auto_begin is not None and func in _BACKWARDS:
            rec.auto_begin()  # a backward belongs to a step
        if not rec.recording and rec.auto_begin is None:
            return func(*args, **kwargs)
        if func in _BACKWARDS:
            return rec.run_backward(func, args, kwargs) if rec.recording else func(*args, **kwargs)
        if rec.pending_saved and rec.recording:
            # bytes saved outside any torch call since the last node: a custom autograd.Function's, whose output
            # this call may consume (made in this module: as the walk would say; but its bytes are known here)
            rec._label_unseen(args, rec._stack[-1] if rec._stack else None)
        rec.pending_saved = 0
        rec.op_depth += 1
        try:
            out = func(*args, **kwargs)
        finally:
            rec.op_depth -= 1
        if rec.auto_begin is not None and any(t.grad_fn is not None for t in _tensors(out)):
            rec.auto_begin()  # the first op of the next step's graph: an inferred step begins
        if not rec.recording:
            return out
        if isinstance(out, torch.Tensor):
            rec.label(out, func)
        elif isinstance(out, tuple | list):
            for o in out:
                if isinstance(o, torch.Tensor):
                    rec.label(o, func)
                elif isinstance(o, tuple | list):
                    for p in o:
                        if isinstance(p, torch.Tensor):
                            rec.label(p, func)
        return out


class _Recompute(TorchFunctionMode):
    """Pushed while a module's forward reruns inside backward (torch.utils.checkpoint recomputing a segment, either
    variant): names the recomputed nodes as forward's function mode named the originals (``conv2d``, not the
    ``convolution`` of their grad_fn), so the page can match each recomputation to its node. `_Mode` is not
    active there (PyTorch pops it while it handles the backward call); this one only labels, and passes a
    backward called inside (a reentrant checkpoint's) through untouched."""

    def __init__(self, recorder: TorchRecorder, depth: int) -> None:
        super().__init__()
        self.recorder = recorder
        self.depth = depth  # the module stack's depth with the recomputed module on top: where it is popped

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        rec = self.recorder
        if func in _BACKWARDS:
            return func(*args, **(kwargs or {}))
        rec.pending_saved = 0
        rec.op_depth += 1  # (what the rerun saves is a torch call's, not a checkpoint saving its inputs)
        try:
            out = func(*args, **(kwargs or {}))
        finally:
            rec.op_depth -= 1
        if rec.recording:
            for t in _tensors(out):
                rec.label(t, func)
        return out


class _Rerun(TorchDispatchMode):
    """Pushed while a recorded backward runs: sees the ATen ops PyTorch runs inside it. Backward formulas run with
    grad off (create_graph is false: this mode is not pushed otherwise); what runs with grad on is a forward
    rerun inside backward, i.e. torch.utils.checkpoint recomputing a segment. Their outputs get their grad_fn
    from autograd after this handler returns, so they are kept until the next op with grad off, and the nodes
    behind them walked then (`TorchRecorder._flush_rerun`). A dispatch mode, not the function mode: PyTorch pops
    function modes while it handles the backward call, and a plain function has no module hooks to see it by.
    While a module reruns, nothing is flushed here: `_Recompute` names a node only as its call returns, and the
    call's own saving runs ops with grad off before that; the module's post hook flushes, every name known."""

    def __init__(self, recorder: TorchRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        rec = self.recorder
        if torch.is_grad_enabled():
            if rec.recording:
                rec._rerun.append((out, rec._stack[-1] if rec._stack else None))  # a module's rerun: its path
        elif rec._rerun and rec._relabel is None:
            rec._flush_rerun()
        return out


class TorchRecorder:
    """Reports a PyTorch model's forward graph, backward gradients and optimizer updates to `sink`.

    model: the nn.Module whose module paths and parameter names the events carry (None: no modules, parameters
    unnamed). `recording` is false while a step is not sampled: every seam then returns at once.
    Use as a context manager, or `attach()` / `detach()`; detaching removes every hook it added.
    """

    def __init__(self, sink: Callable[[dict], None], model: torch.nn.Module | None = None,
                 values_max_numel: int = 16) -> None:
        self.sink = sink
        self.model = model
        self.values_max_numel = int(values_max_numel)
        self.step: int | None = None
        self.recording = True
        #: called before the next torch call (rtxviz.torch.watch opens an inferred step there), or None
        self.auto_begin: Callable[[], None] | None = None
        #: called after an optimizer step over this model's parameters (watch ends an inferred step there)
        self.on_optimizer_step: Callable[[], None] | None = None
        self.pending_saved = 0
        #: torch calls running now (the function mode's); a tensor saved outside any is torch.utils.checkpoint
        #: saving its inputs (non-reentrant), which marks the next backward as one that may recompute
        self.op_depth = 0
        self._checkpointed = False
        self._backward_reported = False  # detect_anomaly reported what this backward raises for
        self._param_names: dict[int, str] = {}
        self._modules: list[tuple[torch.nn.Module, str]] = []
        if model is not None:
            self._param_names = {id(p): n for n, p in model.named_parameters()}
            self._modules = [(m, n or type(model).__name__) for n, m in model.named_modules()]
        self._stack: list[str] = []
        self._labels: dict[Any, _Label] = {}
        self._ids: dict[Any, int] = {}            # grad_fn -> node id (this step)
        self._acc: dict[Any, int] = {}            # AccumulateGrad node -> leaf id (this step)
        self._leaves: dict[int, tuple[int, Any]] = {}  # id(tensor) -> (leaf id, weakref)
        self._next_node = 0
        self._next_leaf = 0
        self._next_segment = 0
        self._node_handles: list[Any] = []
        self._handles: list[Any] = []
        self._in_backward = 0
        self._recompute: int | None = None        # the segment being recomputed now
        self._forward_t: float | None = None      # forward time of the last labelled node the walk reported
        self._recomputed: set[int] = set()        # ids of recomputed nodes (this step)
        self._graded: set[int] = set()            # ids of nodes whose grad event was sent (this step)
        self._grad_norms: dict[int, tuple[int, int, float]] = {}  # id(param) -> (.grad's buffer, version, norm)
        self._rerun: list[tuple[Any, str | None]] = []  # (output, module path) of ops rerun in backward
        self._before: dict[int, torch.Tensor] = {}  # id(param) -> its copy before the optimizer step
        self._no_grad_outputs: list[tuple[torch.Tensor, str, str | None]] = []  # reentrant checkpoint outputs
        self._segment_names: dict[Any, str] = {}  # reentrant checkpoint node -> the module it checkpoints
        self._mode: _Mode | None = None
        self._relabel: _Recompute | None = None   # pushed while a module's forward reruns in backward
        #: (module, grad_fn name) and grad_fn name -> the op forward named such nodes this step (None: it named
        #: them differently); names recomputed nodes no call was seen making (a checkpointed plain function's)
        self._forward_ops: dict[Any, str | None] = {}
        self._saved_hooks: Any = None
        self.attached = False

    # -- attaching -------------------------------------------------------------------------------------------
    def attach(self) -> TorchRecorder:
        if self.attached:
            return self
        for m, path in self._modules:
            self._handles.append(m.register_forward_pre_hook(partial(self._module_pre, path)))
            self._handles.append(m.register_forward_hook(partial(self._module_post, path), always_call=True))
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._handles.append(register_optimizer_step_pre_hook(self._optimizer_pre))
        self._handles.append(register_optimizer_step_post_hook(self._optimizer_post))
        # pack returns a detached alias: returning the tensor itself would make a reference cycle through its
        # grad_fn (torch.autograd.graph.saved_tensors_hooks' warning)
        self._saved_hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._saved_hooks.__enter__()
        self._mode = _Mode(self)
        self._mode.__enter__()
        self.attached = True
        ATTACHED.append(self)
        return self

    def detach(self) -> None:
        """Remove every hook, mode and table entry this recorder added (the model runs as if never watched)."""
        if not self.attached:
            return
        self.attached = False
        self.recording = False
        if self in ATTACHED:
            ATTACHED.remove(self)
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        if self._saved_hooks is not None:
            self._saved_hooks.__exit__(None, None, None)
            self._saved_hooks = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._relabel = None  # (a module's forward interrupted by the detach: its post hook is gone)
        self.new_step(None)
        self._leaves.clear()
        self._before.clear()
        self._grad_norms.clear()

    def __enter__(self) -> TorchRecorder:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def new_step(self, index: int | None) -> None:
        """Start step `index` (None: between steps): the per-step tables and node hooks are dropped."""
        self.step = index
        for h in self._node_handles:
            h.remove()
        self._node_handles.clear()
        self._labels.clear()
        self._ids.clear()
        self._acc.clear()
        self._recomputed.clear()
        self._graded.clear()
        self._recompute = None
        self._forward_ops.clear()
        self._no_grad_outputs.clear()
        self._segment_names.clear()

    def node_id(self, grad_fn: Any) -> int | None:
        """The id this step's events give `grad_fn` (a node), or None when it was not reported."""
        return self._ids.get(grad_fn)

    def leaf_id_of(self, tensor: torch.Tensor) -> int | None:
        """The leaf id of a parameter or input tensor already reported, else None."""
        entry = self._leaves.get(id(tensor))
        return entry[0] if entry is not None and entry[1]() is tensor else None

    # -- forward ---------------------------------------------------------------------------------------------
    def label(self, out: torch.Tensor, func: Any) -> None:
        fn = out.grad_fn
        if fn is None or fn in self._labels or fn in self._ids:
            return
        if len(self._labels) >= _TABLE_MAX:
            self._labels.clear()
        self._labels[fn] = _Label(op_from_function(getattr(func, "__name__", "op")),
                                  self._stack[-1] if self._stack else None, out, self.pending_saved)
        self.pending_saved = 0

    def _label_unseen(self, obj: Any, module: str | None) -> None:
        """Label the nodes behind the tensors in `obj` (a module's inputs or output) that no torch call was seen
        making, as made in `module`: a custom `torch.autograd.Function`'s (its ``apply`` is no torch function, so
        the function mode never sees it), named after its class. Its consumer's module, which the walk would give
        it otherwise, is another module's when the output crosses a module boundary, which is where this looks.
        The bytes saved since the last labelled call are the Function's (``ctx.save_for_backward``)."""
        saved = self.pending_saved  # (read first: each tensor attribute read through the function mode resets it)
        with torch._C.DisableTorchFunction():  # module hooks run with the mode active: `t.grad_fn` is a call
            for t in _tensors(obj):
                fn = t.grad_fn
                if fn is None or fn in self._labels or fn in self._ids:
                    continue
                if len(self._labels) >= _TABLE_MAX:
                    self._labels.clear()
                self._labels[fn] = _Label(op_from_grad_fn(fn.name()), module, t, saved)
                saved = 0
        self.pending_saved = saved

    def _pack(self, t: torch.Tensor) -> tuple[torch.Tensor, int]:
        if not self.op_depth:
            # saved by no torch call: a non-reentrant checkpoint saving its inputs, or a custom autograd.Function.
            # The function mode is active here (inside a call it handles it is not): this hook's own tensor calls
            # would reach it, and each call it sees resets the count
            self._checkpointed = True
            with torch._C.DisableTorchFunction():
                return self._save(t)
        return self._save(t)

    def _save(self, t: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Count `t`'s bytes as saved by the node being made; its detached alias and version, for `_unpack`."""
        self.pending_saved += t.element_size() * t.numel()
        # the version too: PyTorch checks a saved tensor's version only when no pack hook saves it, so without
        # this a tensor modified in place after it was saved would give wrong gradients while watched
        return t.detach(), t._version

    def _module_pre(self, path: str, module: Any, args: Any) -> None:
        if self.recording and not self._in_backward:
            self._label_unseen(args, self._stack[-1] if self._stack else None)  # made by the caller's module
        self._stack.append(path)
        if self._in_backward and self.recording and self._recompute is None:
            # a module running inside backward: torch.utils.checkpoint (non-reentrant) recomputing a segment
            # it dropped in forward; the reentrant variant opened its segment at its node's pre-hook already
            seg = self._new_segment(path)
            self._emit({"kind": "checkpoint", "phase": "end", "segment": seg, "ops": 0, "saved_bytes": 0})
            self._begin_recompute(seg)
        if self._in_backward and self.recording and self._recompute is not None and self._relabel is None:
            # popped by this module's post hook, which runs even when the forward raises (always_call: PyTorch's
            # early stop of a non-reentrant recomputation raises out of it)
            self._relabel = _Recompute(self, len(self._stack))
            self._relabel.__enter__()

    def _module_post(self, path: str, module: Any, args: Any, output: Any) -> None:
        relabel = self._relabel
        if relabel is not None and relabel.depth == len(self._stack) and self._stack[-1] == path:
            self._relabel = None
            relabel.__exit__(None, None, None)
            if self._rerun:
                self._flush_rerun()  # what `_Rerun` kept back while the module reran
        if self._stack and self._stack[-1] == path:
            self._stack.pop()
        if not self.recording:
            return
        if not self._in_backward:
            self._label_unseen(output, path)
        if not self._in_backward and not torch.is_grad_enabled() and any(
                t.requires_grad for t in _tensors(args)):
            # a module run without grad on inputs that need it: torch.utils.checkpoint's reentrant variant (its
            # node, made around this very output, is named after the module once backward finds it)
            for t in _tensors(output):
                self._no_grad_outputs.append((t, path, self._stack[-1] if self._stack else None))
        if self._recompute is not None:
            roots = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
            self._walk(roots, default_module=path)

    # -- the graph -------------------------------------------------------------------------------------------
    def run_backward(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Report the graph behind the roots, hook its nodes, then run the backward `func` was asked for."""
        roots = _tensors(args[0] if args else kwargs.get("tensors", kwargs.get("outputs", ())))
        for t, path, parent in self._no_grad_outputs:
            if t.grad_fn is not None and t.grad_fn.name() == REENTRANT_CHECKPOINT:
                self._labels[t.grad_fn] = _Label("checkpoint", parent, t, 0)
                self._segment_names[t.grad_fn] = path
        self._no_grad_outputs.clear()
        self._walk([t.grad_fn for t in roots if t.grad_fn is not None])
        refs = []
        for t in roots:
            if t.grad_fn is not None and t.grad_fn in self._ids:
                refs.append({"node": self._ids[t.grad_fn]})
        self._emit({"kind": "backward_begin", "roots": refs, "create_graph": bool(kwargs.get("create_graph"))})
        self._in_backward += 1
        # the rerun watch costs on every op of the backward (a Python call each, and PyTorch's fast paths off:
        # +24% on resnet18's backward measured), so it runs only where a checkpoint was seen: a reentrant one's
        # node in the graph, or a non-reentrant one saving its inputs in forward
        checkpointed, self._checkpointed = self._checkpointed, False
        rerun = _Rerun(self) if checkpointed and not _create_graph(func, args, kwargs) else None
        self._backward_reported = False
        try:
            if rerun is None:
                return func(*args, **kwargs)
            with rerun:
                return func(*args, **kwargs)
        except Exception as exc:
            # a backward that raised (a saved tensor modified in place, a hook's error): the error event an
            # rtxviz run sends, so the page says the backward failed and lists why. PyTorch's message names
            # the tensor, not the node that failed: no node here. What detect_anomaly found is reported already.
            if self.recording and not self._backward_reported:
                self._emit({"kind": "anomaly", "phase": "backward", "reason": "error", "op": "backward",
                            "node": None, "nan": 0, "inf": 0, "origin": True, "bad_inputs": [],
                            "message": f"{type(exc).__name__}: {exc}"[:2000]})
            raise
        finally:
            self._in_backward -= 1
            if self._rerun:
                self._flush_rerun()
            if not self._in_backward and self._recompute is not None:
                self._end_recompute()
            self._emit({"kind": "backward_end"})

    def _flush_rerun(self) -> None:
        """The nodes behind the ops rerun in backward since the last flush, reported as recomputed: in the segment
        open now (a checkpointed module's, opened by its hooks, or one opened by an earlier flush), or in a new one
        (a checkpointed plain function, which nothing else sees). A flush comes at every op with grad off, which
        includes the checkpoint's own saving in the middle of the rerun, so the segment stays open: it ends, as a
        module's does, when the node whose backward asked for the recomputation has finished (`_grad`)."""
        roots: dict[Any, str | None] = {}
        for out, module in self._rerun:
            for t in _tensors(out):
                if t.grad_fn is not None and t.grad_fn not in self._ids:
                    roots.setdefault(t.grad_fn, module)
        self._rerun.clear()
        if not roots:
            return
        if self._recompute is None:
            seg = self._new_segment("checkpoint")
            self._emit({"kind": "checkpoint", "phase": "end", "segment": seg, "ops": 0, "saved_bytes": 0})
            self._begin_recompute(seg)
        for fn, module in roots.items():  # in the order they ran: each after what it was computed from
            self._walk([fn], default_module=module)

    def _walk(self, roots: list, default_module: str | None = None) -> None:
        """Report every node reachable from `roots` not reported yet, producers before their consumers."""
        ids, acc = self._ids, self._acc
        if len(ids) >= _TABLE_MAX:
            self.new_step(self.step)
        stack: list[tuple[Any, str | None, bool]] = [(fn, default_module, False) for fn in reversed(roots)]
        seen: set = set()
        order: list[tuple[Any, str | None]] = []
        labels = self._labels
        while stack:
            fn, module, done = stack.pop()
            if done:
                order.append((fn, module))
                continue
            if fn in seen or fn in ids or fn in acc:
                continue
            seen.add(fn)
            if fn.name() == ACCUMULATE_GRAD:
                self._leaf(fn)
                continue
            label = labels.get(fn)
            if label is not None:  # made where it was seen made (None: outside the model), not where consumed
                module = label.module
            stack.append((fn, module, True))
            for child, _ in reversed(fn.next_functions):
                if child is not None and child not in seen:
                    stack.append((child, module, False))
        for fn, module in order:
            self._node(fn, module)

    def _node(self, fn: Any, module: str | None) -> None:
        self._next_node += 1
        nid = self._ids[fn] = self._next_node
        grad_fn_name = fn.name()
        label = self._labels.pop(fn, None)
        if label is not None:
            op, shape, dtype, device, saved = label.op, label.shape, label.dtype, label.device, label.saved
            module = label.module
            if self._recompute is None:
                self._forward_t = label.t
        else:
            op, saved = op_from_grad_fn(grad_fn_name), 0
            if self._recompute is not None:
                op = self._forward_name(module, grad_fn_name) or op
            meta = fn._input_metadata  # what PyTorch knows of the node's (first) output: the gradient's shape
            shape, dtype, device = (list(meta[0].shape), dtype_name(meta[0].dtype), str(meta[0].device)) \
                if meta else ([], "?", "?")
        refs = []
        keep = []
        for i, (child, _) in enumerate(fn.next_functions):
            if child is None:
                continue  # an input that needs no gradient: no edge in PyTorch's graph either
            keep.append(i)
            lid = self._acc.get(child)
            refs.append({"leaf": lid} if lid is not None else {"node": self._ids[child]})
        checkpoint = grad_fn_name == REENTRANT_CHECKPOINT
        seg = None
        if checkpoint:
            self._checkpointed = True  # its backward reruns the segment: the rerun watch is needed
            op = "checkpoint"
            seg = self._new_segment(self._segment_names.pop(fn, "") or module or "checkpoint")
        if self._recompute is None:
            self._learn_name(module, grad_fn_name, op)
        ev: dict[str, Any] = {"kind": "node", "id": nid, "op": op, "inputs": refs, "shape": shape, "dtype": dtype,
                              "device": device, "module": module, "attrs": {"grad_fn": grad_fn_name},
                              "saved_bytes": saved}
        if self._recompute is not None:
            ev["recomputed"] = True
            ev["segment"] = self._recompute
            self._recomputed.add(nid)
        elif seg is not None:
            ev["segment"] = seg
        # stamped with when forward ran it (a node no call was seen making: its maker's time), not the walk's
        self._emit(ev, self._forward_t if self._recompute is None else None)
        if seg is not None:
            self._emit({"kind": "checkpoint", "phase": "end", "segment": seg, "ops": 1, "saved_bytes": saved})
            self._node_handles.append(fn.register_prehook(partial(self._checkpoint_pre, seg)))
        # what rtxviz.render reads back from the node itself (render(tensor) after backward): names and gradients
        info = fn.metadata[METADATA_KEY] = {"op": op, "module": module}
        self._node_handles.append(fn.register_hook(partial(self._grad, nid, tuple(keep), checkpoint, info)))

    def _learn_name(self, module: str | None, grad_fn_name: str, op: str) -> None:
        """Keep the op name forward gave a `grad_fn_name` node in `module` (and anywhere), for the recomputed
        nodes no call is seen making; a key forward gave two names gets None (no guess)."""
        ops = self._forward_ops
        for key in ((module, grad_fn_name), grad_fn_name):
            if ops.setdefault(key, op) != op:
                ops[key] = None

    def _forward_name(self, module: str | None, grad_fn_name: str) -> str | None:
        """Forward's one name for recomputed `grad_fn_name` nodes in `module`, else None. In a module, only its
        own nodes decide (inside a module's rerun every call is labelled: what is left is a composite's inner
        nodes, which forward named after their grad_fn too). Outside any module (a checkpointed plain function:
        its rerun in backward runs in no module even where forward ran it in one) any forward node decides."""
        ops = self._forward_ops
        if module is not None:
            return ops.get((module, grad_fn_name))
        return ops.get((None, grad_fn_name)) or ops.get(grad_fn_name)

    def _leaf(self, fn: Any) -> None:
        t = fn.variable
        k = id(t)
        entry = self._leaves.get(k)
        if entry is not None and entry[1]() is t:
            lid = entry[0]
        else:
            self._next_leaf += 1
            lid = self._next_leaf
            leaves = self._leaves

            def forget(ref: Any, k: int = k) -> None:
                e = leaves.get(k)
                if e is not None and e[1] is ref:
                    del leaves[k]

            leaves[k] = (lid, weakref.ref(t, forget))
            name = self._param_names.get(k)
            ev: dict[str, Any] = {"kind": "leaf", "id": lid, "name": name, "shape": list(t.shape),
                                  "dtype": dtype_name(t.dtype), "device": str(t.device), "requires_grad": True,
                                  "param": name is not None or isinstance(t, torch.nn.Parameter)}
            if t.numel() <= self.values_max_numel:
                ev["values"] = stats_of(t, self.values_max_numel).get("values")
            self._emit(ev)
        self._acc[fn] = lid
        fn.metadata[METADATA_KEY] = {"name": self._param_names.get(k)}
        self._node_handles.append(fn.register_hook(partial(self._leaf_grad, lid, t)))

    # -- backward --------------------------------------------------------------------------------------------
    def _grad(self, nid: int, keep: tuple, checkpoint: bool, info: dict, grad_inputs: tuple,
              grad_outputs: tuple) -> None:
        if not self.recording:
            return
        if self._recompute is not None and (checkpoint or nid not in self._recomputed):
            self._end_recompute()  # the node whose backward asked for the recomputation has finished
        vm = self.values_max_numel
        outs = [stats_of(g, vm) for g in grad_outputs if g is not None]
        ins = [stats_of(grad_inputs[i], vm) if i < len(grad_inputs) and grad_inputs[i] is not None else None
               for i in keep]
        out = combine(outs) if outs else {"shape": [], "norm": 0.0, "min": None, "max": None}
        info["grad"], info["input_grads"] = out, ins
        self._graded.add(nid)
        self._emit({"kind": "grad", "node": nid, "output": out, "inputs": ins})

    def _leaf_grad(self, lid: int, t: torch.Tensor, grad_inputs: tuple, grad_outputs: tuple) -> None:
        if self.recording and grad_outputs and grad_outputs[0] is not None:
            g = grad_outputs[0]
            stats = stats_of(g, self.values_max_numel)
            # where .grad is this very buffer (AccumulateGrad took the gradient as .grad: no earlier one to add
            # to), the optimizer's ‖grad‖ is this norm: kept, with .grad's buffer and version to check it by
            pg = t.grad
            if pg is not None and stats["norm"] is not None and pg.data_ptr() == g.data_ptr() and pg.shape == g.shape:
                self._grad_norms[id(t)] = (pg.data_ptr(), pg._version, stats["norm"])
            else:
                self._grad_norms.pop(id(t), None)
            self._emit({"kind": "leaf_grad", "leaf": lid, "stats": stats})

    def _checkpoint_pre(self, seg: int, grad_outputs: tuple) -> None:
        if self.recording and self._recompute is None:
            self._begin_recompute(seg)

    def _new_segment(self, name: str) -> int:
        self._next_segment += 1
        self._emit({"kind": "checkpoint", "phase": "begin", "segment": self._next_segment, "name": name})
        return self._next_segment

    def _begin_recompute(self, seg: int) -> None:
        self._recompute = seg
        self._emit({"kind": "checkpoint", "phase": "recompute_begin", "segment": seg})

    def _end_recompute(self) -> None:
        seg, self._recompute = self._recompute, None
        self._emit({"kind": "checkpoint", "phase": "recompute_end", "segment": seg})

    # -- anomalies (what rtxviz.torch.detect_anomaly found) ----------------------------------------------------
    def forward_anomaly(self, op: str, func: Any, bad: torch.Tensor, nan: int, inf: int, bad_inputs: list[int],
                        site: Any) -> None:
        """A forward op made NaN/Inf (`bad`, its output): report the graph up to it and an `anomaly` event on its
        node, as an rtxviz run's hook does, naming the op, the module path and the user's file and line. The
        graph is walked here because a torch run reports its nodes when backward starts, and this forward will
        not reach a backward (detect_anomaly raises next)."""
        if not self.recording:
            return
        self.label(bad, func)  # (a function mode above this recorder's saw the output first)
        fn = bad.grad_fn
        module = self._labels[fn].module if fn is not None and fn in self._labels else (
            self._stack[-1] if self._stack else None)
        nid = None
        if fn is not None:
            self._walk([fn])
            nid = self._ids.get(fn)
        where = f"node #{nid} " if nid is not None else ""
        inside = f"in {module} " if module else ""
        cause = f"passed on NaN/Inf from input(s) {bad_inputs}" if bad_inputs else (
            f"produced {nan} NaN and {inf} Inf from finite inputs")
        self._emit({"kind": "anomaly", "phase": "forward", "reason": "nonfinite", "op": op, "node": nid,
                    "nan": nan, "inf": inf, "origin": not bad_inputs, "bad_inputs": bad_inputs,
                    "message": f"{op} {where}{inside}{cause}{_at(site)}"[:2000]})

    def backward_anomaly(self, node: int, op: str, grad_inputs: tuple, grad_outputs: tuple, bad: list[int],
                         nan: int, inf: int, origin: bool, site: Any) -> None:
        """The node whose Python id is `node` sent NaN/Inf gradients along inputs `bad`: its `grad` event (when
        this recorder's own hook has not run yet: detect_anomaly's may run first, and raises), then an `anomaly`
        event. (An id, as hooks hold no node; this step's table keeps its node alive, so the id is its own.)"""
        if not self.recording:
            return
        fn = next((f for f in self._ids if id(f) == node), None)
        if fn is None:
            return
        nid = self._ids[fn]
        keep = tuple(i for i, (child, _) in enumerate(fn.next_functions) if child is not None)
        if nid not in self._graded:
            self._grad(nid, keep, fn.name() == REENTRANT_CHECKPOINT, fn.metadata.setdefault(METADATA_KEY, {}),
                       grad_inputs, grad_outputs)
        module = fn.metadata.get(METADATA_KEY, {}).get("module")
        inside = f" in {module}" if module else ""
        # PyTorch's input order (next_functions, None included) to the event's (the edges that exist)
        edges = [keep.index(i) for i in bad if i in keep]
        self._backward_reported = True
        self._emit({"kind": "anomaly", "phase": "backward", "reason": "nonfinite", "op": op, "node": nid,
                    "nan": nan, "inf": inf, "origin": origin, "bad_inputs": edges,
                    "message": (f"backward of {op} node #{nid}{inside} produced NaN/Inf gradients for input(s) "
                                f"{edges}" + (" from a finite output gradient" if origin else "")
                                + _at(site, "forward at "))[:2000]})

    # -- the optimizer ---------------------------------------------------------------------------------------
    def _own(self, optimizer: Any) -> list:
        names = self._param_names
        return [p for g in optimizer.param_groups for p in g["params"] if id(p) in names or not names]

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.recording:
            return
        with torch._C.DisableTorchFunction(), torch.no_grad():
            for p in self._own(optimizer):
                if p.grad is None:
                    continue
                buf = self._before.get(id(p))
                if buf is None or buf.shape != p.shape or buf.dtype != p.dtype:
                    buf = self._before[id(p)] = torch.empty_like(p)  # kept and reused: no allocation per step
                buf.copy_(p)

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        own = self._own(optimizer)
        if not own:
            return
        if self.recording:
            rows = []
            with torch._C.DisableTorchFunction(), torch.no_grad():
                for p in own:
                    buf = self._before.get(id(p))
                    if p.grad is None or buf is None:
                        continue
                    lid = self._leaves.get(id(p), (None,))[0]
                    if lid is None:
                        continue  # a parameter this step's graph never reached
                    buf.sub_(p)  # -(the update)
                    un, pn = _norm(buf), _norm(p)
                    g, known = p.grad, self._grad_norms.pop(id(p), None)
                    gn = known[2] if known is not None and known[:2] == (g.data_ptr(), g._version) else _norm(g)
                    rows.append({"leaf": lid, "name": self._param_names.get(id(p)), "grad_norm": gn,
                                 "param_norm": pn, "update_norm": un,
                                 "update_ratio": None if un is None or not pn else un / pn})
            self._emit({"kind": "optimizer_step", "optimizer": type(optimizer).__name__, "params": rows})
        if self.on_optimizer_step is not None:
            self.on_optimizer_step()

    def _emit(self, ev: dict, t: float | None = None) -> None:
        ev["v"] = 1
        ev["t"] = _now() if t is None else t
        ev["step"] = self.step
        self.sink(ev)


def _create_graph(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether this backward call builds a graph of its own (its formulas then run with grad on)."""
    if "create_graph" in kwargs:
        return bool(kwargs["create_graph"])
    at = 4 if func is torch.autograd.grad else 3  # (self|tensors, gradient, retain_graph, create_graph); grad: +1
    return len(args) > at and bool(args[at])


def _at(site: Any, what: str = "") -> str:
    """`` (at model.py:12 (in forward): h = w * w)``: where in the user's code, for a message; "" if unknown."""
    if site is None:
        return ""
    code = site.line
    return f" ({what or 'at '}{site.short}{': ' + code if code else ''})"


def _unpack(packed: tuple[torch.Tensor, int]) -> torch.Tensor:
    """The saved tensor, if nothing wrote to it in place since it was saved; else PyTorch's own error (the
    detached alias shares the tensor's version counter, so it sees every write)."""
    t, version = packed
    if t._version != version:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{t.type()} {list(t.shape)}] is at version {t._version}; expected version {version} instead "
            "(rtxviz.torch reports the check PyTorch makes on saved tensors, which its saved-tensor hooks "
            "turn off)")
    return t


def _norm(t: torch.Tensor) -> float | None:
    """‖t‖ through rtxviz.summary (one pass in C on a NumPy view; torch's vector_norm with a float64
    accumulator measured 4 ms per resnet18 parameter on one core, ~0.3 s a step for three norms each), None when
    not finite."""
    return summary_norm(as_numpy(t))


def _tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors in a value that may be a tensor, or a tuple/list (nested once) of them."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    out: list[torch.Tensor] = []
    if isinstance(obj, tuple | list):
        for o in obj:
            out.extend(_tensors(o) if isinstance(o, tuple | list | torch.Tensor) else ())
    return out


__all__ = ["TorchRecorder", "as_numpy"]
