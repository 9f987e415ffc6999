"""The event schema (version 1), shared by the emitter and the server. `docs/events.md` documents it.

An event is one JSON object. Every event carries the envelope ``v`` (schema version), ``kind``, ``t`` (unix time
at emission, seconds) and ``step`` (the training step it belongs to, or null); the server adds ``seq`` (its
position in the run, from 1). The rest depends on the kind. Kinds listed in `MODELS` are validated strictly
(unknown fields are errors); any other kind that matches `KIND_PATTERN` is accepted as a `GenericEvent` with free
JSON fields, so new engine happenings (checkpoint segments, graph-cache hits) flow without a schema change.

>>> validate_event({"v": 1, "kind": "backward_end", "t": 0.0, "step": 3})
{'v': 1, 'kind': 'backward_end', 't': 0.0, 'step': 3}
>>> validate_event({"v": 1, "kind": "my_tool.tick", "t": 0.0, "step": None, "n": 4})["n"]
4
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints

from annotated_types import Ge, Le, MaxLen
from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict, is_typeddict  # pydantic needs this TypedDict on Python < 3.12

SCHEMA_VERSION = 1
#: Names a generic (not strictly modelled) event kind may have.
KIND_PATTERN = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")

# Bounds: the server rejects anything larger (413 for whole batches and lines, 422 inside an event).
MAX_NAME = 256
MAX_TEXT = 2000
MAX_DIMS = 32
MAX_INPUTS = 1024
MAX_VALUES = 4096
MAX_PARAMS = 4096

Name = Annotated[str, Field(max_length=MAX_NAME)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Shape = Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_DIMS)]
#: A step index: non-negative and within SQLite's 64-bit integers (the server stores it in a column).
StepIndex = Annotated[int, Field(ge=0, le=2**63 - 1)]
#: A number of things (events, bytes, NaN elements): never negative.
Count = Annotated[int, Field(ge=0)]
Number = float | int | None  # None stands for NaN/Inf in value lists (JSON has no NaN)
Values = Annotated[list[Number], Field(max_length=MAX_VALUES)]
RunId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


# strict=True: a field takes its documented JSON type only ("t": "1.5", "step": true and "sampled": 1 are errors,
# not coerced), so what the server stores reads back with the types docs/events.md gives.
def _strict(cls: type) -> type:
    return with_config(ConfigDict(extra="forbid", strict=True))(cls)


def _open(cls: type) -> type:
    return with_config(ConfigDict(extra="allow", strict=True))(cls)


def _exact_version(v: Any) -> Any:
    """Literal[1] alone also takes true and 1.0 (they compare equal to 1), even in strict mode."""
    if type(v) is not int:
        raise ValueError(f"v must be the integer {SCHEMA_VERSION}, got {v!r}")
    return v


# TypedDicts, not BaseModels: validating into plain dicts is about 4x faster, and the server validates every
# event it ingests.
class _Event(TypedDict):
    """The envelope every event has. Each model narrows `kind` to its Literal (GenericEvent: any matching string);
    Any here lets them (TypedDict fields are invariant). `step` is required (null outside a step), as
    docs/events.md always said: every producer sends it, and `rtxviz import` fills it in (null) for files exported
    from servers that did not yet require it."""

    v: Annotated[Literal[1], BeforeValidator(_exact_version)]
    kind: Any
    t: float
    step: StepIndex | None


@_strict
class Ref(TypedDict, total=False):
    """A reference to a graph value: a recorded node (``{"node": 12}``) or a leaf (``{"leaf": 3}``)."""

    node: int
    leaf: int


@_strict
class Stats(TypedDict):
    """Summary of one tensor (a gradient, usually). NaN/Inf never appear in the numbers: see the counts.

    `mean` is optional: sent for every tensor the compiled kernel summarises, and by the numpy path (no C
    compiler at install, or float16) only for tensors of at most 1024 elements."""

    shape: Shape
    norm: float | None
    min: float | None
    max: float | None
    mean: NotRequired[float | None]
    nan: NotRequired[Count]
    inf: NotRequired[Count]
    values: NotRequired[Values | None]


# -- run and step --------------------------------------------------------------------------------------------
@_strict
class RunStartEvent(_Event):
    kind: Literal["run_start"]
    name: Name
    meta: NotRequired[dict[str, Any]]
    sample_every: NotRequired[Annotated[int, Field(ge=1)]]  # record every k-th step: k >= 1, as watch() asks
    version: NotRequired[Annotated[str, Field(max_length=64)]]


@_strict
class RunEndEvent(_Event):
    kind: Literal["run_end"]
    status: NotRequired[Literal["ok", "error"]]
    error: NotRequired[Text | None]
    #: the emitter's counters when it built this event: `dropped` events lost so far; `sent` the run's own events
    #: (not its `dropped` notices) delivered or queued for the final flush, this one included (docs/events.md)
    dropped: NotRequired[Count]
    sent: NotRequired[Count]


@_strict
class StepBeginEvent(_Event):
    kind: Literal["step_begin"]
    sampled: NotRequired[bool]


@_strict
class StepEndEvent(_Event):
    kind: Literal["step_end"]


@_strict
class DroppedEvent(_Event):
    """The emitter's drop counter: `total` events lost so far in this run, `new` since the last report."""

    kind: Literal["dropped"]
    total: Count
    new: Count
    reason: NotRequired[Annotated[str, Field(max_length=64)]]


