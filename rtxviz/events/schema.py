"""The event schema (version 1), shared by the emitter and the server. `docs/events.md` documents it.

An event is one JSON object. Every event carries the envelope ``v`` (schema version), ``kind``, ``t`` (unix time
at emission, seconds) and ``step`` (the training step it belongs to, or null); the server adds ``seq`` (its
position in the run, from 1). The rest depends on the kind. Kinds listed in `MODELS` are validated strictly
(unknown fields are errors); any other kind that matches `KIND_PATTERN` is accepted as a `GenericEvent` with free
JSON fields, so new engine happenings (checkpoint segments, graph-cache hits) flow without a schema change.

>>> ev = validate_event({"v": 1, "kind": "backward_end", "t": 0.0, "step": 3})
>>> type(ev).__name__
'BackwardEndEvent'
>>> validate_event({"v": 1, "kind": "my_tool.tick", "t": 0.0, "n": 4}).model_extra
{'n': 4}
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

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
Number = float | int | None  # None stands for NaN/Inf in value lists (JSON has no NaN)
Values = Annotated[list[Number], Field(max_length=MAX_VALUES)]
RunId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class _Event(BaseModel):
    """The envelope every event has."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1]
    kind: str
    t: float
    step: int | None = None


class Ref(BaseModel):
    """A reference to a graph value: a recorded node (``{"node": 12}``) or a leaf (``{"leaf": 3}``)."""

    model_config = ConfigDict(extra="forbid")

    node: int | None = None
    leaf: int | None = None


class Stats(BaseModel):
    """Summary of one tensor (a gradient, usually). NaN/Inf never appear in the numbers: see the counts."""

    model_config = ConfigDict(extra="forbid")

    shape: Shape
    norm: float | None
    min: float | None
    max: float | None
    mean: float | None
    nan: int = 0
    inf: int = 0
    values: Values | None = None


# -- run and step --------------------------------------------------------------------------------------------
class RunStartEvent(_Event):
    kind: Literal["run_start"]
    name: Name
    meta: dict[str, Any] = {}
    sample_every: int = 1
    version: Annotated[str, Field(max_length=64)] = ""


class RunEndEvent(_Event):
    kind: Literal["run_end"]
    status: Literal["ok", "error"] = "ok"
    error: Text | None = None
    dropped: int = 0
    sent: int = 0


class StepBeginEvent(_Event):
    kind: Literal["step_begin"]
    sampled: bool = True


class StepEndEvent(_Event):
    kind: Literal["step_end"]


class DroppedEvent(_Event):
    """The emitter's drop counter: `total` events lost so far in this run, `new` since the last report."""

    kind: Literal["dropped"]
    total: int
    new: int
    reason: Annotated[str, Field(max_length=64)] = "queue_full"


# -- the graph -----------------------------------------------------------------------------------------------
class LeafEvent(_Event):
    """A value that enters the graph from outside: a parameter, a data input or a constant."""

    kind: Literal["leaf"]
    id: int
    name: Name | None = None
    shape: Shape
    dtype: Name
    device: Name
    requires_grad: bool
    param: bool = False
    values: Values | None = None


class NodeEvent(_Event):
    """One recorded op. `id` is the engine's TapeNode.id; `inputs` holds one Ref per op input, in order."""

    kind: Literal["node"]
    id: int
    op: Name
    inputs: Annotated[list[Ref], Field(max_length=MAX_INPUTS)]
    shape: Shape
    dtype: Name
    device: Name
    module: Name | None = None
    rule: Text = ""
    attrs: dict[str, Any] = {}
    saved_bytes: int = 0
    values: Values | None = None


class GradModeEvent(_Event):
    kind: Literal["grad_mode"]
    enabled: bool
    scope: Name
    phase: Literal["enter", "exit"]


class DetachEvent(_Event):
    kind: Literal["detach"]
    source: Ref | None = None
    result: Ref | None = None


# -- backward ------------------------------------------------------------------------------------------------
class BackwardBeginEvent(_Event):
    kind: Literal["backward_begin"]
    roots: Annotated[list[Ref], Field(max_length=MAX_INPUTS)] = []
    create_graph: bool = False


class BackwardEndEvent(_Event):
    kind: Literal["backward_end"]


