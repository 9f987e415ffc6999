"""The version is written once, in rtxviz/_version.py: the installed metadata and every user read it from there."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import rtxviz
from rtxviz._version import __version__

PACKAGE = Path(rtxviz.__file__).resolve().parent


def _absolute(module: str | None, level: int, path: Path) -> str:
    """The absolute module name of a `from ... import` in the file at `path`."""
    if level == 0:
        return module or ""
    parts = ["rtxviz", *path.relative_to(PACKAGE).parent.parts]
    base = parts[:len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def test_metadata_and_package_agree() -> None:
    assert rtxviz.__version__ == __version__
    assert importlib.metadata.version("rtxviz") == __version__


def test_nothing_imports_the_version_from_the_package_root() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and any(a.name == "__version__" for a in node.names):
                if _absolute(node.module, node.level, path) != "rtxviz._version":
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == [], f"import __version__ from rtxviz._version, not the package root: {offenders}"
