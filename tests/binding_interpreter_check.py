"""Run by test_binding.py with TRITON_INTERPRET=1: a kernel shaped like Liger's SwiGLU (three tensors sharing
one row stride, the block size compiled in as a power of two covering the row), bound by name, on CPU
tensors with row-strided inputs, against PyTorch. (Liger's own kernel calls ``.to`` on a scalar argument,
which Triton's interpreter does not support; the GPU suite runs it.)"""

import torch
import triton
import triton.language as tl

import opsmith as ok


@triton.jit
def scaled_mul(a_ptr, b_ptr, c_ptr, stride, scale, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    m = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=m, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=m, other=0).to(tl.float32)
    tl.store(c_ptr + row * stride + cols, (a * b * scale).to(c_ptr.dtype.element_ty), mask=m)


op = ok.triton_op("t_bind_interp::scaled_mul", scaled_mul,
                  inputs=[ok.InputDecl("a", ndim=2), ok.InputDecl("b", shape=(ok.DimSize("a", 0), ok.DimSize("a", 1))),
                          ok.ScalarInput("scale", float)],
                  outputs=[ok.OutputDecl("c", ok.SameAs("a"))],
                  extras=[ok.Stride(("a", "b", "c"), 0, name="stride"), ok.DimSize("a", 1, name="n_cols"),
                          ok.DimSize("a", 1, name="BLOCK_SIZE", bucket="pow2")],
                  geometry=ok.Reduction(reduce_dims=(-1,)))  # fmt: skip
assert [p.name for p in op.record.params] == ["a_ptr", "b_ptr", "c_ptr", "stride", "scale", "n_cols"]
torch.manual_seed(0)
n = 0
for rows, cols in [(3, 96), (5, 1000), (1, 7)]:
    for dt in (torch.float32, torch.float16):
        fused = torch.randn(rows, 2 * cols).to(dt)
        a, b = fused.chunk(2, dim=-1)  # row stride 2 * cols; the output's is cols: a and b are made contiguous
        want = (a.float() * b.float() * 1.5).to(dt)
        torch.testing.assert_close(op(a, b, 1.5), want, atol=2e-3, rtol=2e-3)
        ac, bc = a.contiguous(), b.contiguous()  # one stride for all three: passed as they are
        torch.testing.assert_close(op(ac, bc, 0.5), (ac.float() * bc.float() * 0.5).to(dt), atol=2e-3, rtol=2e-3)
        n += 2
print(f"checked {n} cases")
