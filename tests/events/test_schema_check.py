"""The compiled check of events (rtxviz/_eventcheck.c, driven by `schema.SPECS`) against pydantic, the authority.

The C check may leave an event unconfirmed that pydantic accepts (pydantic then decides), never the reverse: an
event it confirms must be valid. And it must confirm the events the engine really sends, or the server's hot path
would quietly be pydantic's again.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtxviz import Tensor, Variable, no_grad, schema
from rtxviz.events import EventHook
from rtxviz.schema import CORE_KINDS, SPECS, EventError, validate_batch, validate_event
from tests.browser.graphs import gpt_graph

from .test_schema import COUNTS, minimal_event, node, with_count

pytestmark = pytest.mark.skipif(schema._check is None, reason="rtxviz._eventcheck not built (no C compiler)")


def pydantic_accepts(ev: Any) -> bool:
    try:
        schema._validate_with_pydantic([ev], [0])
    except EventError:
        return False
    return True


def confirmed(ev: Any) -> bool:
    return schema._check([ev], SPECS) == []


def engine_events() -> list[dict]:
    """A real run's events: forward, backward, no_grad, detach and a NaN anomaly."""
    events: list[dict] = []
    rng = np.random.default_rng(0)

    def var(shape, name=None):
        return Variable.from_tensor(Tensor(rng.standard_normal(shape)), requires_grad=True, name=name)

    with EventHook(events.append):
        w, b = var((3, 4), "w"), var((4,), "b")
        x = Variable.from_tensor(Tensor(rng.standard_normal((2, 3))))
        loss = ((x @ w + b).tanh() ** 2).sum()
        loss.backward()
        with no_grad():
            (w * 2).sum()
        w.detach()
        (var((2,)) * 0.0).log().sum().backward()  # log(0): -inf, an anomaly
    return [json.loads(json.dumps(e, allow_nan=False)) for e in events]


CORPUS = engine_events() + gpt_graph(n_blocks=1, ops_per_block=30) + [
    node(), node(module=None, rule="dA = dC", attrs={"k": [1, {"a": None}]}, saved_bytes=8, values=[1.0, None, 2],
                 recomputed=True, segment=None,
                 saved=[{"role": "input", "index": 0, "bytes": 8, "shape": [2], "dtype": "float32",
                         "alias": {"node": 1, "role": "output"}}]),
    {"v": 1, "kind": "optimizer_step", "t": 1.0, "step": 2, "optimizer": "SGD",
     "params": [{"leaf": 1, "name": "w", "grad_norm": 0.5, "param_norm": 2, "update_norm": None, "update_ratio": 0.1}]},
    {"v": 1, "kind": "run_end", "t": 1.0, "step": None, "status": "error", "error": "boom", "dropped": 0, "sent": 4},
    {"v": 1, "kind": "gradcheck", "t": 1.0, "step": 3, "name": "mul", "passed": True, "tolerance": 1e-6},
    {"v": 1, "kind": "dropped", "t": 1.0, "step": None, "total": 3, "new": 1, "reason": "queue full"},
]


def test_every_core_kind_has_a_spec() -> None:
    assert set(SPECS) == CORE_KINDS


def test_the_events_the_engine_sends_are_confirmed() -> None:
    core = [e for e in CORPUS if e["kind"] in CORE_KINDS]
    assert {e["kind"] for e in core} >= {"node", "grad", "leaf", "leaf_grad", "anomaly", "grad_mode", "detach",
                                         "backward_begin", "optimizer_step", "gradcheck", "dropped"}
    for ev in core:
        assert pydantic_accepts(ev), ev
        assert confirmed(ev), ev


@pytest.mark.parametrize("bad", [
    node(id=True), node(id=1.0), node(v=True), node(v=1.0), node(v=2), node(t="1.5"), node(t=True),
    node(step=-1), node(step=2**63), node(step="3"), node(op="x" * 257), node(shape=[-1]), node(shape=[1] * 33),
    node(inputs=[{"tensor": 1}]), node(inputs=[{"node": True}]), node(inputs=[[1]]), node(extra=1),
    node(attrs=[1]), node(values=[True]), node(values=["1"]), node(module=3), node(recomputed=1),
    {k: v for k, v in node().items() if k != "dtype"}, {**node(), "kind": "leaf"},
    {"v": 1, "kind": "step_begin", "t": 0, "step": 0, "sampled": 1},
    {"v": 1, "kind": "run_end", "t": 0, "step": None, "status": "maybe"},
    {"v": 1, "kind": "grad", "t": 0, "step": 0, "node": 1, "output": {"shape": [], "norm": 1, "min": None},
     "inputs": []},
])
def test_invalid_events_are_never_confirmed(bad: dict) -> None:
    assert not pydantic_accepts(bad)
    assert not confirmed(bad)


