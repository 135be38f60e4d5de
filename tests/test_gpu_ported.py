"""Kernels in the styles of public projects (tests/styled_kernels.py: opsmith's own text) and Liger-Kernel's
own SwiGLU kernel from the installed package, declared for opsmith as they stand: each passes ``opsmith check``
(opcheck, numerics against PyTorch over drawn shapes with outputs in poisoned memory, torch.compile static and
dynamic, torch.export, CUDA graph capture and replay, the side-stream check)."""

import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok

sys.path.insert(0, str(Path(__file__).parent))
import styled_kernels as pk

pytestmark = pytest.mark.gpu
NS = "t_gpu_ported"


def _table(report):
    print(report.table(), end="\n\n")
    assert report.ok, "\n" + report.table()
    return {c: r for c, r, _ in report.rows}


def test_llmc_gelu_outputs_first_cpp_linkage():
    op = pk.register_gelu(NS)
    case = ok.CheckCase(op, lambda s, d, dev: (torch.randn(s, device=dev, dtype=d),), pk.gelu_reference,
                        shapes=[(1000,), (3, 257), (4, 1024)], tol={"atol": 1e-5, "rtol": 1e-5})  # fmt: skip
    rows = _table(ok.check(case, examples=10))
    assert all(
        rows[c] == "pass" for c in ("numerics", "compile-static", "compile-dynamic", "export", "cuda-graph", "stream")
    )


def test_llmc_norm_template_in_place_accumulator():
    op = pk.register_norm(NS)

    def inputs(shape, dtype, device):
        return torch.randn(1, device=device), torch.randn(shape, device=device).to(dtype)

    case = ok.CheckCase(op, inputs, pk.norm_reference, shapes=[(4097,), (64, 1000)],
                        dtypes=[torch.float32, torch.bfloat16, torch.float16],
                        tol={"atol": 1e-2, "rtol": 1e-4}, lowp_tol={"atol": 1e-2, "rtol": 1e-4})  # fmt: skip
    rows = _table(ok.check(case, examples=10))
    assert all(
        rows[c] == "pass" for c in ("numerics", "compile-static", "compile-dynamic", "export", "cuda-graph", "stream")
    )


@pytest.mark.parametrize("which", ["styled", "liger"])
def test_liger_swiglu_strides_scalar_and_sizes_compiled_in(which):
    if which == "liger":
        pytest.importorskip("liger_kernel", reason="liger-kernel is not installed here (pip install '.[test]'; the "
                            "GPU suite carries its wheel)")  # fmt: skip
    op = pk.register_swiglu(NS) if which == "styled" else pk.register_liger_swiglu(NS)

    def inputs(shape, dtype, device):
        fused = torch.randn(shape[0], 2 * shape[1], device=device).to(dtype)  # a fused gate/up projection
        a, b = fused.chunk(2, dim=-1)  # row-strided views
        return a, b, 1.5

    case = ok.CheckCase(op, inputs, pk.swiglu_reference, shapes=[(7, 96), (64, 4096)],
                        dtypes=[torch.float32, torch.bfloat16, torch.float16], tol={"atol": 1e-5, "rtol": 1e-4})  # fmt: skip
    rows = _table(ok.check(case, examples=8))
    assert all(
        rows[c] == "pass" for c in ("numerics", "compile-static", "compile-dynamic", "export", "cuda-graph", "stream")
    )


def test_a_strided_input_reaches_the_kernel_without_a_copy():
    """An in-place kernel given a row stride writes a slice of a wider tensor directly: the base changes."""
    src = r"""
    extern "C" __global__ void add_one(float* x, long long stride, int rows, int cols) {
        int c = blockIdx.x * blockDim.x + threadIdx.x;
        int r = blockIdx.y;
        if (c < cols) x[r * stride + c] += 1.f;
    }"""
    op = ok.cuda_kernel_op(f"{NS}::add_one", ok.KernelSpec(
        kernel_source=src, kernel_name="add_one", inputs=[ok.InputDecl("x", ndim=2, mutates=True)], outputs=[],
        extras=[ok.Stride("x", 0, name="stride"), ok.DimSize("x", 0, name="rows"), ok.DimSize("x", 1, name="cols")],
        geometry=ok.Elementwise(block=(128, 1), layout="nd")))  # fmt: skip
    base = torch.randn(6, 300, device="cuda")
    want = base.clone()
    want[:, 10:200] += 1
    op(base[:, 10:200])
    torch.testing.assert_close(base, want)
    with pytest.raises(ok.InputError, match="the kernel can address with the strides of axes"):
        op(base[:, ::2])  # a column stride the kernel does not take: refused (an in-place input is never copied)


def test_meta_fn_allocates_the_output_of_a_shape_changing_kernel():
    src = r"""
    extern "C" __global__ void transpose(const float* x, int rows, int cols, float* y) {
        int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
        if (r < rows && c < cols) y[(long long)c * rows + r] = x[(long long)r * cols + c];
    }"""

    def meta(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.shape[1], x.shape[0])

    op = ok.cuda_kernel_op(f"{NS}::transpose", ok.KernelSpec(
        kernel_source=src, kernel_name="transpose", inputs=[ok.InputDecl("x", ndim=2)], outputs=None,
        extras=[ok.DimSize("x", 0, name="rows"), ok.DimSize("x", 1, name="cols")],
        geometry=ok.Custom(lambda i, o: (((i["x"].shape[1] + 31) // 32, (i["x"].shape[0] + 7) // 8), (32, 8)))),
        meta_fn=meta)  # fmt: skip
    x = torch.randn(37, 129, device="cuda")
    torch.testing.assert_close(op(x), x.t().contiguous())
    rows = _table(ok.check(ok.CheckCase(op, lambda s, d, dev: (torch.randn(s, device=dev, dtype=d),),
                                        lambda x: x.t().contiguous(), shapes=[(37, 129), (5, 3)]),
                           examples=5, only=["opcheck", "numerics", "compile-static", "export", "cuda-graph"]))  # fmt: skip
    assert rows["numerics"] == "pass"


def test_a_float_scalar_out_of_range_is_refused_on_the_gpu():
    src = 'extern "C" __global__ void s(const float* x, float a, int n, float* y) {}'
    op = ok.cuda_kernel_op(f"{NS}::scalar_range", ok.KernelSpec(
        kernel_source=src, kernel_name="s", inputs=[ok.InputDecl("x"), ok.ScalarInput("a", float)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    with pytest.raises(ok.InputError, match="argument 'a': expected a value in"):
        op(torch.randn(8, device="cuda"), 3.5e38)
