"""rtxviz/store stands below the server and the exports: it imports the standard library and rtxviz.schema only
(and postgres.py its driver, psycopg)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import rtxviz.store

STORE = Path(rtxviz.store.__file__).resolve().parent


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a module of the store package."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((node.lineno, node.module or ""))
            else:  # inside rtxviz/store: level 1 is the store itself, level 2 the rtxviz package
                base = ["rtxviz", "store"][:3 - node.level]
                out.append((node.lineno, ".".join([*base, node.module] if node.module else base)))
    return out


def test_the_store_imports_only_the_standard_library_and_the_schema() -> None:
    bad = []
    for path in sorted(STORE.glob("*.py")):
        for line, module in _imports(path):
            top = module.split(".")[0]
            driver = path.name == "postgres.py" and top in ("psycopg", "psycopg_pool")
            allowed = (driver or top in sys.stdlib_module_names or module == "__future__" or module == "rtxviz.schema"
                       or module == "rtxviz.store" or module.startswith("rtxviz.store."))
            if not allowed:
                bad.append(f"{path.name}:{line}: {module}")
    assert bad == [], f"rtxviz/store may import the standard library and rtxviz.schema only: {bad}"
