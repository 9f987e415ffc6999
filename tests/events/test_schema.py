"""The schema accepts what it documents and says precisely what is wrong otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from rtxviz.schema import CORE_KINDS, EventError, json_schema, validate_batch, validate_event


def node(**over):
    ev = {"v": 1, "kind": "node", "t": 1.5, "step": 0, "id": 3, "op": "mul", "inputs": [{"node": 1}, {"leaf": 2}],
          "shape": [2, 3], "dtype": "float32", "device": "cpu"}
    ev.update(over)
    return ev


def test_valid_node_and_generic_kinds():
    assert validate_event(node())["id"] == 3
    recompute = {"v": 1, "kind": "checkpoint_recompute", "t": 0.0, "step": None, "segment": 1}
    assert validate_event(recompute)["segment"] == 1
    validate_batch([node(), {"v": 1, "kind": "cache_miss", "t": 0.0, "step": 0}])


@pytest.mark.parametrize("bad, words", [
    (node(id="three"), ["event 0", "id"]),
    (node(extra_field=1), ["extra_field"]),
    (node(v=2), ["v"]),
    (node(shape=[-1]), ["shape"]),
    (node(inputs=[{"tensor": 1}]), ["inputs"]),
    ({"v": 1, "kind": "Not A Kind", "t": 0}, ["kind"]),
    ({"v": 1, "kind": "cache_hit", "t": 0, "step": 0, "seq": 4}, ["seq"]),
    ([1, 2], ["JSON object"]),
])
def test_invalid_events_name_the_problem(bad, words):
    with pytest.raises(EventError) as err:
        validate_event(bad)
    for w in words:
        assert w in str(err.value)


def test_batch_error_points_at_the_right_event():
    with pytest.raises(EventError, match=r"event 2 \(kind 'node'\): id"):
        validate_batch([node(), {"v": 1, "kind": "x.y", "t": 0, "step": 0}, node(id=None)])


def test_json_schema_covers_every_core_kind():
    schema = json_schema()
    assert CORE_KINDS <= set(schema) and schema["node"]["additionalProperties"] is False


def test_stats_mean_is_optional():
    # large tensors' summaries carry no mean (the emitter leaves it out); older runs with it stay valid
    stats = {"shape": [784, 512], "norm": 3.5, "min": -0.1, "max": 0.2, "nan": 0, "inf": 0}
    grad = {"v": 1, "kind": "grad", "t": 1.0, "step": 0, "node": 7, "output": stats, "inputs": [None]}
    validate_event(grad)
    validate_event({**grad, "output": {**stats, "mean": 0.01}})
    with pytest.raises(EventError, match="mean"):
        validate_event({**grad, "output": {**stats, "mean": "x"}})
    assert "mean" not in json_schema()["grad"]["$defs"]["Stats"]["required"]


def test_a_bad_event_in_a_later_chunk_of_a_big_batch_is_named_by_its_own_index():
    # validate_batch hands pydantic a chunk at a time; the index it names is the event's place in the whole
    # batch (generic kinds in between shift the core events' places too), and only the first fault is named
    batch = [node(id=i) if i % 7 else {"v": 1, "kind": "my.tick", "t": 0.0, "step": None} for i in range(3000)]
    batch[2345] = node(id="x")
    batch[2900] = node(shape=[-1])
    with pytest.raises(EventError, match=r"^event 2345 \(kind 'node'\): id"):
        validate_batch(batch)
    validate_batch(batch[:2345] + batch[2346:2900])


# -- user review: the envelope's `step` is required; counters are never negative ---------------------------------
def minimal_event(kind: str) -> dict:
    """A valid event of each core kind, with its envelope (`step` included) and only its required fields."""
    stats = {"shape": [2], "norm": 1.0, "min": 0.0, "max": 1.0}
    body = {
        "run_start": {"name": "r"}, "run_end": {}, "step_begin": {}, "step_end": {}, "dropped": {"total": 1, "new": 1},
        "leaf": {"id": 1, "shape": [2], "dtype": "float32", "device": "cpu", "requires_grad": True},
        "node": {"id": 3, "op": "mul", "inputs": [], "shape": [2], "dtype": "float32", "device": "cpu"},
        "grad_mode": {"enabled": False, "scope": "no_grad", "phase": "enter"}, "detach": {},
        "backward_begin": {}, "backward_end": {}, "grad": {"node": 3, "output": stats, "inputs": [None]},
        "leaf_grad": {"leaf": 1, "stats": stats}, "anomaly": {"phase": "forward", "op": "log"},
        "optimizer_step": {"params": []}, "gradcheck": {"name": "mul", "passed": True},
        "engine_event": {"name": "node"},
    }[kind]
    return {"v": 1, "kind": kind, "t": 1.0, "step": None, **body}


@pytest.mark.parametrize("kind", sorted(CORE_KINDS) + ["my_tool.tick"])
def test_an_event_without_step_is_refused_naming_the_event_and_the_field(kind):
    # docs/events.md: every event carries the envelope v, kind, t and step (an integer or null); one without the
    # `step` key was accepted
    ev = minimal_event(kind) if kind in CORE_KINDS else {"v": 1, "kind": kind, "t": 1.0, "step": None, "n": 4}
    validate_event(ev)
    validate_batch([ev])
    del ev["step"]
    with pytest.raises(EventError, match=rf"^event 0 \(kind '{kind}'\): step: Field required"):
        validate_event(ev)
    with pytest.raises(EventError, match=rf"^event 1 \(kind '{kind}'\): step: Field required"):
        validate_batch([minimal_event("step_end"), ev])
    validate_event({**ev, "step": 5})


#: (kind, where the count sits as a path of keys and indices, the count's field name in the message)
COUNTS = [
    ("run_start", ("sample_every",), "sample_every"),
    ("run_end", ("dropped",), "dropped"),
    ("run_end", ("sent",), "sent"),
    ("dropped", ("total",), "total"),
    ("dropped", ("new",), "new"),
    ("node", ("saved_bytes",), "saved_bytes"),
    ("node", ("saved", 0, "bytes"), "saved.0.bytes"),
    ("grad", ("output", "nan"), "output.nan"),
    ("grad", ("output", "inf"), "output.inf"),
    ("grad", ("inputs", 0, "nan"), "inputs.0.nan"),
    ("leaf_grad", ("stats", "nan"), "stats.nan"),
    ("leaf_grad", ("stats", "inf"), "stats.inf"),
    ("anomaly", ("nan",), "anomaly.nan"),
    ("anomaly", ("inf",), "anomaly.inf"),
]


def with_count(kind: str, where: tuple, value: int) -> dict:
    """`minimal_event(kind)` (with the containers `where` needs) holding `value` at `where`."""
    ev = minimal_event(kind)
    if kind == "node":
        ev["saved"] = [{"role": "output", "bytes": 8, "shape": [2], "dtype": "float32"}]
    if kind == "grad":
        ev["inputs"] = [{"shape": [2], "norm": 1.0, "min": 0.0, "max": 1.0}]
    place: Any = ev
    for key in where[:-1]:
        place = place[key]
    place[where[-1]] = value
    return ev


@pytest.mark.parametrize("kind, where, field", COUNTS)
def test_a_negative_count_is_refused_naming_the_field_and_the_value(kind, where, field):
    validate_batch([with_count(kind, where, 0 if field != "sample_every" else 1)])
    bad = with_count(kind, where, -3)
    name = field.removeprefix("anomaly.")
    for check in (lambda: validate_event(bad), lambda: validate_batch([bad])):
        with pytest.raises(EventError) as err:
            check()
        assert f"event 0 (kind '{kind}'): {name}: Input should be greater than or equal to" in str(err.value)
        assert "got -3" in str(err.value)


def test_sample_every_is_at_least_one():
    # the emitter refuses sample_every < 1 (record every k-th step: k = 0 means nothing)
    with pytest.raises(EventError, match=r"sample_every: Input should be greater than or equal to 1, got 0"):
        validate_event(with_count("run_start", ("sample_every",), 0))
