"""``opsmith check`` on the GPU over every published and styled kernel declared in the catalog and the tests
(Liger-Kernel's own kernels from the package among them) and the table of ``declared_ops.py``: no FAIL for a
correct declaration; for each deliberately wrong one, a FAIL whose detail names the cause."""

import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok

pytestmark = pytest.mark.gpu
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent))
from catalog_check_cases import catalog_cases, wrong_cases  # noqa: E402
from declared_ops import register_table  # noqa: E402

NS = "t_gpu_checktab"


def _summary(name, report):
    rows = {c: r for c, r, _ in report.rows}
    return f"CHECK {name}: " + " ".join(f"{c}={r}" for c, r in rows.items())


def test_every_published_and_styled_declaration_passes_check():
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    failed = []
    cases = catalog_cases(NS)
    assert len(cases) >= 14
    for name, case in cases.items():
        report = ok.check(case, examples=8)
        print(report.table(), end="\n\n")
        print(_summary(name, report))
        if not report.ok:
            failed.append(report.table())
    assert not failed, "\n\n".join(failed)


def test_the_declared_table_on_the_gpu():
    cases = register_table(NS + "_tab")
    failed = []
    for name, case in cases.items():
        report = ok.check(case, examples=8)
        print(report.table(), end="\n\n")
        print(_summary(name, report))
        rows = {c: (r, d) for c, r, d in report.rows}
        if name.startswith("wrong_"):
            assert rows["numerics"][0] == "FAIL" and "passes when" in rows["numerics"][1], report.table()
        elif not report.ok:
            failed.append(report.table())
    assert not failed, "\n\n".join(failed)


def test_each_wrong_declaration_fails_naming_its_cause():
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    for name, (case, cause) in wrong_cases(NS + "_wrong").items():
        report = ok.check(case, examples=8, only=["numerics"])
        print(report.table(), end="\n\n")
        print(_summary(name, report))
        (row,) = report.rows
        assert row[1] == "FAIL" and cause in row[2], report.table()
