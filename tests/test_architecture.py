"""The house rules of docs/architecture.md, checked on the source: which package may import which, the order
of the engine's own layers, and no import circle anywhere (imports inside functions count; imports under
``if TYPE_CHECKING:`` do not, since they never run)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rtxviz"

#: What each part of rtxviz may import of rtxviz (besides itself). The layers of docs/architecture.md, bottom up.
ALLOWED: dict[str, set[str]] = {
    "rtxviz._version": set(),
    "rtxviz.accel": set(),
    "rtxviz.files": set(),  # output files written whole (standard library only)
    "rtxviz.schema": set(),
    "rtxviz.summary": {"rtxviz.accel"},
    "rtxviz.engine": {"rtxviz.accel"},  # the optional compiled kernels (the LSTM layer's steps), which import nothing
    "rtxviz.nn": {"rtxviz.engine"},
    "rtxviz.optim": {"rtxviz.engine", "rtxviz.nn", "rtxviz.accel"},
    "rtxviz.data": {"rtxviz.engine"},
    # torch.utils' spellings (`rtxviz.utils.data`, `rtxviz.utils.checkpoint`): re-exports only
    "rtxviz.utils": {"rtxviz.data", "rtxviz.engine"},
    "rtxviz.conformance": {"rtxviz.engine"},
    "rtxviz.debug": {"rtxviz.engine", "rtxviz.summary"},
    "rtxviz.events": {"rtxviz.engine", "rtxviz.schema", "rtxviz.summary", "rtxviz._version", "rtxviz.accel"},
    "rtxviz.render": {"rtxviz.engine", "rtxviz.summary", "rtxviz.files"},
    "rtxviz.store": {"rtxviz.schema"},
    "rtxviz.export": {"rtxviz.engine", "rtxviz.schema", "rtxviz.summary", "rtxviz.store", "rtxviz.render"},
    # PyTorch models watched: the event stream's Run, the summaries, drawings and exports (never the engine's hook),
    # and the notebook's widget as a transport (watch(notebook=True))
    "rtxviz.torch": {"rtxviz.events", "rtxviz.schema", "rtxviz.summary", "rtxviz.render", "rtxviz.export",
                     "rtxviz.debug", "rtxviz._version", "rtxviz.notebook"},
    "rtxviz.web": {"rtxviz.schema", "rtxviz.store", "rtxviz.summary", "rtxviz._version"},
    # the live view in a notebook: the emitter with a comm transport, a Variable's graph model replayed as events
    "rtxviz.notebook": {"rtxviz.events", "rtxviz.render", "rtxviz.summary", "rtxviz.engine"},
    "rtxviz.lessons": {"rtxviz", "rtxviz.engine", "rtxviz.nn", "rtxviz.optim", "rtxviz.data", "rtxviz.events",
                       "rtxviz.export"},
    "rtxviz.cli": {"rtxviz", "rtxviz.engine", "rtxviz.nn", "rtxviz.optim", "rtxviz.data", "rtxviz.events",
                   "rtxviz.render", "rtxviz.store", "rtxviz.export", "rtxviz.web", "rtxviz.schema",
                   "rtxviz.summary", "rtxviz.conformance", "rtxviz._version", "rtxviz.lessons", "rtxviz.files"},
    # the package root re-exports the user-facing parts (the event stream lazily, on first use)
    "rtxviz": {"rtxviz.engine", "rtxviz.nn", "rtxviz.optim", "rtxviz.data", "rtxviz.debug", "rtxviz.render",
               "rtxviz.events", "rtxviz.notebook", "rtxviz._version"},
}

#: The engine's own floors, bottom up: a module may import its own floor or lower ones, never a higher one.
ENGINE_FLOORS: list[set[str]] = [
    {"errors", "dtypes", "allocator"},
    {"device", "random", "grad_mode", "hooks", "sites"},
    {"tensor"},
    {"memory"},
    {"versions"},
    {"backward"},
    {"variable"},
    {"graph", "creation"},
    {"ops"},
    {"batched", "functional", "gradcheck", "autograd"},
    {"checkpoint", "cache"},
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import that can run: module level and inside functions, not under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                todo.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            todo.append(child)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for imp in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(imp, ast.Import):
                targets = [a.name for a in imp.names]
            else:
                if imp.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (imp.level - 1)]
                    base_name = ".".join(base + ([imp.module] if imp.module else []))
                else:
                    base_name = imp.module or ""
                # `from pkg import sub` depends on the submodule; `from pkg import name` on the package
                targets = [f"{base_name}.{a.name}" if f"{base_name}.{a.name}" in mods else base_name
                           for a in imp.names]
            for t in targets:
                while t and t not in mods:  # `import rtxviz.engine.ops.unary as u` and the like
                    t = t.rpartition(".")[0]
                if t in mods and t != name and not name.startswith(t + "."):  # a package's own ancestors run first
                    edges[name].add(t)
    return edges


def _part(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def _engine_floor(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "engine":
        return None
    for i, floor in enumerate(ENGINE_FLOORS):
        if parts[2] in floor:
            return i
    return None


EDGES = _graph()


def test_every_part_of_the_package_has_a_place_in_the_layers() -> None:
    parts = {_part(m) for m in _modules()} - {"rtxviz._native", "rtxviz._eventcheck"}
    assert parts <= set(ALLOWED), f"parts with no place in ALLOWED (and docs/architecture.md): {parts - set(ALLOWED)}"
    engine = {m.split(".")[2] for m in _modules() if m.startswith("rtxviz.engine.")}
    placed = set().union(*ENGINE_FLOORS)
    assert engine <= placed, f"engine modules with no floor: {engine - placed}"


@pytest.mark.parametrize("module", sorted(EDGES))
def test_imports_go_down_the_layers(module: str) -> None:
    src = _part(module)
    for target in sorted(EDGES[module]):
        dst = _part(target)
        if dst != src:
            assert dst in ALLOWED[src], f"{module} imports {target}: {src} may import only {sorted(ALLOWED[src])}"
        lo, hi = _engine_floor(module), _engine_floor(target)
        if lo is not None and hi is not None:
            assert hi <= lo, (f"{module} (engine floor {lo}) imports {target} (floor {hi}): the engine's floors "
                              "go one way (ENGINE_FLOORS)")


def test_no_import_circle() -> None:
    """Tarjan's strongly connected components over every runtime import: each must be a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    nodes = set(EDGES) | {t for ts in EDGES.values() for t in ts}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(EDGES.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(EDGES.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        circles.append(sorted(comp))
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)
