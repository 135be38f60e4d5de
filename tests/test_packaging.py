"""The install step installs what the code and the tests import: every top-level module imported under
opsmith/ and tests/ is the standard library's, opsmith's own, or provided by a declared dependency (the
package's or its test extra's). A test importing a module nothing installs (Triton, once) fails here
instead of skipping on a fresh machine."""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[1]
# Imported only where present, by design: GPU-only tools, benchmarks' peers.
OPTIONAL = {"liger_kernel", "quack", "transformers", "matplotlib", "cupy", "numba"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _declared() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = meta["dependencies"] + meta["optional-dependencies"]["test"]
    return {re.split(r"[<>=;\[ ]", r, maxsplit=1)[0].strip().lower().replace("_", "-") for r in reqs}


def test_every_import_is_installed_by_a_declared_dependency():
    local = {p.stem for p in [*(ROOT / "tests").glob("*.py"), *(ROOT / "examples").rglob("*.py")]}
    local |= {"opsmith", "conftest", "examples", "benchmarks"}
    dists = packages_distributions()
    declared = _declared()
    missing = []
    for path in [*(ROOT / "opsmith").rglob("*.py"), *(ROOT / "tests").glob("*.py"), *(ROOT / "examples").rglob("*.py")]:
        for mod in _imports(path) - local - OPTIONAL - set(sys.stdlib_module_names):
            names = {d.lower().replace("_", "-") for d in dists.get(mod, [])}
            if mod == "cuda":  # a namespace: cuda.core, cuda.bindings and cuda.pathfinder are each declared
                continue
            if mod == "cutlass" and "nvidia-cutlass-dsl" in declared:  # on sys.path through the package's .pth
                continue
            if not names & declared and not any(n.startswith("nvidia-") for n in names & declared):
                missing.append(f"{path.relative_to(ROOT)} imports {mod} (from {sorted(names) or 'nothing installed'})")
    assert not missing, "\n".join(missing)


def test_the_library_package_holds_only_the_library():
    """The wheel ships ``opsmith/`` alone: nothing in it may import the examples, the benchmarks or the tests,
    which live at the repository root and are not installed."""
    outside = {"examples", "benchmarks", "tests", "conftest"}
    bad = [f"{p.relative_to(ROOT)} imports {sorted(_imports(p) & outside)}"
           for p in (ROOT / "opsmith").rglob("*.py") if _imports(p) & outside]  # fmt: skip
    assert not bad, "\n".join(bad)
