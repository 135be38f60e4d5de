"""The declaration checked against the kernel's body at registration (opsmith/analysis), on CPU: an unread
stride (Liger's ``W_row_stride``, in our own kernel and in Liger's from its package), one tensor's stride
addressing another (the tutorial attention), a dimension named once, the same findings in CUDA C++ text, the
record changed so every path applies them (Python and native dry runs agree), and ``silence=``."""

import sys
import warnings
from pathlib import Path

import pytest
import torch

import opsmith as ok

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
pytest.importorskip("triton")

from analysis_table import GLU_REUSED  # noqa: E402
from declared_ops import _pair_add, _rows_scale  # noqa: E402
from differential import Registered, both_dry_runs, tensor_call  # noqa: E402

NS = "t_analysis"


def _said(fn):
    """fn()'s result and the DeclarationWarnings it gave."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in seen if issubclass(w.category, ok.DeclarationWarning)]


def _input(op, name):
    return next(a for a in op.record.tensor_inputs if a.name == name)


def test_an_unread_stride_is_said_and_its_tensor_made_row_major():
    op, said = _said(lambda: _rows_scale(NS, "rows_scale"))
    (msg,) = said
    assert "never reads 'W_row_stride'" in msg and "makes W row-major along axis 0" in msg, msg
    assert "Const(0, name='W_row_stride')" in msg and "silence=('W_row_stride',)" in msg, msg
    assert _input(op, "W").strided == () and _input(op, "X").strided == (0,)
    quiet, said = _said(lambda: _rows_scale(NS, "rows_scale_judged", silence=("W_row_stride",)))
    assert said == [] and _input(quiet, "W").strided == (0,)  # silenced: neither the warning nor the change


def test_the_warning_points_at_the_users_declaration():
    """Issue 60, item 8: a DeclarationWarning's file and line are the user's registration call, not a line inside
    opsmith (a fixed stacklevel reached the user's frame from one entry only)."""
    import declared_ops

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _rows_scale(NS, "rows_scale_where")
    (w,) = [w for w in seen if issubclass(w.category, ok.DeclarationWarning)]
    assert Path(w.filename).resolve() == Path(declared_ops.__file__).resolve(), (w.filename, w.lineno)


@pytest.mark.slow
def test_the_change_reaches_the_native_library_too():
    """A strided W (stride 2): the Python path and a native library built from the record both copy it."""
    op, _ = _said(lambda: _rows_scale(NS, "rows_scale_native"))
    x, w = tensor_call((4, 40)), tensor_call((40,), view="strided")
    py = both_dry_runs([Registered(op, [[x, w], [x, tensor_call((40,))]])])
    runs = [py[f"{op.record.op_name}#{k}"] for k in range(2)]
    assert all(r["ok"] for r in runs), runs


def test_ligers_own_fused_add_rms_norm_declared_as_a_user_does():
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    from liger_kernel.ops.fused_add_rms_norm import _fused_add_rms_norm_forward_kernel

    rows = ("*B", "N")
    op, said = _said(lambda: ok.triton_op(
        f"{NS}::liger_fused_add_rms_norm", _fused_add_rms_norm_forward_kernel,
        inputs=[ok.InputDecl("X", shape=rows), ok.InputDecl("R", shape=rows, dtype="X"),
                ok.InputDecl("W", shape=("N",), dtype="X"), ok.ScalarInput("eps", float), ok.ScalarInput("offset", float)],
        outputs=[ok.OutputDecl("Y", ok.SameAs("X")), ok.OutputDecl("S", ok.SameAs("X")),
                 ok.OutputDecl("RSTD", shape=("*B",), dtype=torch.float32)],
        extras=[ok.Stride("Y", -2, name="Y_row_stride"), ok.Stride("S", -2, name="S_row_stride"),
                ok.Stride("X", -2, name="X_row_stride"), ok.Stride("R", -2, name="R_row_stride"),
                ok.Stride("W", 0, name="W_row_stride"), ok.Stride("RSTD", -1, name="RSTD_row_stride"),
                ok.Dim("N", name="n_cols"), ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        constexprs={"casting_mode": 0}, geometry=ok.Reduction(reduce_dims=(-1,))))  # fmt: skip
    assert len(said) == 1 and "never reads 'W_row_stride'" in said[0], said
    assert _input(op, "W").strided == ()


def test_one_tensors_stride_addressing_another_makes_them_share_it():
    op, said = _said(lambda: _pair_add(NS, "pair_add"))
    assert any("'stride_a' (the declared stride(A, 0)) also addresses B" in m and
               "Stride(('A', 'B'), 0, name='stride_a')" in m for m in said), said  # fmt: skip
    shared = next(e for e in op.record.extras if e.name == "stride_a")
    assert shared.same == ("i1",)
    quiet, said = _said(lambda: _pair_add(NS, "pair_add_judged", silence=("stride_a", "stride_b")))
    assert said == [] and next(e for e in quiet.record.extras if e.name == "stride_a").same == ()


def test_the_tutorial_attention_declared_per_tensor_gets_the_shared_record():
    from examples.catalog.attention import register_attention

    shared, said_shared = _said(lambda: register_attention(NS))
    unshared, said = _said(lambda: register_attention(NS, shared=False))
    assert said_shared == []  # the catalog's declaration is the one the kernel needs
    assert any("'stride_qz'" in m and "also addresses K, V, Out" in m for m in said), said

    def sharing(op):
        return sorted((e.name, e.same) for e in op.record.extras if e.same)

    assert sharing(unshared) == sharing(shared) != []


def test_a_dimension_named_once_is_said():
    _, said = _said(lambda: _rows_scale(NS, "rows_scale_typo", w_dim="M"))
    typo = [m for m in said if "dimension 'M'" in m]
    assert len(typo) == 1 and "of 'W' is named nowhere else" in typo[0] and "'N'" in typo[0], said
    _, said = _said(lambda: _rows_scale(NS, "rows_scale_n"))
    assert not any("dimension" in m for m in said), said


CPP = r"""
// a_stride addresses both rows; b_stride is taken and never read (this comment names b_stride)
extern "C" __global__ void add_rows(const float* a, const float* b, int a_stride, int b_stride, int n, float* out) {
    const char* note = "b_stride";
    const int r = blockIdx.x;
    const float* arow = a + r * a_stride;
    for (int c = threadIdx.x; c < n; c += blockDim.x) out[r * n + c] = arow[c] + b[r * a_stride + c];
}
"""


def test_the_same_findings_from_cuda_cpp_text():
    def reg(name, silence=()):
        return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
            kernel_source=CPP, kernel_name="add_rows",
            inputs=[ok.InputDecl("a", shape=("R", "N")), ok.InputDecl("b", shape=("R", "N"))],
            outputs=[ok.OutputDecl("out", ok.SameAs("a"))],
            extras=[ok.Stride("a", 0, name="a_stride"), ok.Stride("b", 0, name="b_stride"), ok.Dim("N", name="n")],
            geometry=ok.Grid(grid=("R",), block=(128,)), silence=silence))  # fmt: skip

    op, said = _said(lambda: reg("add_rows"))
    assert any("'a_stride'" in m and "also addresses b" in m and "the kernel's PTX" in m for m in said), said
    assert any("never reads 'b_stride'" in m for m in said), said  # the comment and the string do not count
    assert next(e for e in op.record.extras if e.name == "a_stride").same == ("i1",)
    _, said = _said(lambda: reg("add_rows_judged", silence=("a_stride", "b_stride")))
    assert said == []


