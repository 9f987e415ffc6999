"""The ``rtx-reference/1`` file format (rtxviz/reference/FORMAT.md): loading a file and checking that it follows
the format, with errors that name the file, the case and the problem."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

FORMAT = "rtx-reference/1"


class MalformedFileError(ValueError):
    """A reference file that does not follow the `rtx-reference/1` format; the message names file and problem."""


def reference_path(name: str) -> Path:
    """The path of a reference file shipped with rtxviz (``ops.json``, ``higher_order.json``)."""
    return Path(__file__).resolve().parents[1] / "reference" / name


def load_file(path: str | Path) -> dict:
    """Read and validate a reference file; raise MalformedFileError naming the file and the problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedFileError(f"{p}: cannot read the file ({exc.strerror or exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedFileError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    try:
        _validate_doc(doc)
    except MalformedFileError as exc:
        raise MalformedFileError(f"{p}: {exc}") from None
    return doc


def _bad(where: str, problem: str) -> MalformedFileError:
    return MalformedFileError(f"{where}: {problem}")


def _validate_tensor(t: Any, where: str, integer: bool = False) -> None:
    if not isinstance(t, dict) or "shape" not in t or "data" not in t:
        raise _bad(where, "a TENSOR must be an object with 'shape' and 'data'")
    shape, data = t["shape"], t["data"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise _bad(where, f"'shape' must be a list of non-negative integers, got {shape!r}")
    if not isinstance(data, list):
        raise _bad(where, f"'data' must be a flat list of numbers, got {type(data).__name__}")
    numel = math.prod(shape)
    if len(data) != numel:
        raise _bad(where, f"'data' has {len(data)} values but shape {shape} needs {numel}")
    for v in data:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _bad(where, f"'data' holds a non-number {v!r}")
        if integer and not isinstance(v, int) and not float(v).is_integer():
            raise _bad(where, f"an index tensor holds a non-integer {v!r}")


def _validate_doc(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise MalformedFileError(f"the top level must be a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise MalformedFileError(f"'format' must be {FORMAT!r}, got {doc.get('format')!r}")
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise MalformedFileError("'cases' must be a list")
    seen: set[str] = set()
    for i, case in enumerate(cases):
        _validate_case(case, i, seen)


def _validate_case(case: Any, i: int, seen: set[str]) -> None:
    if not isinstance(case, dict):
        raise MalformedFileError(f"case #{i} is not an object")
    name = case.get("name")
    if not isinstance(name, str) or not name:
        raise MalformedFileError(f"case #{i} has no 'name'")
    where = f"case {name!r}"
    if name in seen:
        raise _bad(where, "the name is used by an earlier case")
    seen.add(name)
    for key in ("inputs", "program", "output", "expect", "tol"):
        if key not in case:
            raise _bad(where, f"missing {key!r}")
    inputs, indices = case["inputs"], case.get("indices", {})
    if not isinstance(inputs, dict) or not isinstance(indices, dict):
        raise _bad(where, "'inputs' and 'indices' must be objects")
    for k, t in inputs.items():
        _validate_tensor(t, f"{where} inputs[{k!r}]")
    for k, t in indices.items():
        _validate_tensor(t, f"{where} indices[{k!r}]", integer=True)
    defined = set(inputs) | set(indices)
    if len(defined) != len(inputs) + len(indices):
        raise _bad(where, "a name is both an input and an index")
    program = case["program"]
    if not isinstance(program, list):
        raise _bad(where, "'program' must be a list of steps")
    for j, step in enumerate(program):
        sw = f"{where} program step {j}"
        if not isinstance(step, dict):
            raise _bad(sw, "a step must be an object")
        for key in ("out", "op", "args", "attrs"):
            if key not in step:
                raise _bad(sw, f"missing {key!r}")
        if not isinstance(step["out"], str) or not isinstance(step["op"], str):
            raise _bad(sw, "'out' and 'op' must be strings")
        if not isinstance(step["args"], list) or not isinstance(step["attrs"], dict):
            raise _bad(sw, "'args' must be a list and 'attrs' an object")
        for a in step["args"]:
            if a not in defined:
                raise _bad(sw, f"argument {a!r} is not an input, an index or an earlier step's output")
        defined.add(step["out"])
    if case["output"] not in defined:
        raise _bad(where, f"'output' {case['output']!r} is never defined")
    expect = case["expect"]
    if not isinstance(expect, dict):
        raise _bad(where, "'expect' must be an object")
    for key in ("value", "grad_output", "grads"):
        if key not in expect:
            raise _bad(where, f"'expect' is missing {key!r}")
    _validate_tensor(expect["value"], f"{where} expect.value")
    _validate_tensor(expect["grad_output"], f"{where} expect.grad_output")
    if expect["grad_output"]["shape"] != expect["value"]["shape"]:
        raise _bad(where, f"grad_output shape {expect['grad_output']['shape']} differs from the value's "
                          f"shape {expect['value']['shape']}")
    if not isinstance(expect["grads"], dict):
        raise _bad(where, "'expect.grads' must be an object")
    for k, t in expect["grads"].items():
        if k not in inputs:
            raise _bad(where, f"expect.grads names {k!r}, which is not a float input")
        _validate_tensor(t, f"{where} expect.grads[{k!r}]")
    for kind in ("hessian", "jacobian"):
        if kind in expect:
            entry = expect[kind]
            if not isinstance(entry, dict) or entry.get("wrt") not in inputs:
                raise _bad(where, f"expect.{kind} must name an input in 'wrt'")
            _validate_tensor(entry, f"{where} expect.{kind}")
            if len(entry["shape"]) != 2:
                raise _bad(where, f"expect.{kind} must be a matrix, got shape {entry['shape']}")
    tol = case["tol"]
    if not isinstance(tol, dict) or not all(isinstance(tol.get(k), int | float) and not isinstance(tol.get(k), bool)
                                            and tol[k] >= 0 for k in ("rtol", "atol")):
        raise _bad(where, "'tol' must hold non-negative numbers 'rtol' and 'atol'")
