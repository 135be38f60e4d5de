"""Walks docs/errors.md, the table of every mistake opsmith detects: each row's error is raised with exactly
the documented first line, and every case has its row (the table is generated from tests/error_matrix.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import error_matrix as em

CASES = {c[0]: c for c in em.cases()}
DOC = em.parse(em.DOC.read_text())


def test_the_table_lists_every_case_once_in_order():
    assert list(DOC) == list(CASES)
    rows = [line for line in em.DOC.read_text().splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    assert len(rows) == len(CASES)


@pytest.mark.parametrize("cid", [c for c, case in CASES.items() if case[5] == "any"])
def test_row(cid):
    if cid.startswith("cute-"):  # CI installs it (the test extra); a GPU image may lack it
        pytest.importorskip("cutlass", reason="CuTe DSL not installed: pip install 'opsmith[cute]'")
    _, _, _, thunk, cls, _ = CASES[cid]
    assert DOC[cid] == (cls.__name__, em.run(thunk, cls))


@pytest.mark.parametrize("cid", sorted(em.CPU_ARGS))
def test_row_through_the_python_dry_run_on_cpu_tensors(cid):
    """The eager code's own guards (not the fake's) on CPU tensors: everything but the launch runs."""
    from opsmith.torchlib.eager import make_dry_run

    kind, args = em.CPU_ARGS[cid]
    fn, _ = make_dry_run(em.op(kind))
    with pytest.raises(Exception) as e:
        fn(*args("cpu"))
    assert DOC[cid][1] == str(e.value).splitlines()[0] and isinstance(e.value, ValueError), cid


@pytest.mark.parametrize("cid", [c for c, case in CASES.items() if case[5] == "nodriver"])
def test_row_without_a_driver(cid):
    if em.has_driver():
        pytest.skip("needs a machine without a CUDA driver (CI's): here the driver makes the call succeed")
    _, _, _, thunk, cls, _ = CASES[cid]
    assert DOC[cid] == (cls.__name__, em.run(thunk, cls))


@pytest.mark.gpu
@pytest.mark.parametrize("cid", [c for c, case in CASES.items() if case[5] == "gpu"])
def test_gpu_row(cid):
    if not em.runs_here(cid):
        pytest.skip("needs two GPUs")
    _, _, _, thunk, cls, _ = CASES[cid]
    assert DOC[cid] == (cls.__name__, em.run(thunk, cls))
