"""Issue 61 on the GPU: the analysis table's own row kernels compiled for real and launched on strided inputs (a
column slice of a wider tensor), each against its PyTorch formula. The correct kernels run with the record as
declared; the planted misuses run with the record the analysis changed (one Stride tuple for x and y), and give
right values because of that change. tests/test_analysis_table_cpu.py (which runs here too) reads every kernel
of the table from the TTIR and PTX made with this machine's Triton and NVRTC."""

import sys
import warnings
from pathlib import Path

import pytest
import torch

import opsmith as ok

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: "
                                                  "torch.cuda.is_available() is False here")]  # fmt: skip
pytest.importorskip("triton")

NS = "t_gpu_analysis_table"


def _cases():
    import analysis_table as A
    import analysis_table_kernels as T

    def glu(x):
        n = x.shape[1] // 2
        return x[:, :n] * torch.sigmoid(x[:, n:])

    rows = lambda name, k, **kw: lambda ns: A._rows(ns, name, k, **kw)  # noqa: E731
    pairs = lambda name, k: lambda ns: A._pairs(ns, name, k)  # noqa: E731
    # name -> (registration, (R, N) of x, formula, whether the analysis changed the record)
    return {
        "helper": (rows("helper_rows", T.helper_rows), (6, 50), lambda x: 2 * x, False),
        "helper, y given x's stride": (rows("helper_rows_wrong", T.helper_rows_wrong), (6, 50), lambda x: 2 * x, True),
        "pointer +=": (rows("alias_rows", T.alias_rows), (6, 50), lambda x: x + 1, False),
        "pointer += x's stride for y": (rows("alias_rows_wrong", T.alias_rows_wrong), (6, 50), lambda x: x + 1, True),
        "masked block loop": (rows("loop_rows", T.loop_rows), (5, 150), lambda x: 3 * x, False),
        "one element per step": (rows("scalar_loop_rows", T.scalar_loop_rows), (5, 150), lambda x: 3 * x, False),
        "unmasked blocks, Divisible": (rows("loop_rows_whole", T.loop_rows_wrong, requires=[ok.Divisible("N", 64)]),
                                       (5, 128), lambda x: 3 * x, False),
        "while loop, two pointers": (pairs("while_rows", T.while_rows), (6, 50), lambda x: x + 1, False),
        "while loop, y by x's stride": (pairs("while_rows_wrong", T.while_rows_wrong), (6, 50), lambda x: x + 1, True),
        "reused local name (Triton)": (A._glu_reused("triton"), (6, 80), glu, False),
        "reused local name (CUDA C++)": (A._glu_reused("cuda"), (6, 80), glu, False),
    }  # fmt: skip


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_a_table_kernel_gives_its_formula_on_strided_rows(name):
    build, (r, n), formula, changed = CASES[name]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        op = build(f"{NS}_{list(CASES).index(name)}")
    said = [str(w.message) for w in seen if issubclass(w.category, ok.DeclarationWarning)]
    shared = [e.same for e in op.record.extras if e.name == "stride_x"]
    assert (shared == [("o0",)]) == changed and bool(said) == changed, (shared, said)
    wide = torch.randn(r, n + 13, device="cuda")
    x = wide[:, :n]  # rows n + 13 apart: a kernel addressing x densely, or y by x's stride, is wrong here
    torch.testing.assert_close(op(x), formula(x))
    torch.testing.assert_close(op(x.contiguous()), formula(x))
