"""Every op declares everything about itself, and the registry, FORMAT.md and the reference files agree.

An op of rtxviz has a kind, a rule, a public function (`ops.implements`), and either a name in the reference
vocabulary with at least one PyTorch case in the shipped files, or examples for the per-op harness
(tests/engine/test_op_harness.py). FORMAT.md's tables list exactly the registry's reference names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import rtxviz  # noqa: F401 - registers the ops
from rtxviz.conformance import reference_path
from rtxviz.engine.graph import KINDS, OPS, Op
from rtxviz.engine.ops import REFERENCE, REFERENCE_OPS

#: The engine's own ops (a user may register ops of their own; they need not declare everything).
ENGINE_OPS = {name: op for name, op in OPS.items() if op.__module__.startswith("rtxviz.")}
SHIPPED = ["ops.json", "higher_order.json", "ops_v2.json"]
#: rtxviz's own additions to the vocabulary: their table and their PyTorch cases, beside the tests
EXTRA = Path(__file__).parent / "data"


def _format_names() -> set[str]:
    """The op names of every table in FORMAT.md and in the additions' README (the second column of rows whose
    first is a group)."""
    names: set[str] = set()
    lines = reference_path("FORMAT.md").read_text(encoding="utf-8").splitlines()
    lines += (EXTRA / "README.md").read_text(encoding="utf-8").splitlines()
    for line in lines:
        cells = [c.strip() for c in line.split("|")]
        if line.startswith("|") and len(cells) > 3 and cells[1] and not set(cells[1]) <= {"-", " "} \
                and cells[1] != "group":
            names.update(n for n in re.split(r"[,\s]+", cells[2]) if n)
    return names


def _shipped_ops() -> set[str]:
    used: set[str] = set()
    for path in [reference_path(name) for name in SHIPPED] + sorted(EXTRA.glob("*_reference.json")):
        if path.exists():
            for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
                used.update(step["op"] for step in case["program"])
    return used


@pytest.mark.parametrize("name", sorted(ENGINE_OPS))
def test_every_op_declares_kind_rule_function_and_cases(name: str) -> None:
    op = ENGINE_OPS[name]
    assert op.kind in KINDS, f"{name}: kind {op.kind!r} is not one of {sorted(KINDS)}"
    assert op.rule.strip(), f"{name}: no rule text"
    assert op.forward is not Op.forward and op.backward is not Op.backward, f"{name}: forward/backward missing"
    if op.kind != "gradient":  # gradient ops are called by other ops' rules, not by users
        assert op.function is not None, f"{name}: no public function declared with ops.implements"
    if op.reference is None:
        assert op.examples, f"{name}: outside the reference vocabulary, so it needs examples for the harness"
    else:
        assert REFERENCE_OPS.get(op.reference) is op, f"{name}: its reference name {op.reference!r} is not its"
        assert op.reference in _shipped_ops(), f"{name}: no case in {SHIPPED} or {EXTRA} uses {op.reference!r}"


def test_format_tables_and_registry_agree() -> None:
    documented, registered = _format_names(), set(REFERENCE)
    assert len(documented) > 50
    assert documented == registered, (f"in FORMAT.md, not registered: {sorted(documented - registered)}; "
                                      f"registered, not in FORMAT.md: {sorted(registered - documented)}")


def test_every_reference_name_has_a_case() -> None:
    assert set(REFERENCE) <= _shipped_ops(), f"no shipped case for {sorted(set(REFERENCE) - _shipped_ops())}"


def test_the_watchers_read_declarations_not_name_lists() -> None:
    """The facts once kept in name lists elsewhere (batched.py, events/hook.py) come from the ops now."""
    assert OPS["relu"].keeps_finite and OPS["reshape"].keeps_finite and not OPS["exp"].keeps_finite
    assert OPS["mul"].batched is not None and OPS["exp"].batched is not None and OPS["matmul"].batched is not None
    assert OPS["conv2d"].batched is None  # row by row: always right, only slower


def test_a_second_op_with_a_taken_name_is_refused() -> None:
    with pytest.raises(TypeError, match="declared twice"):
        type("Impostor", (Op,), {"name": "mul", "kind": "elementwise"})


def test_a_kind_that_does_not_exist_is_refused() -> None:
    with pytest.raises(TypeError, match="kind must be one of"):
        type("Odd", (Op,), {"name": "odd_kind_op", "kind": "fancy"})
