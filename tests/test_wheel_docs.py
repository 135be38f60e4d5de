"""Docs that run from the wheel (issue 38, item 7): the README's and every page's python blocks run with only the
built wheel installed, in a fresh virtual environment outside the clone, so an example that imports
``examples.*`` or reads a file of the repository fails here. The venv gets the wheel (``--no-deps``) and this
environment's other packages by link (torch, Triton, CuTe DSL, JAX: installing them again would take minutes);
nothing of the clone is on its path. The ``gpu`` blocks run where there is a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
import torch
from doc_blocks import PAGES, script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh venv outside the clone with the wheel built from it and this environment's dependencies."""
    base = tmp_path_factory.mktemp("wheel-docs")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(base / "dist"), str(ROOT)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (base / "dist").glob("opsmith-*.whl")
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in here.iterdir():  # every installed package but opsmith itself (an editable link to the clone)
        if entry.name.lower().startswith(("opsmith", "__editable__")) or entry.name == "__pycache__":
            continue
        (site / entry.name).symlink_to(entry)
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                                "--no-index", "--force-reinstall", str(wheel)], capture_output=True, text=True,
                               env=_env(), timeout=600)  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert (site / "opsmith" / "__init__.py").is_file(), installed.stdout[-2000:]
    return python


def test_the_wheel_holds_the_library_and_nothing_of_the_clone(wheel_venv, tmp_path):
    # (A bare "examples" may be some installed package's namespace directory: the clone's own modules are what
    # must be absent.)
    r = subprocess.run([str(wheel_venv), "-c", "import opsmith, importlib\nprint(opsmith.__file__)\n"
                        "for m in ('examples.catalog', 'examples.demo', 'benchmarks.bench_core', 'error_matrix'):\n"
                        "    try:\n        importlib.import_module(m); print('found', m)\n"
                        "    except ImportError:\n        pass\n"],
                       capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    where, *found = r.stdout.strip().splitlines()
    assert str(wheel_venv.parent.parent) in where and str(ROOT) not in where, where
    assert found == [], found


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=pytest.mark.slow) if p.endswith("native.md") else p for p in PAGES]
)
def test_the_pages_blocks_run_from_the_wheel(wheel_venv, tmp_path, page):
    gpu = torch.cuda.is_available()
    if page == "docs/jax.md" and not gpu:
        pytest.skip("docs/jax.md's one block runs JAX on a GPU")
    pytest.importorskip("triton", reason="the docs' Triton examples need Triton, which installs on Linux x86-64")
    if page in ("README.md", "docs/flavors.md"):
        pytest.importorskip("cutlass", reason="the CuTe DSL example needs nvidia-cutlass-dsl (the test extra)")
    code = script(page, gpu)
    path = tmp_path / (Path(page).stem + "_from_wheel.py")
    path.write_text(code + "\nimport opsmith\nprint('ran from', opsmith.__file__)\n")
    r = subprocess.run([str(wheel_venv), str(path)], capture_output=True, text=True, cwd=tmp_path, env=_env(),
                       timeout=900)  # fmt: skip
    assert r.returncode == 0, f"{page}:\n{r.stderr[-4000:]}"
    assert str(ROOT) not in r.stdout.strip().splitlines()[-1]


def _env() -> dict:
    """This process's environment without the clone on any path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OPSMITH_NATIVE"] = "off" if not torch.cuda.is_available() else env.get("OPSMITH_NATIVE", "auto")
    return env
