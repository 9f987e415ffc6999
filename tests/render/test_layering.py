"""rtxviz/render draws only: it reads no store, export, server or command line (the render command is in rtxviz/cli)."""

from __future__ import annotations

import ast
from pathlib import Path

import rtxviz.render

RENDER = Path(rtxviz.render.__file__).resolve().parent
ABOVE = ("rtxviz.cli", "rtxviz.export", "rtxviz.store", "rtxviz.web")


def _modules(path: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = ["rtxviz", *path.relative_to(RENDER.parent).parent.parts]
            base = parts[:len(parts) - node.level + 1] if node.level else []
            out.append((node.lineno, ".".join([*base, node.module] if node.module else base)))
    return out


def test_render_imports_nothing_above_it() -> None:
    bad = [f"{p.relative_to(RENDER.parent)}:{line}: {m}" for p in sorted(RENDER.rglob("*.py"))
           for line, m in _modules(p) if any(m == a or m.startswith(a + ".") for a in ABOVE)]
    assert bad == [], f"rtxviz/render may not import the CLI, export, store or web: {bad}"