# -- the graph -----------------------------------------------------------------------------------------------
@_strict
class LeafEvent(_Event):
    """A value that enters the graph from outside: a parameter, a data input or a constant."""

    kind: Literal["leaf"]
    id: int
    name: NotRequired[Name | None]
    shape: Shape
    dtype: Name
    device: Name
    requires_grad: bool
    param: NotRequired[bool]
    values: NotRequired[Values | None]


SavedRole = Literal["input", "output", "state"]


@_strict
class SavedSlot(TypedDict):
    """Where a saved tensor sits: node `node`'s input `index`, its output, or its `ctx.state` array `index`."""

    node: int
    role: SavedRole
    index: NotRequired[int]


@_strict
class SavedTensor(TypedDict):
    """One tensor a node keeps for its backward: `role` (the op's input `index`, its output, or the array `index` of
    its ctx.state), `bytes`, `shape`, `dtype`; `alias`: the first saved tensor of the run (so far) that reads the same
    buffer (``x * x`` saves x twice; a view of another node's output), so a total counts that buffer once."""

    role: SavedRole
    index: NotRequired[int]
    bytes: Count
    shape: Shape
    dtype: Name
    alias: NotRequired[SavedSlot]


@_strict
class NodeEvent(_Event):
    """One recorded op. `id` is the engine's TapeNode.id; `inputs` holds one Ref per op input, in order."""

    kind: Literal["node"]
    id: int
    op: Name
    inputs: Annotated[list[Ref], Field(max_length=MAX_INPUTS)]
    shape: Shape
    dtype: Name
    device: Name
    module: NotRequired[Name | None]
    rule: NotRequired[Text]
    attrs: NotRequired[dict[str, Any]]
    saved_bytes: NotRequired[Count]
    values: NotRequired[Values | None]
    #: optional (added in version 1, backward compatible): the node ran again during backward to rebuild what a
    #: checkpoint dropped (rtxviz.torch marks PyTorch's recomputation this way); `segment` is that checkpoint's id
    recomputed: NotRequired[bool]
    segment: NotRequired[int | None]
    #: optional (added in version 1, backward compatible): what `saved_bytes` counts, tensor by tensor
    saved: NotRequired[Annotated[list[SavedTensor], Field(max_length=MAX_INPUTS)]]


@_strict
class GradModeEvent(_Event):
    kind: Literal["grad_mode"]
    enabled: bool
    scope: Name
    phase: Literal["enter", "exit"]


@_strict
class DetachEvent(_Event):
    kind: Literal["detach"]
    source: NotRequired[Ref | None]
    result: NotRequired[Ref | None]


# -- backward ------------------------------------------------------------------------------------------------
@_strict
class BackwardBeginEvent(_Event):
    kind: Literal["backward_begin"]
    roots: NotRequired[Annotated[list[Ref], Field(max_length=MAX_INPUTS)]]
    create_graph: NotRequired[bool]


@_strict
class BackwardEndEvent(_Event):
    kind: Literal["backward_end"]


@_strict
class GradEvent(_Event):
    """Gradients at one node's backward: `output` is dL/d(node's output); `inputs[i]` what flowed to input i.

    `local` (optional, added in schema 1 without a version change: older readers ignore nothing, it is new):
    for a small elementwise op, ``local[i]`` holds d(output)/d(input i) evaluated at this node's inputs, element by
    element (null for an input that needs no gradient or is broadcast), so that ``inputs[i].values`` is
    ``output.values`` times ``local[i]``: the chain rule with the engine's own numbers."""

    kind: Literal["grad"]
    node: int
    output: Stats
    inputs: Annotated[list[Stats | None], Field(max_length=MAX_INPUTS)]
    local: NotRequired[Annotated[list[Values | None], Field(max_length=MAX_INPUTS)]]


