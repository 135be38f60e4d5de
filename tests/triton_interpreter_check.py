"""Run by test_triton_cpu.py with TRITON_INTERPRET=1: every Triton example on CPU tensors, checked."""

import torch
import triton
import triton.language as tl

import opsmith as ok
from examples.catalog.shapes import register_shapes
from examples.catalog.tuned import register_tuned


@triton.jit
def row_stats_kernel(x_ptr, mean_ptr, rstd_ptr, n, BLOCK: tl.constexpr):
    """Float32 statistics of a row of any dtype: what a layer norm keeps for its backward."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    mean = tl.sum(x, 0) / n
    d = tl.where(offs < n, x - mean, 0.0)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(tl.sum(d * d, 0) / n + 1e-5))


# OutputDecl(dtype=...): float32 outputs of a bf16/fp16 input (Triton types pointers per call, so only the
# declaration can say it).
stats = ok.triton_op("t_interp::row_stats", row_stats_kernel, inputs=[ok.InputDecl("x", shape=("*B", "C"))],
                     outputs=[ok.OutputDecl("mean", shape=("*B",), dtype=torch.float32),
                              ok.OutputDecl("rstd", shape=("*B",), dtype=torch.float32)],
                     extras=[ok.Dim("C", name="n"), ok.DimSize("x", -1, name="BLOCK", bucket="pow2")],
                     geometry=ok.Reduction(reduce_dims=(-1,)))  # fmt: skip


def _stats(x):
    x = x.float()
    return x.mean(-1), torch.rsqrt(x.var(-1, unbiased=False) + 1e-5)


ex = {**register_tuned("t_interp"), **{f"{k}_tt": v for k, v in register_shapes("t_interp").items() if k == "matmul"},
      "row_stats_tt": ok.CheckCase(stats, lambda s, dt, dev: (torch.randn(s, device=dev).to(dt),), _stats,
                                   ((7, 100), (2, 3, 33)), (torch.bfloat16, torch.float16))}  # fmt: skip
n = 0
torch.manual_seed(0)
for name, e in ex.items():
    if not name.endswith("_tt"):
        continue
    for dt in e.dtypes:
        if name == "matmul_tt" and dt == torch.bfloat16:
            # Triton's interpreter computes bf16 tl.dot wrongly (3.9: errors of 1e11 for the bare kernel, no
            # opsmith involved); the GPU tests check bf16.
            continue
        for args in e.samples(torch.device("cpu"), dt):
            ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            got, want = e.op(*args), e.reference(*ref_args)
            if name == "row_stats_tt":
                assert all(g.dtype == torch.float32 for g in got), [g.dtype for g in got]
            if got is None:  # in place: compare the mutated input
                got, want = args[0], ref_args[0]
            tol = {"atol": 2e-2, "rtol": 2e-2} if dt != torch.float32 else {"atol": 1e-5, "rtol": 1e-4}
            torch.testing.assert_close(got, want, **tol, msg=lambda m, n=name, d=dt: f"{n} {d}: {m}")
            n += 1
print(f"checked {n} cases")