class GradEvent(_Event):
    """Gradients at one node's backward: `output` is dL/d(node's output); `inputs[i]` what flowed to input i."""

    kind: Literal["grad"]
    node: int
    output: Stats
    inputs: Annotated[list[Stats | None], Field(max_length=MAX_INPUTS)]


class LeafGradEvent(_Event):
    """A leaf's `.grad` after accumulation (`stats` describes the accumulated value)."""

    kind: Literal["leaf_grad"]
    leaf: int
    stats: Stats


class AnomalyEvent(_Event):
    """NaN/Inf produced. `origin` is true when the inputs were all finite (this op made the first bad value)."""

    kind: Literal["anomaly"]
    phase: Literal["forward", "backward"]
    op: Name
    node: int | None = None
    nan: int = 0
    inf: int = 0
    origin: bool = True
    bad_inputs: Annotated[list[int], Field(max_length=MAX_INPUTS)] = []
    message: Text = ""


# -- training and checks -------------------------------------------------------------------------------------
class ParamUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    leaf: int
    name: Name | None = None
    grad_norm: float | None
    param_norm: float | None
    update_norm: float | None
    update_ratio: float | None


class OptimizerStepEvent(_Event):
    kind: Literal["optimizer_step"]
    optimizer: Name = ""
    params: Annotated[list[ParamUpdate], Field(max_length=MAX_PARAMS)]


class GradcheckEvent(_Event):
    """The result of a gradient check; extra fields (tolerances, per-input errors) are allowed."""

    model_config = ConfigDict(extra="allow")
    kind: Literal["gradcheck"]
    name: Name
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None


class EngineEvent(_Event):
    """An engine happening whose name collides with a core kind: wrapped rather than lost."""

    kind: Literal["engine_event"]
    name: Name
    fields: dict[str, Any] = {}


class GenericEvent(_Event):
    """Any other kind (checkpoint_begin/_end/_recompute, cache_hit/_miss/_evict, user tools): free fields."""

    model_config = ConfigDict(extra="allow")


MODELS: dict[str, type[_Event]] = {
    m.model_fields["kind"].annotation.__args__[0]: m  # type: ignore[union-attr]
    for m in (
        RunStartEvent, RunEndEvent, StepBeginEvent, StepEndEvent, DroppedEvent, LeafEvent, NodeEvent,
        GradModeEvent, DetachEvent, BackwardBeginEvent, BackwardEndEvent, GradEvent, LeafGradEvent,
        AnomalyEvent, OptimizerStepEvent, GradcheckEvent, EngineEvent,
    )
}
#: Kinds with a strict model; an engine `event(kind)` with one of these names is wrapped in `engine_event`.
CORE_KINDS = frozenset(MODELS)

_ADAPTERS = {kind: TypeAdapter(model) for kind, model in MODELS.items()}
_GENERIC = TypeAdapter(GenericEvent)


class EventError(ValueError):
    """An event that does not match the schema; the message says which event and what is wrong."""


def validate_event(obj: Any, index: int = 0) -> _Event:
    """Check one decoded event against the schema; raise EventError naming what is wrong.

    >>> validate_event({"v": 1, "kind": "step_end", "t": 1.0}).kind
    'step_end'
    >>> validate_event({"v": 1, "kind": "Bad Kind", "t": 1.0})
    Traceback (most recent call last):
    ...
    rtxviz.events.schema.EventError: event 0: kind 'Bad Kind' is not a known kind and does not match ...
    """
    if type(obj) is not dict:
        raise EventError(f"event {index}: expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("kind")
    adapter = _ADAPTERS.get(kind)  # type: ignore[arg-type]
    if adapter is None:
        if not isinstance(kind, str) or not KIND_PATTERN.match(kind):
            raise EventError(
                f"event {index}: kind {kind!r} is not a known kind and does not match {KIND_PATTERN.pattern}"
            )
        adapter = _GENERIC
    try:
        return adapter.validate_python(obj)
    except ValidationError as exc:
        raise EventError(f"event {index} (kind {kind!r}): {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(event)"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - 5
    if more > 0:
        parts.append(f"... and {more} more error(s)")
    return "; ".join(parts)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of every strictly modelled kind (for docs and other-language clients)."""
    return {kind: model.model_json_schema() for kind, model in MODELS.items()}
