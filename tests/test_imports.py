"""The package's import graph (issue 50, item 1): the imports a module makes when it is imported (its top-level
statements) form no circle, so any module imports alone, in any order. Imports inside functions (lazy, for
optional flavors and to keep ``import opsmith`` light) are not counted yet: the restructure into subpackages
whose arrows run down is the rest of that item."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "opsmith"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _top_level_imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found |= {t for t in [target, *(f"{target}.{a.name}" for a in node.names)] if t in mods}
    return found - {name}


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph``, as the modules along it, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return [*path[path.index(w) :], w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        path.pop()
        return None

    return next((c for v in sorted(graph) if v not in state and (c := visit(v))), None)


def test_no_module_imports_itself_through_others_when_imported():
    mods = _modules()
    graph = {name: _top_level_imports(name, path, mods) for name, path in mods.items()}
    assert len(graph) > 80 and graph["opsmith.registration"], "the import reader found no imports"
    assert _circle(graph) is None, " -> ".join(_circle(graph) or [])


def test_the_reader_finds_a_circle():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set()}) is None
