"""``opsmith check``'s own tests on CPU: every row over the table of ``declared_ops.py`` under Triton's interpreter
(a precondition, a dtype set and int/float scalars; a float32 statistic beside a differentiable output; an
output that is non-empty over zero rows; the declarations opsmith corrects from the kernel's body), no FAIL for
a correct op and a FAIL naming the cause for a wrong one; then the sample solver, a crash in a row, and a
reference that returns its input."""

import json
import os
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok
from opsmith.checking.samples import ShapeSolver

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from interpreted import run_interpreted  # noqa: E402

NS = "t_checktab_cpu"
CORRECT = ("vec4", "rms_rows", "colsum", "rows_scale", "pair_add")


@pytest.fixture(scope="module")
def table():
    pytest.importorskip("triton")
    return json.loads(run_interpreted("check_table_interpreter_check.py", timeout=1800).splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_op_has_no_fail_row(table, name):
    rows = table["rows"][name]
    assert not [r for r in rows.values() if r[0] == "FAIL"], rows
    ran = {"opcheck", "numerics", "compile-static", "compile-dynamic", "export", "autograd"}
    assert all(rows[c][0] == "pass" for c in ran), rows  # the interpreter ran the kernel in every one


@pytest.mark.slow
def test_the_rows_that_failed_correct_ops_before(table):
    rows = table["rows"]
    # Divisible(C, 4): the case's (7, 301) grew to whole groups of 4 for compile and export; export reran
    # with the int scalar it specialized (the case draws a new one each call)
    assert "shapes (10, 304), (14, 308), (18, 312)" in rows["vec4"]["compile-dynamic"][1], rows["vec4"]
    assert "ran shapes (10, 304) and (14, 308)" in rows["vec4"]["export"][1], rows["vec4"]
    # the float32 RSTD is not differentiated; gradients of X and W match the reference's
    assert rows["rms_rows"]["autograd"][1].startswith("gradients match the reference's"), rows["rms_rows"]
    # an empty X gives OUT's init (zeros), and opcheck's zero-size sample runs
    assert "refused" not in rows["colsum"]["opcheck"][1], rows["colsum"]


@pytest.mark.slow
def test_a_wrong_declaration_fails_naming_its_cause(table):
    scale = table["rows"]["wrong_rows_scale"]["numerics"]
    assert scale[0] == "FAIL" and "passes when W is contiguous" in scale[1] and "W_row_stride" in scale[1], scale
    pair = table["rows"]["wrong_pair_add"]["numerics"]
    assert pair[0] == "FAIL" and "passes when A, B share one layout" in pair[1], pair
    assert "Stride(('A', 'B'), axis)" in pair[1], pair


@pytest.mark.slow
def test_registration_said_what_it_corrected(table):
    said = table["warnings"]
    assert any("rows_scale: the kernel never reads 'W_row_stride'" in m for m in said), said
    assert any("pair_add: 'stride_a'" in m and "also addresses B" in m for m in said), said
    assert not any("wrong_" in m for m in said), said  # silenced


SRC = r"""
extern "C" __global__ void vec4(const float* x, int n, float* y) {
    int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) for (int j = 0; j < 4; ++j) y[i + j] = 2.f * x[i + j];
}
"""


def _vec4(name, requires, reference=None):
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=SRC, kernel_name="vec4", inputs=[ok.InputDecl("x", shape=("R", "C"))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
        geometry=ok.Elementwise(block=(64,)), requires=requires), reference=reference)  # fmt: skip


def _case(op, shapes):
    return ok.CheckCase(op, lambda s, dt, dev: (torch.randn(s, device=dev, dtype=dt),), lambda x: 2 * x, shapes=shapes)


def test_the_solver_fits_shapes_to_the_preconditions():
    op = _vec4("fit", [ok.Divisible("C", 4), ok.AtMost("R", 100), ok.OneOf("C", (256, 1000))])
    solver = ShapeSolver(_case(op, [(7, 1001)]), torch.device("cpu"))
    assert solver.fit((7, 1001), torch.float32) == (7, 1000)
    assert solver.fit((300, 250), torch.float32) == (100, 256)
    grown = solver.grown((7, 1000), torch.float32, 3)
    assert len(set(grown)) == 3 and all(r <= 100 and c in (256, 1000) for r, c in grown), grown


def test_a_shape_nothing_fits_is_a_skip_with_the_reason():
    op = _vec4("never", [ok.Divisible("C", 4), ok.AtMost("C", 2)], reference=lambda x: 2 * x)
    rows = {c: (r, d) for c, r, d in ok.check(_case(op, [(3, 10)]), device="cpu").rows}
    assert rows["compile-static"][0] == "skip" and "satisfies the op's preconditions" in rows["compile-static"][1]


def test_a_row_that_kills_the_process_is_a_fail_naming_the_likely_cause():
    from opsmith.checking.child import can_fork

    if not can_fork():  # a GPU machine where another test of this worker initialized CUDA: the abort would be ours
        pytest.skip("CUDA is initialized in this process, so check runs rows in it, not in a forked child")
    lib = torch.library.Library(NS, "FRAGMENT")
    lib.define("boom(Tensor x) -> Tensor")
    lib.impl("boom", lambda x: os.abort() if x.shape[-1] > 50 else 2 * x, "CPU")  # a stray write's abort
    case = ok.CheckCase(torch.ops.t_checktab_cpu.boom.default, lambda s, dt, dev: (torch.randn(s, dtype=dt),),
                        lambda x: 2 * x, shapes=[(4, 10), (4, 100)])  # fmt: skip
    report = ok.check(case, device="cpu", only=["numerics", "export"])
    rows = {c: (r, d) for c, r, d in report.rows}
    assert rows["numerics"][0] == "FAIL" and "signal 6 (SIGABRT)" in rows["numerics"][1], report.table()
    assert "without a mask" in rows["numerics"][1], report.table()


def test_a_reference_returning_its_input_is_served_fresh():
    op = _vec4("alias", [], reference=lambda x: x.float())  # x.float() of a float32 x is x itself
    x = torch.randn(3, 8)
    y = op(x)
    assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()
    t = _vec4("transposed", [], reference=lambda x: x.t().contiguous().t())  # a column-major result
    assert t(x).is_contiguous()
    torch.library.opcheck(op.overload, (x,))
