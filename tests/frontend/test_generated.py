"""The frontend's generated TypeScript (scripts/gen_frontend.py): engine-free, faithful to its sources, and a schema
change that the page does not follow fails the type check."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtxviz.schema import MODELS, json_schema
from rtxviz.summary import CLASSES, EXPLODING, RAMP, VANISHING

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "scripts" / "gen_frontend.py"
FRONTEND = ROOT / "frontend"
TSC = FRONTEND / "node_modules" / ".bin" / "tsc"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_frontend", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generator_imports_only_schema_and_summary(tmp_path):
    code = (f"import json, runpy, sys; runpy.run_path({str(GEN)!r})['main'](['--out', sys.argv[1]]); "
            "print(json.dumps(sorted(m for m in sys.modules if m == 'rtxviz' or m.startswith('rtxviz.'))))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True,
                         cwd=tmp_path)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    allowed = {"rtxviz", "rtxviz.schema", "rtxviz.summary", "rtxviz.summary.classes", "rtxviz.summary.stats",
               "rtxviz.accel", "rtxviz._native", "rtxviz._eventcheck"}  # _eventcheck: the schema's compiled check
    assert loaded - allowed == set()
    assert {p.name for p in tmp_path.iterdir()} == {"events.ts", "summary.ts"}


def test_events_ts_has_one_type_per_kind_and_the_union():
    text = _gen().events_ts(json_schema(), 1)
    for kind, model in MODELS.items():
        assert f"export interface {model.__name__} {{" in text
        assert f'  kind: "{kind}";' in text
        assert re.search(rf"^  \| {model.__name__}[;\n]", text, re.M)
    for shared in ("Stats", "Ref", "ParamUpdate", "GenericEvent"):
        assert f"export interface {shared} {{" in text
    assert "  inputs: (Stats | null)[];" in text and "  mean?: number | null;" in text


def test_summary_ts_carries_the_python_table():
    text = _gen().summary_ts(__import__("rtxviz.summary", fromlist=["as_json"]).as_json())
    assert f"export const VANISHING = {json.dumps(VANISHING)};" in text
    assert f"export const EXPLODING = {json.dumps(EXPLODING)};" in text
    for stop in RAMP:
        assert f"  [{', '.join(map(str, stop))}]," in text
    for c in CLASSES.values():
        assert f'  "{c.name}": {{ colour: "{c.colour}", fill: {json.dumps(c.fill)}, ' in text


def _rename(schemas: dict, kind: str, old: str, new: str) -> dict:
    """A copy of `json_schema()` with one field of `kind` (or of a shared $defs type, kind "$defs/Name") renamed."""
    out = json.loads(json.dumps(schemas))
    targets = [s["$defs"][kind[6:]] for s in out.values() if kind[6:] in s.get("$defs", {})] \
        if kind.startswith("$defs/") else [out[kind]]
    for t in targets:
        t["properties"][new] = t["properties"].pop(old)
        t["required"] = [new if r == old else r for r in t.get("required", [])]
    return out


@pytest.mark.skipif(not TSC.exists(), reason="frontend/node_modules is not installed (cd frontend && npm ci)")
def test_a_renamed_schema_field_fails_the_type_check(tmp_path):
    """The page in a scratch copy, its types generated from a schema with one field renamed: tsc must fail, naming
    the field (and pass on the unchanged schema, so the failure is the rename's)."""
    work = tmp_path / "frontend"
    work.mkdir()
    for name in ("src", "test"):
        shutil.copytree(FRONTEND / name, work / name, ignore=shutil.ignore_patterns("generated"))
    shutil.copy(FRONTEND / "tsconfig.json", work)
    os.symlink(FRONTEND / "node_modules", work / "node_modules")
    gen = _gen()
    schemas = json_schema()

    def check(s: dict) -> subprocess.CompletedProcess:
        (tmp_path / "schema.json").write_text(json.dumps(s))
        gen.main(["--schema", str(tmp_path / "schema.json"), "--out", str(work / "src" / "generated")])
        return subprocess.run([str(TSC), "--noEmit", "-p", str(work)], capture_output=True, text=True, timeout=120)

    ok = check(schemas)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for kind, old, new in (("node", "op", "op_name"), ("$defs/Stats", "norm", "l2")):
        bad = check(_rename(schemas, kind, old, new))
        assert bad.returncode != 0, f"tsc passed with {kind}.{old} renamed to {new}"
        assert f"Property '{old}' does not exist" in bad.stdout, bad.stdout


def test_no_gradient_class_colour_or_threshold_restated_in_the_page():
    """The page's gradient colours and thresholds come from src/generated/summary.ts only."""
    colours = {c.colour.lower() for c in CLASSES.values()}
    threshold = re.compile(r"(?<![\w.])(1e-0?7|1e\+?0?3)(?![\w.])", re.I)
    found = []
    for path in sorted((FRONTEND / "src").glob("*.ts")) + [FRONTEND / "style.css"]:
        text = path.read_text(encoding="utf-8").lower()
        found += [f"{path.name}: {c}" for c in colours if c in text and path.suffix == ".ts"]
        found += [f"{path.name}: {m.group(0)}" for m in threshold.finditer(text)]
    assert found == []