@_strict
class LeafGradEvent(_Event):
    """The gradient one backward pass adds to a leaf's `.grad` (this pass's contribution, before accumulation)."""

    kind: Literal["leaf_grad"]
    leaf: int
    stats: Stats


@_strict
class AnomalyEvent(_Event):
    """NaN/Inf produced, or (`reason` "error") a backward that raised at this node, e.g. because a tensor it saved
    was modified in place. `origin` is true when the inputs were all finite (this op made the first bad value)."""

    kind: Literal["anomaly"]
    phase: Literal["forward", "backward"]
    reason: NotRequired[Literal["nonfinite", "error"]]
    op: Name
    node: NotRequired[int | None]
    nan: NotRequired[Count]
    inf: NotRequired[Count]
    origin: NotRequired[bool]
    bad_inputs: NotRequired[Annotated[list[int], Field(max_length=MAX_INPUTS)]]
    message: NotRequired[Text]


# -- training and checks -------------------------------------------------------------------------------------
@_strict
class ParamUpdate(TypedDict):
    leaf: int
    name: NotRequired[Name | None]
    grad_norm: float | None
    param_norm: float | None
    update_norm: float | None
    update_ratio: float | None


@_strict
class OptimizerStepEvent(_Event):
    kind: Literal["optimizer_step"]
    optimizer: NotRequired[Name]
    params: Annotated[list[ParamUpdate], Field(max_length=MAX_PARAMS)]


@_open
class GradcheckEvent(_Event):
    """The result of a gradient check; extra fields (tolerances, per-input errors) are allowed."""

    kind: Literal["gradcheck"]
    name: Name
    passed: bool
    max_abs_error: NotRequired[float | None]
    max_rel_error: NotRequired[float | None]


@_strict
class EngineEvent(_Event):
    """An engine happening whose name collides with a core kind: wrapped rather than lost."""

    kind: Literal["engine_event"]
    name: Name
    fields: NotRequired[dict[str, Any]]


@_open
class GenericEvent(_Event):
    """Any other kind (the engine's `checkpoint` and `graph_cache` happenings, user tools): free fields.
    ``seq`` is refused (the server assigns it)."""

    kind: str
    seq: NotRequired[None]


MODELS: dict[str, type] = {
    get_args(get_type_hints(m)["kind"])[0]: m
    for m in (
        RunStartEvent, RunEndEvent, StepBeginEvent, StepEndEvent, DroppedEvent, LeafEvent, NodeEvent,
        GradModeEvent, DetachEvent, BackwardBeginEvent, BackwardEndEvent, GradEvent, LeafGradEvent,
        AnomalyEvent, OptimizerStepEvent, GradcheckEvent, EngineEvent,
    )
}
#: Kinds with a strict model; an engine `event(kind)` with one of these names is wrapped in `engine_event`.
CORE_KINDS = frozenset(MODELS)

_ADAPTERS: dict[str, TypeAdapter[Any]] = {kind: TypeAdapter(model) for kind, model in MODELS.items()}
_GENERIC = TypeAdapter(GenericEvent)
_ANY_MODEL: Any = Union[tuple(MODELS.values())]  # noqa: UP007 - built from the models at run time
_BATCH: TypeAdapter[Any] = TypeAdapter(list[Annotated[_ANY_MODEL, Field(discriminator="kind")]])


# -- the compiled check: the same models as specs for rtxviz/_eventcheck.c ------------------------------------
# pydantic builds a validated copy of every event, which the server throws away; the C module only walks the
# decoded objects. It confirms what matches and leaves anything else to pydantic, the authority (it names the
# fault or accepts what the spec was too cautious for), so the errors are pydantic's, event for event.
_ANY, _STR, _INT, _FLOAT, _BOOL, _NONE, _LITERAL, _LIST, _DICT, _TYPED, _UNION = range(11)
_INT64 = (-2**63, 2**63 - 1)


class _NoSpec(Exception):
    """A type the C check does not model: its kind is left to pydantic."""


