"""A deliberately broken op for the sanitizer test: its kernel has no bounds check, so the last block reads
and writes past the end of its tensors. ``opsmith check --sanitize planted_oob:CASE`` must catch it."""

import torch

import opsmith as ok

OOB = r"""
extern "C" __global__ void oob_scale(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = 2.f * x[i];  // planted bug: no `if (i < n)`, so elements n .. grid end are touched
}
"""


def CASE() -> ok.CheckCase:
    op = ok.cuda_kernel_op("t_planted::oob_scale", ok.KernelSpec(
        kernel_source=OOB, kernel_name="oob_scale", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,))))  # fmt: skip
    return ok.CheckCase(op, lambda shape, dtype, device: (torch.randn(shape, device=device, dtype=dtype),),
                        lambda x: 2 * x, shapes=[(1000,)])  # fmt: skip


def RELU() -> ok.CheckCase:
    """A correct op, for the clean run of every tool."""
    from examples.catalog.basic import register_all

    return register_all("t_sanitize_clean")["relu"]
