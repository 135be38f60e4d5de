"""One op, one contract (issue 38, item 1): the bad-input matrix and the boundary table walked through every
path that can serve a call (the Python path, the served library before and after the switch, ``native.use``,
a built library loaded with ``native.load``, JAX at trace time, the CPU reference) must give the same outcome:
the same error class and text, or the same acceptance. A library loaded without opsmith gives torch's builtin
classes (docs/errors.md), a stable-ABI library RuntimeError, each with the same text.

The paths run in processes of their own (``contract_paths.py``), all at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath, seeded_cache

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import contract_paths as cp  # noqa: E402
import error_matrix as em  # noqa: E402
import error_matrix_shapes as shaped  # noqa: E402

# What each opsmith class arrives as from a library loaded without opsmith (docs/errors.md says the same).
BUILTIN = {"InputError": "ValueError", "DifferentiationError": "RuntimeError", "LaunchError": "RuntimeError"}


# The served path builds a dry-run library; the Python path's CPU kernel is its dry run, with no compiler to build
# a library with.
_MODE_ENV = {"served": {"OPSMITH_NATIVE": "dry-run"},
             "python": {"OPSMITH_NATIVE": "dry-run", "OPSMITH_CXX": "/nonexistent/c++"}}  # fmt: skip


class _Paths:
    """Each path's outcome per row, from ``contract_paths.py MODE`` run once per mode, in its own process, when a
    test first asks for it; a group of modes starts together (2 cores: the paths without a library take ~20 s,
    the five that build or load one ~150 s, so the fast tier runs only the first group)."""

    GROUPS = (("python", "fake", "reference"), ("served", "use", "load", "bare", "stable"), ("jax", "xla"))

    def __init__(self, cache: Path) -> None:
        self.env = dict(os.environ, PYTHONPATH=pythonpath(str(HERE.parent)),
                        OPSMITH_CACHE_DIR=str(cache))  # fmt: skip
        self.env.pop("OPSMITH_DISABLE_DISK_CACHE", None)
        self.out: dict[str, dict] = {}

    def __contains__(self, mode: str) -> bool:
        if mode in ("jax", "xla"):
            try:
                import jax  # noqa: F401
            except ImportError:
                return False
        return True

    def __getitem__(self, mode: str) -> dict:
        if mode not in self.out:
            (group,) = [g for g in self.GROUPS if mode in g]
            procs = {m: subprocess.Popen([sys.executable, str(HERE / "contract_paths.py"), m], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, cwd=str(HERE),
                                         env={**self.env, **_MODE_ENV.get(m, {})})
                     for m in group}  # fmt: skip
            for m, p in procs.items():
                stdout, stderr = p.communicate(timeout=1500)
                assert p.returncode == 0, f"{m}: {stderr[-4000:]}"
                self.out[m] = json.loads(stdout.strip().splitlines()[-1])
        return self.out[mode]


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> _Paths:
    return _Paths(seeded_cache(tmp_path_factory.mktemp("contract-cache")))


def test_the_python_path_refuses_each_matrix_row_with_its_documented_error(paths):
    doc = em.parse(em.DOC.read_text())
    py = paths["python"]
    for cid in em.CPU_ARGS:
        cls, text = doc[cid]
        assert py[cid] == f"{cls}: {text}", cid
    boundary = [py[cid] for cid in cp.ROWS if cid not in em.CPU_ARGS]
    assert boundary.count("ok") >= 15 and len(boundary) - boundary.count("ok") >= 15, boundary


def test_each_boundary_row_has_its_written_outcome(paths):
    """The boundary table's expected outcomes, accept or the refusal's class and text, on the Python path; every
    other path must equal it (below), so a bug in the plan all paths share fails here."""
    assert set(shaped.EXPECTED) == set(shaped.BOUNDARY)
    wrong = {cid: (want, paths["python"][cid]) for cid, want in shaped.EXPECTED.items() if paths["python"][cid] != want}
    assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.parametrize("path", ["served-before", "served-after", "use", "load"])
def test_every_opsmith_path_gives_the_python_paths_outcome_class_and_text(paths, path):
    got = paths["served"][path.split("-")[1]] if path.startswith("served") else paths[path]
    assert got, f"{path}: the switch came before the walk ended; nothing compared"
    assert set(got) == set(paths["python"])
    mismatched = {cid: (paths["python"][cid], got[cid]) for cid in got if got[cid] != paths["python"][cid]}
    assert not mismatched, mismatched


@pytest.mark.slow
def test_a_library_loaded_without_opsmith_raises_the_builtin_classes_with_the_same_text(paths):
    for cid, want in paths["python"].items():
        cls, _, text = want.partition(": ")
        expected = want if want == "ok" else f"{BUILTIN[cls]}: {text}"
        assert paths["bare"][cid] == expected, cid


@pytest.mark.slow
def test_a_stable_abi_library_raises_runtime_error_with_the_same_text(paths):
    for cid, got in paths["stable"].items():
        want = paths["python"][cid]
        assert got == (want if want == "ok" else f"RuntimeError: {want.partition(': ')[2]}"), cid


@pytest.mark.slow
def test_jax_refuses_at_trace_time_what_the_python_path_refuses(paths):
    if "jax" not in paths:
        pytest.skip("JAX not installed: pip install 'opsmith[jax]'")
    compared = {cid: v for cid, v in paths["jax"].items() if v != "not in JAX"}
    assert len(compared) >= 30, compared
    mismatched = {cid: (paths["python"][cid], v) for cid, v in compared.items() if v != paths["python"][cid]}
    assert not mismatched, mismatched


# Refusals the fake (Meta) implementation cannot make, so torch.compile's trace accepts and the eager kernel
# refuses at run time: a data pointer's alignment, the launch grid, and contiguous="require" (a compiled graph may
# give an intermediate another layout than the trace saw).
FAKE_BLIND = ("not-contiguous", "grid-", "align")


def test_the_fake_implementation_refuses_what_the_python_path_refuses(paths):
    for cid, got in paths["fake"].items():
        want = paths["python"][cid]
        if got != want:
            assert got == "ok" and cid.startswith(FAKE_BLIND), (cid, want, got)
    blind = [cid for cid in paths["fake"] if cid.startswith(FAKE_BLIND) and paths["python"][cid] != "ok"]
    assert len(blind) >= 8, blind


@pytest.mark.slow
def test_the_xla_handlers_own_checks_refuse_with_the_same_text(paths):
    if "xla" not in paths:
        pytest.skip("JAX not installed: pip install 'opsmith[jax]'")
    walked = {cid: v for cid, v in paths["xla"].items() if v not in ("not in JAX", "not reached")}
    assert len(walked) >= 12 and sum(v != "ok" for v in walked.values()) >= 2, walked
    for cid, got in walked.items():
        want = paths["python"][cid]
        assert got == want if want == "ok" else (got.startswith("JaxRuntimeError: INVALID_ARGUMENT: ")
                                                 and got.endswith(want.partition(": ")[2])), (cid, want, got)  # fmt: skip


def test_the_cpu_reference_refuses_what_the_kernel_refuses(paths):
    """Every matrix op registered with ``reference=`` runs on CPU tensors: each row the Python path refuses is
    refused there with the same class and text (the grid rows too, which the Meta kernel cannot see), and the
    rows it accepts run the reference."""
    assert paths["reference"] == paths["python"]


def test_differentiation_refusals_are_walked_too(paths):
    for cid in cp.GRAD_ROWS:
        assert paths["python"][cid].startswith("DifferentiationError: "), paths["python"][cid]
    assert torch.is_grad_enabled()