def test_silence_takes_a_list_of_names():
    with pytest.raises(ok.SpecError, match=r"silence: 'W_row_stride' is not a list of names"):
        _rows_scale(NS, "rows_scale_bad_silence", silence="W_row_stride")


def test_the_published_catalog_registers_without_a_warning():
    """The declarations the catalog ships (Liger's kernels from the package among them) say nothing the kernels'
    bodies contradict: a loaded value indexing another tensor (``tl.load(weight_ptr + y)``) is data, not Y's
    stride."""
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    from examples.catalog.attention import register_attention
    from examples.catalog.optional import liger_cross_entropy, register_optional
    from examples.catalog.published import register_published
    from examples.catalog.rows import liger_rms_norm, register_rows
    from examples.llama.kernels import llama_kernels

    ns = NS + "_catalog"
    _, said = _said(lambda: [register_attention(ns), register_optional(ns), liger_cross_entropy(ns),
                             register_published(ns), register_rows(ns), liger_rms_norm(ns), llama_kernels(ns)])  # fmt: skip
    assert said == [], said


@pytest.mark.parametrize("shape", [("R", "N"), ("*R", "N"), ("B", "T", "N")])
def test_a_row_ops_rows_are_the_grids_not_a_dimension_named_once(shape):
    """Issue 61: ``("R", "N")`` with ``SameAs`` and ``Dim("N")`` under ``Reduction((-1,))`` was told "'R' is named
    nowhere else ... the kernel cannot know how many elements of x there are": the launch runs one program per
    row, so R is the grid's. Every spelling of the rows is silent (a name once on another tensor is still said:
    test_a_dimension_named_once_is_said, under the same geometry)."""
    from declared_kernels import softmax_rows_kernel

    def reg(name, shape):
        return ok.triton_op(f"{NS}::{name}", softmax_rows_kernel, inputs=[ok.InputDecl("x", torch.float32, shape=shape)],
                            outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("N")],
                            geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"BLOCK": 1024})  # fmt: skip

    _, said = _said(lambda: reg(f"softmax_{len(shape)}_{shape[0][0] == '*'}", shape))
    assert said == [], said