def _spec(tp: Any, bounds: dict[str, int] | None = None) -> tuple:
    """The spec of one annotation (see _eventcheck.c for the codes).

    >>> _spec(Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=3)])
    (7, (2, 0, None), 3)
    """
    bounds = dict(bounds or {})
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        inner, *meta = args
        for m in meta:
            if isinstance(m, BeforeValidator):
                if m.func is not _exact_version:
                    raise _NoSpec(f"validator {m.func!r}")
                return (_LITERAL, (SCHEMA_VERSION,))  # an int equal to 1, as _exact_version and Literal[1] ask
            for c in getattr(m, "metadata", [m]):  # a FieldInfo holds annotated_types constraints
                if isinstance(c, MaxLen):
                    bounds["maxlen"] = c.max_length
                elif isinstance(c, Ge):
                    bounds["ge"] = int(c.ge)  # type: ignore[call-overload]  # the schema's bounds are ints
                elif isinstance(c, Le):
                    bounds["le"] = int(c.le)  # type: ignore[call-overload]
                else:
                    raise _NoSpec(f"constraint {c!r}")
        return _spec(inner, bounds)
    if origin in (NotRequired, Required):
        return _spec(args[0], bounds)
    if origin in (Union, UnionType):
        return (_UNION, tuple(_spec(a) for a in args))
    if origin is Literal:
        return (_LITERAL, args)
    if origin is list:
        return (_LIST, _spec(args[0]), bounds.pop("maxlen", -1)) if set(bounds) <= {"maxlen"} else _no(tp, bounds)
    if origin is dict and args[:1] == (str,) and args[1] is Any:
        return (_DICT,)
    if tp is Any:
        return (_ANY,)
    if tp is str and set(bounds) <= {"maxlen"}:
        return (_STR, bounds.get("maxlen", -1))
    if tp is int and set(bounds) <= {"ge", "le"}:  # beyond 64 bits the C check leaves an int to pydantic anyway
        lo, hi = bounds.get("ge"), bounds.get("le")
        return (_INT, None if lo is None or lo <= _INT64[0] else lo, None if hi is None or hi >= _INT64[1] else hi)
    if not bounds and tp in (float, bool, type(None)):
        return {float: (_FLOAT,), bool: (_BOOL,), type(None): (_NONE,)}[tp]
    if is_typeddict(tp):
        return _typed_spec(tp)
    return _no(tp, bounds)


def _no(tp: Any, bounds: dict[str, int]) -> tuple:
    raise _NoSpec(f"{tp!r} with {bounds}")


def _typed_spec(cls: Any) -> tuple:
    config = getattr(cls, "__pydantic_config__", {})
    if config.get("strict") is not True or config.get("extra") not in ("forbid", "allow"):
        raise _NoSpec(f"{cls.__name__}: only strict models with extra forbid/allow are modelled")
    hints = get_type_hints(cls, include_extras=True)
    # with postponed annotations, typing cannot see NotRequired when the class is made: read it off the hints
    optional = set(cls.__optional_keys__) | {k for k, t in hints.items() if get_origin(t) is NotRequired}
    required = tuple(k for k, t in hints.items() if k not in optional or get_origin(t) is Required)
    return (_TYPED, {k: _spec(t) for k, t in hints.items()}, required, int(config["extra"] == "allow"))


def _specs() -> dict[str, tuple]:
    out = {}
    for kind, model in MODELS.items():
        try:
            out[kind] = _typed_spec(model)
        except _NoSpec:
            pass  # pydantic checks this kind's every event
    return out


#: kind -> spec of every core kind the C check models (tests/web/test_event_check.py: all of them).
SPECS = _specs()
try:  # compiled at install when a C compiler was there (setup.py); RTXVIZ_NO_NATIVE=1 asks for pydantic only
    _compiled: Any = None if os.environ.get("RTXVIZ_NO_NATIVE") == "1" else importlib.import_module(
        "._eventcheck", __package__)
except ImportError:
    _compiled = None
_check: Any = None if _compiled is None else _compiled.check


