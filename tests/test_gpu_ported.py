"""Kernels in the styles of public projects (tests/styled_kernels.py: opsmith's own text) and Liger-Kernel's
own SwiGLU kernel from the installed package, declared for opsmith as they stand: each passes ``opsmith check``
(opcheck, numerics against PyTorch over drawn shapes with outputs in poisoned memory, torch.compile static and
dynamic, torch.export, CUDA graph capture and replay, the side-stream check)."""

import contextlib
import logging
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


# -- issue 49's new capabilities, one styled kernel each ------------------------------------------------------------

_ALL_PATHS = ("numerics", "compile-static", "compile-dynamic", "export", "cuda-graph", "stream")


def _native_agrees(op, calls, reference):
    """The op served from a native library built from its record (``native.use``) gives the reference's result."""
    from opsmith import native

    report = native.use([op])
    assert report.ops == [op.record.op_name]
    for args in calls:
        torch.testing.assert_close(op(*args), reference(*args), rtol=0, atol=0)


def test_a_seeded_dropout_with_a_64_bit_seed_on_every_path():
    """The seed compiles as i32 or i64 by its value, as Triton's own launcher does: the op keeps exactly the
    elements Triton's own launch of the same kernel keeps, for seeds on both sides of 2^31."""
    op = pk.register_seeded_dropout(NS)
    x = torch.randn(1 << 20, device="cuda")
    seeds = (5, 2**31 - 1, 2**31, 1_099_511_640_121, 1_099_511_640_121 + 2**32, -(2**40))
    for s in seeds:
        torch.testing.assert_close(op(x, 0.3, s), pk.seeded_dropout_reference(x, 0.3, s), rtol=0, atol=0)
    compiled = torch.compile(lambda x, s: op(x, 0.3, s), fullgraph=True)
    torch.testing.assert_close(compiled(x, seeds[3]), pk.seeded_dropout_reference(x, 0.3, seeds[3]), rtol=0, atol=0)

    def inputs(shape, dtype, device):
        return torch.randn(shape, device=device).to(dtype), 0.25, int(torch.randint(2**31, 2**50, ()))

    case = ok.CheckCase(op, inputs, pk.seeded_dropout_reference, shapes=[(1000,), (3, 4099)], tol=0)
    rows = _table(ok.check(case, examples=8))
    assert all(rows[c] == "pass" for c in _ALL_PATHS)
    _native_agrees(op, [(x, 0.3, s) for s in seeds], pk.seeded_dropout_reference)


def test_a_dtype_constexpr_chosen_per_call_on_every_path():
    op = pk.register_rms_norm_rows(NS)

    def inputs(shape, dtype, device):
        return torch.randn(shape, device=device).to(dtype), torch.randn(shape[-1], device=device).to(dtype), 1e-6

    case = ok.CheckCase(op, inputs, pk.rms_norm_rows_reference, shapes=[(4, 256), (64, 1000)],
                        dtypes=[torch.float32, torch.bfloat16, torch.float16], tol={"atol": 1e-5, "rtol": 1e-4},
                        lowp_tol={"atol": 2e-2, "rtol": 2e-2})  # fmt: skip
    rows = _table(ok.check(case, examples=8))
    assert all(rows[c] == "pass" for c in _ALL_PATHS)
    # Each path launches the kernel compiled for the call's dtype: compiled and native give the eager op's bits
    # (bf16 and fp16 round the normalized row before the weight, so another dtype's kernel differs by an ulp)
    x, w = torch.randn(64, 1000, device="cuda"), torch.randn(1000, device="cuda")
    dtypes = (torch.float32, torch.bfloat16, torch.float16)
    eager = {dt: op(x.to(dt), w.to(dt), 1e-6) for dt in dtypes}
    for dt in dtypes:
        tol = {"atol": 1e-5, "rtol": 1e-4} if dt == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
        torch.testing.assert_close(eager[dt], pk.rms_norm_rows_reference(x.to(dt), w.to(dt), 1e-6), **tol)
    compiled = torch.compile(op, fullgraph=True)
    with _torch_warnings("torch._higher_order_ops.triton_kernel_wrap") as warned:
        for dt in dtypes:
            torch.testing.assert_close(compiled(x.to(dt), w.to(dt), 1e-6), eager[dt], rtol=0, atol=0)
    # the fp32 entry of the float eps is one torch's analysis of the kernel's writes can run (inductor/floats.py)
    assert not [m for m in warned if "assuming every input is mutated" in m], warned
    from opsmith import native

    native.use([op])
    for dt in dtypes:
        torch.testing.assert_close(op(x.to(dt), w.to(dt), 1e-6), eager[dt], rtol=0, atol=0)


