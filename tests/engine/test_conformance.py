"""Every reference case (numbers computed by PyTorch, stored in rtxviz/reference/) passes in float64 and
float32; the conformance runner's CLI, exit codes and its handling of malformed and wrong files."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rtxviz.conformance import MalformedFileError, main, reference_path, run_case, run_file
from rtxviz.engine.ops import REFERENCE

REPO = Path(__file__).resolve().parents[2]
OPS_DOC = json.loads(reference_path("ops.json").read_text())
HIGHER_DOC = json.loads(reference_path("higher_order.json").read_text())
V2_DOC = json.loads(reference_path("ops_v2.json").read_text())
#: Every reference file shipped with the package (vocabulary v1 and v2): all run, in float64 and float32.
SHIPPED = sorted(reference_path("ops.json").parent.glob("*.json"))
#: PyTorch's cases of ops rtxviz adds to the vocabulary (floor_divide, remainder, fmod), in the same format, kept
#: beside the tests so the shipped files stay the shared ones (written by tests/engine/make_rounding_reference.py)
EXTRA = sorted((Path(__file__).parent / "data").glob("*_reference.json"))


def _all_cases() -> list:
    return [pytest.param(c, id=f"{path.stem}:{c['name']}") for path in SHIPPED + EXTRA
            for c in json.loads(path.read_text())["cases"]]


def _assert_passes(case: dict, dtype: str) -> None:
    result = run_case(case, dtype)
    assert result.passed, f"{case['name']} ({dtype}): {result.message}"


@pytest.mark.parametrize("case", _all_cases())
def test_every_shipped_case_float64(case: dict) -> None:
    _assert_passes(case, "float64")


@pytest.mark.parametrize("case", _all_cases())
def test_every_shipped_case_float32(case: dict) -> None:
    _assert_passes(case, "float32")


def test_reference_files_are_the_shared_ones() -> None:
    assert len(OPS_DOC["cases"]) == 187 and len(HIGHER_DOC["cases"]) == 13 and len(V2_DOC["cases"]) == 230
    assert [p.name for p in SHIPPED] == ["higher_order.json", "ops.json", "ops_v2.json"]
    assert {"hessian", "jacobian"} <= {k for c in HIGHER_DOC["cases"] for k in c["expect"]}
    assert {"hessian", "jacobian"} <= {k for c in V2_DOC["cases"] for k in c["expect"]}


# -- hand-made files for the runner itself ---------------------------------------------------------------------
def _tensor(shape: list[int], data: list[float]) -> dict:
    return {"shape": shape, "data": data}


def _cube_case() -> dict:
    """sum(x^3): value, gradient 3x², Hessian diag(6x), all by hand."""
    x = [1.0, -2.0, 0.5]
    return {
        "name": "hand/sum_cube",
        "inputs": {"x": _tensor([3], x)},
        "program": [{"out": "c", "op": "pow_scalar", "args": ["x"], "attrs": {"exponent": 3.0}},
                    {"out": "s", "op": "sum", "args": ["c"], "attrs": {"dims": None, "keepdim": False}}],
        "output": "s",
        "expect": {
            "value": _tensor([], [sum(v**3 for v in x)]),
            "grad_output": _tensor([], [1.0]),
            "grads": {"x": _tensor([3], [3 * v * v for v in x])},
            "hessian": {"wrt": "x", "shape": [3, 3],
                        "data": [6 * x[i] if i == j else 0.0 for i in range(3) for j in range(3)]},
        },
        "tol": {"rtol": 1e-7, "atol": 1e-9},
    }


def _mul_case() -> dict:
    """a * b with broadcasting, by hand: grads are g·b and sum over rows of g·a."""
    return {
        "name": "hand/mul_broadcast",
        "inputs": {"a": _tensor([2, 2], [1.0, 2.0, 3.0, 4.0]), "b": _tensor([2], [10.0, -1.0])},
        "program": [{"out": "y", "op": "mul", "args": ["a", "b"], "attrs": {}}],
        "output": "y",
        "expect": {
            "value": _tensor([2, 2], [10.0, -2.0, 30.0, -4.0]),
            "grad_output": _tensor([2, 2], [1.0, 1.0, 1.0, 2.0]),
            "grads": {"a": _tensor([2, 2], [10.0, -1.0, 10.0, -2.0]), "b": _tensor([2], [4.0, 10.0])},
        },
        "tol": {"rtol": 1e-7, "atol": 1e-9},
    }


def _write(tmp_path: Path, cases: list[dict], name: str = "cases.json", **top: object) -> Path:
    doc = {"format": "rtx-reference/1", "generator": "by hand", "cases": cases, **top}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out.strip().splitlines(), out.err


def test_hand_cases_pass(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, [_cube_case(), _mul_case()])
    code, lines, _ = _run_cli(capsys, str(path))
    assert lines == ["2 passed, 0 failed"]
    assert code == 0
    code, lines, _ = _run_cli(capsys, str(path), "--dtype", "float32", "--verbose", "--device", "cpu")
    assert code == 0 and lines[-1] == "2 passed, 0 failed"
    assert any(line.startswith("ok   hand/sum_cube") for line in lines)


def test_run_file_api(tmp_path: Path) -> None:
    results = run_file(_write(tmp_path, [_cube_case(), _mul_case()]), dtype="float32")
    assert [r.name for r in results] == ["hand/sum_cube", "hand/mul_broadcast"]
    assert all(r.passed for r in results)
    quantities = {m.quantity for m in results[0].checks}
    assert quantities == {"value", "grads[x]", "hessian[x]"}


def test_wrong_value_fails_and_names_the_worst_element(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = _mul_case()
    bad["name"] = "hand/wrong_value"
    bad["expect"]["value"]["data"][2] = 31.0  # the true value is 30
    path = _write(tmp_path, [_mul_case(), bad])
    code, lines, _ = _run_cli(capsys, str(path))
    assert code == 1
    assert lines[-1] == "1 passed, 1 failed"
    (fail,) = [ln for ln in lines if "hand/wrong_value" in ln]
    assert "value" in fail and "(1, 0)" in fail and "30" in fail and "31" in fail


def test_wrong_gradient_and_hessian_fail(tmp_path: Path) -> None:
    bad_grad = _mul_case()
    bad_grad["expect"]["grads"]["b"]["data"] = [4.0, 11.0]
    bad_hess = _cube_case()
    bad_hess["expect"]["hessian"]["data"][4] = 0.0  # d²/dx1² is 6·(-2) = -12
    r_grad, r_hess = run_file(_write(tmp_path, [bad_grad, bad_hess]))
    assert not r_grad.passed and "grads[b]" in r_grad.message and "(1,)" in r_grad.message
    assert not r_hess.passed and "hessian[x]" in r_hess.message and "(1, 1)" in r_hess.message


def test_float32_uses_a_looser_tolerance(tmp_path: Path) -> None:
    case = _mul_case()
    case["expect"]["value"]["data"][0] = 10.0 + 2e-5  # a float32-sized error: 2e-6 relative
    path = _write(tmp_path, [case])
    assert not run_file(path, dtype="float64")[0].passed
    assert run_file(path, dtype="float32")[0].passed


def test_unknown_op_fails_the_case_without_crashing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    case = _mul_case()
    case["name"] = "hand/unknown"
    case["program"][0]["op"] = "frobnicate"
    code, lines, _ = _run_cli(capsys, str(_write(tmp_path, [case, _cube_case()])))
    assert code == 1
    assert lines == ["FAIL hand/unknown: unsupported op frobnicate", "1 passed, 1 failed"]


def test_engine_error_is_a_failing_case_with_its_text(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    case = _mul_case()
    case["name"] = "hand/shape_error"
    case["inputs"]["b"] = _tensor([3], [1.0, 2.0, 3.0])
    case["expect"]["grads"]["b"] = _tensor([3], [0.0, 0.0, 0.0])
    code, lines, _ = _run_cli(capsys, str(_write(tmp_path, [case])))
    assert code == 1 and lines[-1] == "0 passed, 1 failed"
    assert lines[0].startswith("FAIL hand/shape_error:")
    assert "ShapeError" in lines[0] and "mul" in lines[0] and "(2, 2)" in lines[0] and "(3,)" in lines[0]


def test_missing_hessian_support_is_reported_never_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rtxviz.conformance.runner as conf

    def unsupported(kind, f, x):
        raise NotImplementedError("no HessianComputer")

    monkeypatch.setattr(conf, "_higher_order", unsupported)
    (result,) = run_file(_write(tmp_path, [_cube_case()]))
    assert not result.passed and result.message.startswith("unsupported: hessian")


def test_several_files_sum_up(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = _mul_case()
    bad["expect"]["value"]["data"][0] = 0.0
    one = _write(tmp_path, [_cube_case()], "one.json")
    two = _write(tmp_path, [bad], "two.json")
    code, lines, _ = _run_cli(capsys, str(one), str(two))
    assert code == 1 and lines[-1] == "1 passed, 1 failed"
    assert lines[0].startswith("FAIL two.json:hand/mul_broadcast:")


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda doc: doc.update(format="rtx-reference/2"), "format"),
        (lambda doc: doc.pop("cases"), "cases"),
        (lambda doc: doc["cases"][0]["inputs"]["a"]["data"].pop(), "shape [2, 2] needs 4"),
        (lambda doc: doc["cases"][0]["program"][0].update(args=["a", "nope"]), "'nope'"),
        (lambda doc: doc["cases"][0]["expect"].pop("grads"), "grads"),
        (lambda doc: doc["cases"][0].update(output="zz"), "'zz'"),
        (lambda doc: doc["cases"][0]["tol"].pop("atol"), "tol"),
        (lambda doc: doc["cases"].append(copy.deepcopy(doc["cases"][0])), "earlier case"),
        (lambda doc: doc["cases"][0]["expect"]["grad_output"].update(shape=[4], data=[1.0] * 4), "grad_output"),
    ],
    ids=["format", "no_cases", "data_length", "undefined_arg", "no_grads", "undefined_output", "tol",
         "duplicate_name", "grad_output_shape"],
)
def test_malformed_file_exits_2_naming_file_and_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture, mutate, problem: str
) -> None:
    doc = {"format": "rtx-reference/1", "cases": [_mul_case()]}
    mutate(doc)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    code, lines, err = _run_cli(capsys, str(path))
    assert code == 2
    assert str(path) in err and problem in err
    assert lines == []  # nothing ran
    with pytest.raises(MalformedFileError, match=re.escape(problem)):
        run_file(path)


def test_not_json_and_missing_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "garbage.json"
    path.write_text("{ not json")
    code, _, err = _run_cli(capsys, str(path))
    assert code == 2 and "garbage.json" in err and "JSON" in err
    code, _, err = _run_cli(capsys, str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json" in err


def test_module_entry_point_exit_codes(tmp_path: Path) -> None:
    """`python -m rtxviz.conformance` itself: last line and exit status, for a passing and a failing file."""
    good = _write(tmp_path, [_mul_case()], "good.json")
    bad_case = _mul_case()
    bad_case["expect"]["grads"]["a"]["data"][0] = 99.0
    bad = _write(tmp_path, [bad_case], "bad.json")
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "rtxviz.conformance"]
    ok = subprocess.run([*cmd, str(good)], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"
    fail = subprocess.run([*cmd, str(bad), "--dtype", "float32"], capture_output=True, text=True, env=env, timeout=60)
    assert fail.returncode == 1
    out = fail.stdout.strip().splitlines()
    assert out[-1] == "0 passed, 1 failed" and "grads[a]" in out[0] and "99" in out[0]


def test_table_op_missing_from_engine_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(REFERENCE, "logsumexp")
    case = next(c for c in OPS_DOC["cases"] if c["program"][0]["op"] == "logsumexp")
    result = run_case(case)
    assert not result.passed and result.message == "unsupported op logsumexp"


def test_op_outside_the_registry_fails_its_case_only(tmp_path: Path) -> None:
    """An op name nobody registered fails its own case as unsupported; the other cases of the file still run."""
    case = {
        "name": "hand/no_such_op",
        "inputs": {"x": _tensor([2], [0.5, -1.25])},
        "program": [{"out": "y", "op": "no_such_op", "args": ["x"], "attrs": {}}],
        "output": "y",
        "expect": {"value": _tensor([2], [0.0, 0.0]), "grad_output": _tensor([2], [1.0, 1.0]),
                   "grads": {"x": _tensor([2], [0.0, 0.0])}},
        "tol": {"rtol": 1e-7, "atol": 1e-9},
    }
    bad, good = run_file(_write(tmp_path, [case, _mul_case()]))
    assert not bad.passed and bad.message == "unsupported op no_such_op"
    assert good.passed, good.message