def _scan_spec(spec: tuple) -> tuple:
    """A spec as the byte scan reads it: a typed dict's fields as (name as UTF-8 bytes, spec) pairs, its required
    fields as a bit mask of their positions (the scan finds a field by its bytes, without making a str).

    >>> _scan_spec((_TYPED, {"a": (_INT, None, None), "b": (_LIST, (_STR, -1), -1)}, ("b",), 0))
    (9, ((b'a', (2, None, None)), (b'b', (7, (1, -1), -1))), 2, False)
    """
    code = spec[0]
    if code == _TYPED:
        names = list(spec[1])
        if len(names) > 64:
            raise _NoSpec("more than 64 fields")
        fields = tuple((n.encode(), _scan_spec(spec[1][n])) for n in names)
        return (_TYPED, fields, sum(1 << names.index(r) for r in spec[2]), bool(spec[3]))
    if code == _LIST:
        return (_LIST, _scan_spec(spec[1]), spec[2])
    if code == _UNION:
        return (_UNION, tuple(_scan_spec(o) for o in spec[1]))
    return spec


def _scan_specs() -> dict[str, tuple]:
    out = {}
    for kind, spec in SPECS.items():
        try:
            out[kind] = _scan_spec(spec)
        except _NoSpec:
            pass  # the byte scan leaves this kind's every event to the decoding path
    return out


#: SPECS as the byte scan reads them (`_scan_spec`); a kind it cannot model is left out, as SPECS leaves kinds out.
SCAN_SPECS = _scan_specs()
_scan: Any = None if _compiled is None else _compiled.scan


def scan_lines(source: bytes | list[bytes], fields: dict[str, tuple[str, ...]], loads: Any, max_events: int = -1,
               max_line: int = -1) -> Any:
    """NDJSON lines read and checked straight from their bytes (the server's hot path, web/routers/ingest.py):
    ``(rows [(kind, step, text)], decoded [dict of the kind's `fields`, or None for a kind not in them])``, or
    None when some line is not confirmed (a fault, or what the compiled scan leaves to orjson and pydantic), or
    when the compiled module is not built. `source`: the lines, or a whole body (split on newlines, each line
    stripped as ``bytes.strip`` strips, empty lines skipped); then None too for a body of more than `max_events`
    lines or with a line longer than `max_line` bytes (-1: no bound).

    >>> import json
    >>> got = scan_lines([b'{"v":1,"kind":"step_end","t":1.0,"step":3}'], {"step_end": ("t",)}, json.loads)
    >>> got is None or got == ([("step_end", 3, '{"v":1,"kind":"step_end","t":1.0,"step":3}')], [{"t": 1.0}])
    True
    """
    if _scan is None:
        return None
    return _scan(source, SCAN_SPECS, fields, loads, max_events, max_line)


def seq_texts(rows: list, first: int) -> list[str] | None:
    """Each ``(kind, step, text)`` row's text with ``"seq":N`` put first, N from `first`, past-ASCII characters
    escaped (compiled; the store's `stored_texts`), or None when the compiled module is not built or a text does
    not start with ``{``.

    >>> got = seq_texts([("leaf", None, '{"kind":"leaf"}')], 7)
    >>> got is None or got == ['{"seq":7,"kind":"leaf"}']
    True
    """
    return None if _compiled is None else _compiled.seq_texts(rows, first)


def seq_pack(rows: list, first: int, run_id: str, packed_kinds: frozenset[str], pack_max: int,
             sep: str) -> tuple[list[str], list] | None:
    """`seq_texts`, and the SQLite store's row bindings over them (``store.sqlite.pack_rows``), in one compiled
    pass; None when the compiled module is not built or it does not take the batch (then the store's Python does).

    >>> got = seq_pack([("node", 1, '{"a":1}'), ("node", 1, '{"b":2}')], 7, "r", frozenset({"node"}), 64, "|")
    >>> got is None or got == (['{"seq":7,"a":1}', '{"seq":8,"b":2}'],
    ...                        ["r", 7, "node", 1, '{"seq":7,"a":1}|{"seq":8,"b":2}'])
    True
    """
    return None if _compiled is None else _compiled.seq_pack(rows, first, run_id, packed_kinds, pack_max, sep)


class EventError(ValueError):
    """An event that does not match the schema; the message says which event and what is wrong."""