@contextlib.contextmanager
def _torch_warnings(name):
    """The warnings a torch logger emits inside the block (torch's loggers do not propagate to pytest's caplog)."""
    got: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda r: got.append(r.getMessage())
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield got
    finally:
        logger.removeHandler(handler)


def test_shared_memory_as_a_size_expression_on_every_path():
    """``shared_mem="C * 4"``: rows of 100 to 50,000 floats (195 KiB, past the 48 KiB a kernel gets without
    opting in); a row past 227 KiB is refused before the launch."""
    op = pk.register_softmax_rows(NS)

    def inputs(shape, dtype, device):
        return (torch.randn(shape, device=device),)

    case = ok.CheckCase(op, inputs, lambda x: torch.softmax(x, -1), shapes=[(4, 100), (3, 50_000)],
                        dtypes=[torch.float32], tol={"atol": 1e-6, "rtol": 1e-5})  # fmt: skip
    rows = _table(ok.check(case, examples=6))
    assert all(rows[c] == "pass" for c in _ALL_PATHS)
    x = torch.randn(8, 50_000, device="cuda")
    torch.testing.assert_close(torch.compile(op, fullgraph=True)(x), torch.softmax(x, -1))
    with pytest.raises(
        ok.InputError,
        match=r"argument 'inp': expected dynamic shared memory of 0 to 232448 bytes "
        r"per block \(size\(inp, 1\) \* 4\), got 240000",
    ):
        op(torch.randn(2, 60_000, device="cuda"))
    from opsmith import native

    native.use([op])
    torch.testing.assert_close(op(x), torch.softmax(x, -1))
    with pytest.raises(ValueError, match="expected dynamic shared memory of 0 to 232448 bytes"):
        op(torch.randn(2, 60_000, device="cuda"))


def _dyt_grads(fn, x, gamma, beta, dy):
    leaves = [x, gamma, *([beta] if beta is not None else [])]
    leaves = [t.detach().clone().requires_grad_() for t in leaves]
    b = leaves[2] if beta is not None else None
    out = fn(leaves[0], leaves[1], b, 0.7)
    return (out, *torch.autograd.grad(out, leaves, dy))


def test_a_backward_over_an_optional_bias_on_every_path():
    """DyT's backward is a program over an optional beta: with beta None its gradient is None and its column sum
    never runs; eagerly, compiled, from the native library, and under opsmith check."""
    op = pk.register_dyt(NS)
    x, gamma, beta = (torch.randn(64, 1000, device="cuda"), torch.randn(1000, device="cuda"),
                      torch.randn(1000, device="cuda"))  # fmt: skip
    dy = torch.randn(64, 1000, device="cuda")
    compiled = torch.compile(op, fullgraph=True)
    for fn in (op, compiled):
        for b in (beta, None):
            torch.testing.assert_close(_dyt_grads(fn, x, gamma, b, dy), _dyt_grads(pk.dyt_reference, x, gamma, b, dy),
                                       atol=1e-4, rtol=1e-4)  # fmt: skip

    def inputs(shape, dtype, device):
        return (torch.randn(shape, device=device).to(dtype), torch.randn(shape[-1], device=device).to(dtype),
                torch.randn(shape[-1], device=device).to(dtype), 0.7)  # fmt: skip

    case = ok.CheckCase(op, inputs, pk.dyt_reference, shapes=[(4, 256), (64, 1000)],
                        dtypes=[torch.float32, torch.bfloat16], tol={"atol": 1e-5, "rtol": 1e-4})  # fmt: skip
    rows = _table(ok.check(case, examples=6))
    assert all(rows[c] == "pass" for c in _ALL_PATHS)
    from opsmith import native

    report = native.use([op])
    assert op.record.op_name in report.ops
    for b in (beta, None):
        torch.testing.assert_close(_dyt_grads(op, x, gamma, b, dy), _dyt_grads(pk.dyt_reference, x, gamma, b, dy),
                                   atol=1e-4, rtol=1e-4)  # fmt: skip
