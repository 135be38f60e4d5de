"""Issue 61, item 1: the analysis reads what the compiler reads (opsmith/analysis/ssa_text.py): Triton's TTIR, made
on this CPU machine by Triton's own front end, and the PTX NVRTC makes of CUDA C++. Each form the IR settles
without a rule of its own, and each place it cannot be had (a helper the compiler does not inline), where the text's
reading takes over and says so."""

import sys
import warnings
from pathlib import Path

import pytest
import torch

import opsmith as ok

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

NS = "t_analysis_ir"
F32 = torch.float32


def _said(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in seen if issubclass(w.category, ok.DeclarationWarning)]


def _where(monkeypatch):
    import opsmith.analysis as analysis

    seen: dict[str, str] = {}
    inner = analysis.reads_of

    def spy(source, record=None, sources=()):
        reads = inner(source, record, sources)
        seen[record.op_name] = reads.where
        return reads

    monkeypatch.setattr(analysis, "reads_of", spy)
    return seen


@triton.jit
def loop_carried(x_ptr, y_ptr, stride_x, stride_y, R, N, BLOCK: tl.constexpr):
    """Both pointers walk down the rows in a loop (scf.for iter_args): y's by y's own stride."""
    c = tl.arange(0, BLOCK)
    for _ in range(R):
        tl.store(y_ptr + c, tl.load(x_ptr + c, mask=c < N), mask=c < N)
        x_ptr += stride_x
        y_ptr += stride_y


@triton.jit
def loop_carried_wrong(x_ptr, y_ptr, stride_x, stride_y, R, N, BLOCK: tl.constexpr):
    """The same walk, y moved by x's stride (planted)."""
    c = tl.arange(0, BLOCK)
    for _ in range(R):
        tl.store(y_ptr + c, tl.load(x_ptr + c, mask=c < N), mask=c < N)
        x_ptr += stride_x
        y_ptr += stride_x + 0 * stride_y


def _walk(name, kernel, **kw):
    return ok.triton_op(f"{NS}::{name}", kernel, inputs=[ok.InputDecl("x", F32, shape=("R", "N"))],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"), ok.Dim("R"),
                                ok.Dim("N")],
                        geometry=ok.Grid(grid=(1,)), constexprs={"BLOCK": 64}, **kw)  # fmt: skip


def test_a_pointer_carried_through_a_loop_is_followed_by_its_iter_args(monkeypatch):
    where = _where(monkeypatch)
    op, said = _said(lambda: _walk("walk", loop_carried))
    assert said == [] and where[f"{NS}::walk"] == "the kernel's TTIR"
    op, said = _said(lambda: _walk("walk_wrong", loop_carried_wrong))
    assert any("'stride_x' (the declared stride(x, 0)) also addresses y in the kernel's TTIR" in m for m in said), said
    assert next(e for e in op.record.extras if e.name == "stride_x").same == ("o0",)


@triton.jit
def _noinline_row(base, row, stride):
    return base + row * stride


_noinline_row.noinline = True


@triton.jit
def noinline_rows(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    tl.store(_noinline_row(y_ptr, row, stride_y) + c, tl.load(_noinline_row(x_ptr, row, stride_x) + c, mask=c < N),
             mask=c < N)  # fmt: skip


def test_a_helper_triton_does_not_inline_is_read_from_the_text(monkeypatch):
    """A ``noinline`` helper is a call in the TTIR, whose body the reader does not follow: the source's reading
    (which follows helpers' arguments) decides, silent on this correct kernel."""
    where = _where(monkeypatch)
    _, said = _said(lambda: ok.triton_op(f"{NS}::noinline", noinline_rows,
                                         inputs=[ok.InputDecl("x", F32, shape=("R", "N"))],
                                         outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                                         extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"),
                                                 ok.Dim("N")],
                                         geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"BLOCK": 64}))  # fmt: skip
    assert said == [] and where[f"{NS}::noinline"] == "the Triton function's source"


NOINLINE_CPP = r"""
__device__ __noinline__ const float* row_of(const float* p, long r, long s) { return p + r * s; }
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  const float* a = row_of(x, blockIdx.x, stride_x);
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * stride_y + c] = a[c] * 2.f;
}
"""

VECTOR_CPP = r"""
extern "C" __global__ void k(const float4* x, float4* y, long stride_x, long stride_y, int n) {
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float4 v = x[blockIdx.x * stride_x + c];
    v.x *= 2.f; v.w += v.y;
    y[blockIdx.x * stride_y + c] = v;
  }
}
"""


def _cpp_rows(name, source):
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=source, kernel_name="k", inputs=[ok.InputDecl("x", F32, shape=("R", "N"))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"), ok.Dim("N", name="n")],
        geometry=ok.Grid(grid=("R",), block=(128,))))  # fmt: skip