def test_what_it_does_not_model_is_left_to_pydantic() -> None:
    big = node(id=2**64)  # pydantic takes any int; the C check only 64-bit ones
    assert pydantic_accepts(big) and not confirmed(big)
    generic = {"v": 1, "kind": "cache_hit", "t": 0.0, "step": 0, "n": 3}
    assert schema._check([node(), generic, node()], SPECS) == [1]
    validate_batch([node(), generic, node()])


# -- generated: mutations of real events anywhere in their nesting ----------------------------------------------
odd = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                st.sampled_from([0, 1, -1, 1.0, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, "", "x" * 300, "ok",
                                 "error", "input", "node", "float32"]),
                st.text(max_size=5), st.lists(st.integers(-2, 3), max_size=3), st.just({}),
                st.just({"node": 1}), st.just([{"leaf": 2}]))


def _containers(obj: Any, out: list) -> list:
    """Every dict and list inside `obj`, `obj` first."""
    out.append(obj)
    for v in obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ():
        if isinstance(v, dict | list):
            _containers(v, out)
    return out


@st.composite
def mutated(draw: st.DrawFn) -> dict:
    ev = copy.deepcopy(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 3))):
        place = draw(st.sampled_from(_containers(ev, [])))
        how = draw(st.integers(0, 2))
        if isinstance(place, dict):
            if how == 0 and place:
                del place[draw(st.sampled_from(sorted(place)))]
            elif how == 1 and place:
                place[draw(st.sampled_from(sorted(place)))] = copy.deepcopy(draw(odd))
            else:
                key = draw(st.sampled_from(["extra", "name", "index", "mean", "alias", "seq", "values"]))
                place[key] = copy.deepcopy(draw(odd))
        elif place:
            place[draw(st.integers(0, len(place) - 1))] = copy.deepcopy(draw(odd))
        else:
            place.append(copy.deepcopy(draw(odd)))
    return ev


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(ev=mutated())
def test_what_the_check_confirms_pydantic_accepts(ev: dict) -> None:
    if confirmed(ev):
        assert pydantic_accepts(ev), ev


@settings(max_examples=60, deadline=None, derandomize=True)
@given(evs=st.lists(st.one_of(mutated(), st.sampled_from(CORPUS)), min_size=1, max_size=8))
def test_a_batch_fails_with_pydantic_s_message_for_its_first_bad_event(evs: list) -> None:
    def outcome() -> str:
        try:
            validate_batch(evs)
        except EventError as exc:
            return str(exc)
        return "ok"

    with_c = outcome()
    saved, schema._check = schema._check, None
    try:
        without = outcome()
    finally:
        schema._check = saved
    assert with_c == without
    if with_c == "ok":
        for ev in evs:
            validate_event(ev)


# -- user review: a missing `step` and negative counters, refused by the C check as by pydantic ------------------
@pytest.mark.parametrize("kind", sorted(CORE_KINDS))
def test_an_event_without_step_is_never_confirmed(kind: str) -> None:
    ev = minimal_event(kind)
    assert confirmed(ev) and pydantic_accepts(ev)
    del ev["step"]
    assert not confirmed(ev) and not pydantic_accepts(ev)


@pytest.mark.parametrize("kind, where, field", COUNTS)
def test_a_negative_count_is_never_confirmed(kind: str, where: tuple, field: str) -> None:
    low = 1 if field == "sample_every" else 0
    assert confirmed(with_count(kind, where, low)) and pydantic_accepts(with_count(kind, where, low))
    for value in (low - 1, -1, -(2**63)):
        bad = with_count(kind, where, value)
        assert not confirmed(bad) and not pydantic_accepts(bad), bad
