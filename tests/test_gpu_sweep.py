"""Issue 60's sweep on the device: the seventeen published kernels it was filed from (``sweep_ops.SWEEP``; Liger's from
its package, the others ours in their packages' style), each registered unchanged, run against its PyTorch
reference on every check shape, then every row of ``opsmith check``. A FAIL or ERROR row must be listed in
``sweep_check.EXPLAINED`` with its reason (none is). One test per kernel, so workers share them out."""

import os
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
pytest.importorskip("triton", reason="the sweep's kernels are Triton's and CUDA C++'s")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_ops import SWEEP, case_of, run_forms  # noqa: E402

EXPLAINED: dict[tuple[str, str], str] = {}  # (kernel, row) -> why; the same table as sweep_check.py's


@pytest.mark.parametrize("name", list(SWEEP))
def test_the_kernel_runs_and_opsmith_check_passes(name, tmp_path, monkeypatch):
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    e = SWEEP[name]
    try:
        op = e.build("t_gpu_sweep")
    except ImportError as err:
        pytest.skip(f"{name}: its package is not installed ({err})")
    run_forms(name, op, "cuda")
    report = ok.check(case_of(name, op), examples=10)
    print(report.table())
    tables = os.environ.get("OPSMITH_SWEEP_TABLES")  # scripts/gpu-suite keeps every kernel's table beside its log
    if tables:
        with open(tables, "a") as f:
            f.write(report.table() + "\n\n")
    bad = [f"{row} {res}: {detail}" for row, res, detail in report.failures if (name, row) not in EXPLAINED]
    assert not bad, report.table()