def validate_event(obj: Any, index: int = 0) -> dict[str, Any]:
    """Check one decoded event against the schema; raise EventError naming what is wrong.

    >>> validate_event({"v": 1, "kind": "step_end", "t": 1.0, "step": 2})["kind"]
    'step_end'
    >>> validate_event({"v": 1, "kind": "dropped", "t": 1.0, "step": None, "total": -1, "new": 0})
    Traceback (most recent call last):
    ...
    rtxviz.schema.EventError: event 0 (kind 'dropped'): total: Input should be greater than or equal to 0, got -1
    >>> validate_event({"v": 1, "kind": "Bad Kind", "t": 1.0})
    Traceback (most recent call last):
    ...
    rtxviz.schema.EventError: event 0: kind 'Bad Kind' is not a known kind and does not match ...
    """
    if type(obj) is not dict:
        raise EventError(f"event {index}: expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("kind")
    adapter = _ADAPTERS.get(kind) if type(kind) is str else None  # a list or dict kind is not hashable
    if adapter is None:
        if not isinstance(kind, str) or not KIND_PATTERN.match(kind):
            raise EventError(
                f"event {index}: kind {kind!r} is not a known kind and does not match {KIND_PATTERN.pattern}"
            )
        if "seq" in obj:
            raise EventError(f"event {index}: 'seq' is assigned by the server; do not send it")
        adapter = _GENERIC
    try:
        return dict(adapter.validate_python(obj))
    except ValidationError as exc:
        raise EventError(f"event {index} (kind {kind!r}): {_describe(exc)}") from None


#: How many events `validate_batch` hands pydantic at once (fewer calls cost more; more keep more copies alive).
_CHUNK = 512


def validate_batch(objs: list[Any]) -> None:
    """Check decoded events; raise EventError naming the first bad event (its index in `objs`) and the fault.

    The compiled check confirms the events it can (copy-free); pydantic checks the others, core kinds together
    `_CHUNK` at a time (the server's hot path when the C module is not built).

    >>> validate_batch([{"v": 1, "kind": "step_end", "t": 1.0, "step": 0}, {"v": 1, "kind": "leaf", "t": 1.0}])
    Traceback (most recent call last):
    ...
    rtxviz.schema.EventError: event 1 (kind 'leaf'): step: Field required; id: Field required; ...
    """
    if _check is not None and type(objs) is list:
        unconfirmed = _check(objs, SPECS)
        if not unconfirmed:
            return
        # every other event matches its model, so the first fault among these is the batch's first
        _validate_with_pydantic([objs[i] for i in unconfirmed], unconfirmed)
    else:
        _validate_with_pydantic(objs, range(len(objs)))


def _validate_with_pydantic(objs: Sequence[Any], index: Sequence[int]) -> None:
    """`validate_batch` by pydantic alone: `objs[i]` is event `index[i]` of the batch (for the messages)."""
    core = CORE_KINDS
    known: list
    where: Sequence[int]
    if all(type(o) is dict and type(o.get("kind")) is str and o["kind"] in core for o in objs):
        known, where = list(objs), index  # the usual batch: only core kinds
    else:
        known, places = [], []
        for i, obj in enumerate(objs):
            if type(obj) is dict and type(obj.get("kind")) is str and obj["kind"] in core:
                known.append(obj)
                places.append(index[i])
            else:
                validate_event(obj, index[i])
        where = places
    # a chunk at a time: pydantic's validated copies (discarded) are freed after each chunk instead of all living
    # until the batch's end, where the collector's young collections scanned and promoted them (a 13,000-event
    # batch: ~260,000 containers)
    for start in range(0, len(known), _CHUNK):
        try:
            _BATCH.validate_python(known[start:start + _CHUNK])
        except ValidationError as exc:
            first = exc.errors()[0]["loc"][0]
            errors = [e for e in exc.errors() if e["loc"][0] == first]
            obj = known[start + int(first)]
            raise EventError(f"event {where[start + int(first)]} (kind {obj.get('kind')!r}): "
                             f"{_describe(errors, skip=2)}") from None


def _describe(exc: ValidationError | list, skip: int = 0) -> str:
    """pydantic's errors as one line: each field's path and message, and the value when it is a plain one (a
    negative count says which number it was; a missing field or a wrong object says nothing more)."""
    errors = exc.errors() if isinstance(exc, ValidationError) else exc
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err["loc"][skip:]) or "(event)"
        value = err.get("input")
        plain = type(value) in (int, float, str, bool) and "got " not in err["msg"]  # _exact_version says it
        got = f", got {value!r:.40}" if plain else ""
        parts.append(f"{loc}: {err['msg']}{got}")
    more = len(errors) - 5
    if more > 0:
        parts.append(f"... and {more} more error(s)")
    return "; ".join(parts)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of every strictly modelled kind (for docs and other-language clients)."""
    out = {kind: adapter.json_schema() for kind, adapter in _ADAPTERS.items()}
    out["*"] = _GENERIC.json_schema()
    return out
