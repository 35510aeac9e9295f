"""No import cycle: neither between sweepkit's subpackages (and top-level modules) nor between its modules.

Every ``import`` counts, those inside functions too (a lazy import hides a cycle from Python's loader, not from
a reader). ``from sweepkit.store import db`` is an import of the module ``sweepkit.store.db``;
``from sweepkit.store import Warehouse`` one of the package's ``__init__``. A package's ``__init__`` importing
its own modules is how a package exports its names; it is left out of the module graph so that a module
importing a name its own package's ``__init__`` re-exports is not reported as a circle through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sweepkit"


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path) -> set[str]:
    """The sweepkit modules ``name`` imports (absolute and relative imports, anywhere in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _unit(module: str) -> str:
    """The subpackage or top-level module a module belongs to: sweepkit.store.db -> store."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "sweepkit"


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_cycle_between_subpackages():
    units: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        if module == "sweepkit":
            continue                 # the package's __init__ re-exports names from below: not a layer
        units.setdefault(_unit(module), set()).update(_unit(t) for t in targets if _unit(t) not in
                                                      (_unit(module), "sweepkit"))
    assert _cycles(units) == [], "subpackages importing each other, directly or through others"


def test_no_cycle_between_modules():
    graph = {m: {t for t in targets if not (MODULES[t].name == "__init__.py" and m.startswith(t + "."))}
             for m, targets in GRAPH.items()}
    assert _cycles(graph) == [], "modules importing each other, directly or through others"


ENGINE = "sweepkit.serving.engine"


def test_the_engine_imports_no_driver_module():
    """The engine (what runs inside the compiled program) imports nothing of the serving driver above it."""
    upward = {m: sorted(t for t in targets if t.startswith("sweepkit.serving.") and not t.startswith(ENGINE))
              for m, targets in GRAPH.items() if m == ENGINE or m.startswith(ENGINE + ".")}
    assert not any(upward.values()), f"engine modules importing the serving driver: {upward}"


def test_the_driver_uses_the_engine_through_its_package_only():
    """Modules outside the engine import ``sweepkit.serving.engine``'s public names, never its modules."""
    inside = {m: sorted(t for t in targets if t.startswith(ENGINE + "."))
              for m, targets in GRAPH.items() if not (m == ENGINE or m.startswith(ENGINE + "."))}
    assert not any(inside.values()), f"modules reaching into the engine: { {m: t for m, t in inside.items() if t} }"
