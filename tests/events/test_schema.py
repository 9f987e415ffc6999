"""The schema accepts what it documents and says precisely what is wrong otherwise."""

from __future__ import annotations

import pytest

from rtxviz.schema import CORE_KINDS, EventError, json_schema, validate_batch, validate_event


def node(**over):
    ev = {"v": 1, "kind": "node", "t": 1.5, "step": 0, "id": 3, "op": "mul", "inputs": [{"node": 1}, {"leaf": 2}],
          "shape": [2, 3], "dtype": "float32", "device": "cpu"}
    ev.update(over)
    return ev


def test_valid_node_and_generic_kinds():
    assert validate_event(node())["id"] == 3
    assert validate_event({"v": 1, "kind": "checkpoint_recompute", "t": 0.0, "segment": 1})["segment"] == 1
    validate_batch([node(), {"v": 1, "kind": "cache_miss", "t": 0.0}])


@pytest.mark.parametrize("bad, words", [
    (node(id="three"), ["event 0", "id"]),
    (node(extra_field=1), ["extra_field"]),
    (node(v=2), ["v"]),
    (node(shape=[-1]), ["shape"]),
    (node(inputs=[{"tensor": 1}]), ["inputs"]),
    ({"v": 1, "kind": "Not A Kind", "t": 0}, ["kind"]),
    ({"v": 1, "kind": "cache_hit", "t": 0, "seq": 4}, ["seq"]),
    ([1, 2], ["JSON object"]),
])
def test_invalid_events_name_the_problem(bad, words):
    with pytest.raises(EventError) as err:
        validate_event(bad)
    for w in words:
        assert w in str(err.value)


def test_batch_error_points_at_the_right_event():
    with pytest.raises(EventError, match=r"event 2 \(kind 'node'\): id"):
        validate_batch([node(), {"v": 1, "kind": "x.y", "t": 0}, node(id=None)])


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
    batch = [node(id=i) if i % 7 else {"v": 1, "kind": "my.tick", "t": 0.0} for i in range(3000)]
    batch[2345] = node(id="x")
    batch[2900] = node(shape=[-1])
    with pytest.raises(EventError, match=r"^event 2345 \(kind 'node'\): id"):
        validate_batch(batch)
    validate_batch(batch[:2345] + batch[2346:2900])