def test_cuda_cpp_is_read_from_its_ptx_and_a_call_nvrtc_keeps_from_the_text(monkeypatch):
    """float4 loads and stores (PTX's vector forms) read from the PTX; a ``__noinline__`` device function is a
    call there, so that kernel is read from its text. Both correct, both silent."""
    where = _where(monkeypatch)
    _, said = _said(lambda: _cpp_rows("vector", VECTOR_CPP))
    assert said == [] and where[f"{NS}::vector"] == "the kernel's PTX"
    _, said = _said(lambda: _cpp_rows("noinline_cpp", NOINLINE_CPP))
    assert said == [] and where[f"{NS}::noinline_cpp"] == "the CUDA C++ text"


def test_ptx_flows_follow_vector_results_and_not_loaded_values():
    """A register unpacked from a parameter (``mov.b64 {%r1, %r2}, %rd1``) keeps the parameter; a loaded value
    (scalar or vector) is memory's, so an index loaded through one tensor ties no stride to the next access."""
    from opsmith.analysis.ssa_text import ptx_flows

    ptx = """
.visible .entry k(
	.param .u64 k_param_0,
	.param .u64 k_param_1,
	.param .u64 k_param_2,
	.param .u64 k_param_3
)
{
	ld.param.u64 	%rd1, [k_param_0];
	ld.param.u64 	%rd2, [k_param_1];
	ld.param.u64 	%rd3, [k_param_2];
	ld.param.u64 	%rd4, [k_param_3];
	mov.b64 	{%r1, %r2}, %rd3;
	mul.wide.s32 	%rd5, %r2, 4;
	add.s64 	%rd6, %rd1, %rd5;
	ld.global.v2.u32 	{%r3, %r4}, [%rd6];
	mul.wide.s32 	%rd7, %r4, 4;
	add.s64 	%rd8, %rd2, %rd7;
	st.global.u32 	[%rd8], %r3;
	ret;
}
"""
    reads = ptx_flows(ptx, "k", ["x", "y", "stride_x", "unused"])
    assert reads.read == {"x", "y", "stride_x", "unused"}  # loaded by ld.param: the compiler kept it
    assert reads.addresses == {"x": {"x", "stride_x"}, "stride_x": {"x", "stride_x"}, "y": {"y"}}


@pytest.mark.parametrize("requires, warned", [((), True), ((ok.Divisible("N", 32),), True),
                                              ((ok.Divisible("N", 128),), False)])  # fmt: skip
def test_a_size_only_bounding_a_stepped_loop_is_told_unless_whole_blocks_are_declared(requires, warned):
    """Unmasked blocks of 64 in a loop up to N: the last step runs past N unless N is a multiple of 64. A
    Divisible by 32 does not make whole blocks of 64; by 128 it does."""
    from analysis_table_kernels import loop_rows_wrong

    _, said = _said(lambda: ok.triton_op(f"{NS}::stepped_{len(requires)}_{warned}", loop_rows_wrong,
                                         inputs=[ok.InputDecl("x", F32, shape=("R", "N"))],
                                         outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                                         extras=[ok.Stride("x", 0, name="stride_x"), ok.Stride("y", 0, name="stride_y"),
                                                 ok.Dim("N")],
                                         geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"BLOCK": 64},
                                         requires=list(requires)))  # fmt: skip
    told = [m for m in said if "only bounds a loop that steps by 64" in m]
    assert bool(told) == warned, said
    if warned:
        assert "mask=offs < N" in told[0] and "Divisible('N', 64)" in told[0]
        import inspect

        rows, first = inspect.getsourcelines(loop_rows_wrong.fn)
        line = first + next(k for k, r in enumerate(rows) if "for start in range(0, N, BLOCK):" in r)
        assert f"(the kernel's line {line}: for start in range(0, N, BLOCK):)" in told[0]


def test_a_finding_quotes_the_kernel_line_the_ir_places_it_at():
    """The TTIR's locations (a helper inlined at its call: the call's line) and the PTX's line info (a macro, a
    ``__device__`` helper inlined: the kernel's line) name the access a foreign stride reaches."""
    import analysis_table as A

    expected = {
        "triton helper given x's stride for y": "(the kernel's line 33: tl.store(_row_ptr(y_ptr, row, stride_x) + c,",
        "c++ macro naming x's stride for y": "(the kernel's line 4: for (int c = threadIdx.x; c < n; c += blockDim.x) "
        "AT(y, blockIdx.x, c) = 2.f * AT(x, blockIdx.x, c);)",
        "c++ __device__ helper, x's stride for y": "(the kernel's line 5: for (int c = threadIdx.x; c < n; c += "
        "blockDim.x) y[blockIdx.x * stride_x + c] = xr[c] + 1.f;)",
    }
    for k, (name, words) in enumerate(expected.items()):
        _, said = _said(lambda: A.MISUSES[name][0](f"{NS}_quote{k}"))  # noqa: B023
        assert any("also addresses y" in m and words in m for m in said), (name, said)
