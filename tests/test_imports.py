"""The package's import graph (issue 50, item 1).

- The imports a module makes when it is imported (its top-level statements) form no circle, so any module
  imports alone, in any order.
- Between the package's parts (its subpackages, and each module of the top level) every import counts, those
  inside functions too (lazy, for optional flavors and to keep ``import opsmith`` light): they form no circle,
  so the arrows run one way, from the public face down to the declaration language.
- The top level keeps the public face and the few modules every part reads.
"""

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


def _top_level_imports(name: str, path: Path, mods: dict[str, Path], every: bool = False) -> set[str]:
    """The package's modules ``name`` imports when imported (``every``: anywhere in it, functions included)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if every else tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            # ``from .. import env`` imports the module opsmith.env; ``from .spec import Dim`` the module opsmith.declare.spec
            found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names} & set(mods)
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
    assert len(graph) > 80 and graph["opsmith.torchlib.registration"], "the import reader found no imports"
    assert _circle(graph) is None, " -> ".join(_circle(graph) or [])


def test_the_reader_finds_a_circle():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set()}) is None


#: The top level: the public face (``api``, ``errors``, ``cli``, ``env``), the package's own files, and what every
#: part reads (the on-disk cache, progress logging, the registry of ops).
TOP_LEVEL = {"opsmith", "opsmith.__main__", "opsmith._version", "opsmith.api", "opsmith.cli", "opsmith.env",
             "opsmith.errors", "opsmith.cache", "opsmith.progress", "opsmith.registry"}  # fmt: skip


def _part(module: str) -> str:
    """The part a module belongs to: its subpackage (``opsmith.declare``), or itself at the top level."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PKG / parts[-1]).is_dir() else module


def _parts_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        edges = graph.setdefault(_part(name), set())
        edges |= {_part(t) for t in _top_level_imports(name, path, mods, every=True)} - {_part(name)}
    return graph


def test_the_parts_of_the_package_import_each_other_one_way():
    graph = _parts_graph()
    assert {"opsmith.declare", "opsmith.plan", "opsmith.torchlib", "opsmith.checking", "opsmith.native"} <= set(graph)
    assert "opsmith.declare" in graph["opsmith.plan"], "the import reader found no imports between parts"
    assert _circle(graph) is None, " -> ".join(_circle(graph) or [])


def test_the_kernel_analysis_imports_one_way_lazy_imports_included():
    """Issue 61, item 6: ``analysis/reads.py`` (the data) imported its readers lazily and they imported it back;
    the readers now live in ``readers.py``, above the data and the body readers."""
    mods = {n: p for n, p in _modules().items() if n.startswith("opsmith.analysis")}
    graph = {name: _top_level_imports(name, path, mods, every=True) for name, path in mods.items()}
    assert graph["opsmith.analysis.readers"] >= {"opsmith.analysis.reads", "opsmith.analysis.python_body"}
    assert _circle(graph) is None, " -> ".join(_circle(graph) or [])


def test_the_declaration_language_imports_nothing_above_it():
    """The language a user writes is the bottom layer: only the top level's shared modules beneath it."""
    assert _parts_graph()["opsmith.declare"] <= TOP_LEVEL


def test_the_top_level_keeps_the_public_face():
    top = {n for n in _modules() if _part(n) == n and n.count(".") <= 1 and not (PKG / n.split(".")[-1]).is_dir()}
    assert top == TOP_LEVEL, (
        f"new top-level modules {sorted(top - TOP_LEVEL)}: give each a subpackage named for its concept"
    )
