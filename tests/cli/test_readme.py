"""What the README tells a newcomer to type works as written (issue 17, points 11, 12, 14, 15): the commands it
names exist, the files it points at are in the repository (no ``shared/...`` a clone lacks), the venv's console
script is where it says, and `make demo PORT=N` passes the port on.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtxviz.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_rtxviz_command_the_readme_names_exists():
    named = set(re.findall(r"\brtxviz (--?[a-z-]+|[a-z]+)\b", README))
    assert {"serve", "render", "import", "export"} <= named
    for name in named - {"--version"}:
        assert name in COMMANDS or name in ("viewer",), f"README names `rtxviz {name}`, which is not a command"


@pytest.mark.parametrize("doc", ["README.md", "docs/engine.md", "docs/server.md", "benchmarks/README.md"])
def test_the_docs_point_at_files_a_clone_has(doc):
    text = (ROOT / doc).read_text()
    assert "shared/" not in text, f"{doc} points at shared/..., which a clone does not have"
    for path in re.findall(r"`((?:docs|examples|benchmarks|rtxviz|frontend|scripts)/[\w./-]+\.(?:md|py|c))`", text):
        assert (ROOT / path).exists() or (ROOT / Path(doc).parent / path).exists(), f"{doc}: {path} is missing"


def test_the_readme_says_how_to_reach_the_venvs_commands():
    assert "source .venv/bin/activate" in README and ".venv/bin/rtxviz" in README
    if sys.prefix != sys.base_prefix:  # run from a venv (make test): the console script is where README says
        assert (Path(sys.executable).parent / "rtxviz").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_takes_a_port():
    out = subprocess.run(["make", "-n", "-W", "setup", "demo", "PORT=8123"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert "examples/live_demo.py --serve --port 8123" in out.stdout, out.stdout + out.stderr


def test_the_demo_records_where_render_reads():
    # issue 17.12: the demo wrote ~/.rtxviz/demo.db while render/export read ~/.rtxviz/runs.db
    demo = (ROOT / "examples" / "live_demo.py").read_text()
    assert "demo.db" not in demo and "default=default_db_path()" in demo
