"""Run under TRITON_INTERPRET=1 by tests/test_triton_launch_parity_cpu.py: the op keeps the same elements as
Triton's own launch of the kernel for every seed, 64-bit ones included (outputs poisoned first)."""

import torch
from styled_kernels import register_seeded_dropout, seeded_dropout_reference

op = register_seeded_dropout("t_parity_interp")
x = torch.randn(3000)
seeds = [5, 2**31 - 1, 2**31, 1_099_511_640_121, 1_099_511_640_121 + 2**32, -(2**31) - 1, 2**63 - 1, -(2**63)]
kept = []
for seed in seeds:
    got = op(x, 0.25, seed)
    torch.testing.assert_close(got, seeded_dropout_reference(x, 0.25, seed), msg=f"seed={seed}", rtol=0, atol=0)
    kept.append(got != 0)
# The high half reaches the kernel: seeds 2^32 apart keep different elements.
assert not torch.equal(kept[3], kept[4])
print(f"checked {len(seeds)} seeds")

# A constexpr dtype per call (DtypeOf): the kernel sees the call's input dtype.
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from styled_kernels import register_rms_norm_rows, rms_norm_rows_reference  # noqa: E402

import opsmith as ok  # noqa: E402


@triton.jit
def dtype_code_kernel(x_ptr, out_ptr, X_dtype: tl.constexpr):
    tl.store(out_ptr, X_dtype.primitive_bitwidth + 100 * X_dtype.is_bf16() + 1000 * X_dtype.is_floating())


code = ok.triton_op("t_parity_interp::dtype_code", dtype_code_kernel, inputs=[ok.InputDecl("x", dtype="any")],
                    outputs=[ok.OutputDecl("out", shape=(1,), dtype=torch.int32)], geometry=ok.Grid(grid=(1,)),
                    constexprs={"X_dtype": ok.DtypeOf("x")})  # fmt: skip
want = {torch.float32: 1032, torch.float16: 1016, torch.bfloat16: 1116, torch.int8: 8, torch.int64: 64}
got = {dt: int(code(torch.ones(3, dtype=dt))[0]) for dt in want}
assert got == want, got
rows = register_rms_norm_rows("t_parity_interp")
for dt in (torch.float32, torch.float16):
    x, w = torch.randn(5, 100, dtype=dt), torch.randn(100, dtype=dt)
    torch.testing.assert_close(rows(x, w, 1e-6), rms_norm_rows_reference(x, w, 1e-6))
print("checked 5 dtypes")

# A backward over an optional input (a program): DyT with and without its bias, against PyTorch's autograd.
from styled_kernels import dyt_reference, register_dyt  # noqa: E402

dyt = register_dyt("t_parity_interp")
for with_beta in (True, False):
    x, gamma = torch.randn(6, 100, requires_grad=True), torch.randn(100, requires_grad=True)
    beta = torch.randn(100, requires_grad=True) if with_beta else None
    dy = torch.randn(6, 100)
    got = torch.autograd.grad(dyt(x, gamma, beta, 0.7), [x, gamma, *([beta] if with_beta else [])], dy)
    want = torch.autograd.grad(dyt_reference(x, gamma, beta, 0.7), [x, gamma, *([beta] if with_beta else [])], dy)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(dyt(x, gamma, beta, 0.7), dyt_reference(x, gamma, beta, 0.7), atol=1e-5, rtol=1e-4)
print("checked DyT with and without beta")