@pytest.mark.parametrize("reader", ["ir", "text"])
@pytest.mark.parametrize("flavor", ["triton", "cuda"])
def test_a_reused_local_name_is_two_values_the_record_is_left_and_calls_run(flavor, reader, monkeypatch):
    """Issue 61: a kernel that reuses one local name for x's offsets and then y's had the two strides merged into
    one Stride, and a GLU-shaped op (x (M, 2N), y (M, N)) refused even contiguous calls. Read from the compiler's
    IR (TTIR, PTX) the name is two values, each tied to its own pointer: nothing to say. Read from the text (where
    the IR cannot be made), the tie runs through a name given two values: said as a possibility, the record left
    as declared. Either way the call is accepted."""
    from declared_kernels import glu_reused_offs_kernel

    from opsmith.analysis import readers

    if reader == "text":
        monkeypatch.setitem(readers.IR_READERS, flavor, _no_ir)
    decl = dict(inputs=[ok.InputDecl("x", torch.float32, shape=("M", "2 * N"))], outputs=[ok.OutputDecl("y", ("M", "N"))],
                extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"), ok.Dim("N")])  # fmt: skip
    name = f"glu_reused_{flavor}_{reader}"
    if flavor == "triton":
        make = lambda: ok.triton_op(f"{NS}::{name}", glu_reused_offs_kernel, **decl,  # noqa: E731
                                    geometry=ok.Grid(grid=("M",)), constexprs={"BLOCK": 64})  # fmt: skip
    else:
        make = lambda: ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(  # noqa: E731
            kernel_source=GLU_REUSED, kernel_name="glu", **decl, geometry=ok.Grid(grid=("M",), block=(128,))))  # fmt: skip
    op, said = _said(make)
    assert [e.same for e in op.record.extras if e.name in ("stride_x", "stride_y")] == [(), ()]
    if reader == "ir":
        assert said == []
    else:
        assert len(said) == 2 and all("may also address" in m and "left as it is" in m for m in said), said
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        assert op(torch.empty(4, 20)).shape == (4, 10)


def _no_ir(sources, record, text):
    raise ValueError("no IR here (the test's stand-in for a front end that cannot compile the kernel)")


def test_a_size_the_kernel_never_reads_is_told_as_a_missing_mask():
    """Issue 61: an unmasked kernel was told "never reads 'n_cols'" with a Const(0) hint and no word of the mask;
    the fix that keeps a correct kernel correct is the mask."""
    from declared_kernels import unmasked_rows_kernel

    _, said = _said(lambda: ok.triton_op(f"{NS}::unmasked", unmasked_rows_kernel,
                                         inputs=[ok.InputDecl("x", torch.float32, shape=("R", "N"))],
                                         outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("N", name="n_cols")],
                                         geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"BLOCK": 64}))  # fmt: skip
    (msg,) = said
    assert "never reads 'n_cols'" in msg and "mask=offs < n_cols" in msg and "Const(0" not in msg, msg


def test_a_stride_given_to_another_tensors_descriptor_is_found():
    """Issue 61: ``tl.make_tensor_descriptor(Y, strides=[stride_x, 1])`` then ``yd.store(...)`` gave no finding, and
    Y came back wrong where X's row stride differs: a descriptor's (or block pointer's) strides are its base's
    address, so stride_x addresses Y, which the rule over the declaration then finds as it finds the same mistake
    written with pointer arithmetic (test_one_tensors_stride_addressing_another_makes_them_share_it). Read, not
    registered: an in-kernel descriptor needs Triton's global scratch memory, which opsmith's launcher refuses,
    and Triton 3.9 removed block pointers."""
    from declared_kernels import copy_block_ptr_kernel, copy_desc_kernel

    from opsmith.analysis.python_body import python_reads

    for kernel in (copy_desc_kernel, copy_block_ptr_kernel):
        reads = python_reads(kernel)
        assert {"Y", "stride_x"} <= reads.certain["Y"] and "stride_y" not in reads.addresses["Y"], reads
        assert "stride_y" not in reads.read


MACRO = r"""
#define AT(p, r, c) (p)[(r) * ld + (c)]
#define COLS \
  n
extern "C" __global__ void scale(const float* x, float* y, int ld, int n) {
  for (int c = threadIdx.x; c < COLS; c += blockDim.x) AT(y, blockIdx.x, c) = 2.f * AT(x, blockIdx.x, c);
}
"""


def test_a_stride_read_through_a_macro_is_read():
    """Issue 61: ``#define AT(p, r, c) (p)[(r) * ld + (c)]`` made 'ld' "never read", the strided axis dropped
    (strided inputs copied) and ``Const(0)`` suggested, which would read row 0 for every row. The reader expands
    the source's macros (function-like, object-like, continued lines) where the body uses them."""
    op, said = _said(lambda: ok.cuda_kernel_op(f"{NS}::macro_rows", ok.KernelSpec(
        kernel_source=MACRO, kernel_name="scale", inputs=[ok.InputDecl("x", shape=("R", "N"))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Stride(("x", "y"), 0, name="ld"), ok.Dim("N", name="n")],
        geometry=ok.Grid(grid=("R",), block=(128,)))))  # fmt: skip
    assert said == [], said
    assert _input(op, "x").strided == (0,)
