"""A small model with one opsmith op of each flavor: CUDA C++ (a row bias), PTX (a scale) and Triton (a relu).

    y = relu_tt(scale_ptx(add_bias(x @ W, bias), 0.5))

``register()`` declares the ops (once per process); ``Model`` calls them like any torch op.
"""

from __future__ import annotations

from importlib import resources

import torch

import opsmith as ok

NS = "deploy"

BIAS = r"""
extern "C" __global__ void add_bias(const float* x, const float* bias, int rows, int cols, float* y) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) y[r * cols + c] = x[r * cols + c] + bias[c];
}
"""


def register() -> list[ok.Op]:
    from examples.catalog.kernels.triton_kernels import relu_kernel

    add_bias = ok.cuda_kernel_op(f"{NS}::add_bias", ok.KernelSpec(
        kernel_source=BIAS, kernel_name="add_bias",
        inputs=[ok.InputDecl("x", torch.float32, shape=("R", "C")), ok.InputDecl("bias", torch.float32, shape=("C",))],
        outputs=[ok.OutputDecl("y", shape=("R", "C"))], extras=[ok.Dim("R", name="rows"), ok.Dim("C", name="cols")],
        geometry=ok.Elementwise(block=(32, 8), layout="nd")))  # fmt: skip
    ptx = resources.files("examples.catalog.kernels").joinpath("scale.ptx").read_bytes()
    scale = ok.ptx_op(f"{NS}::scale", ptx, "scale_f32",
                      inputs=[ok.InputDecl("x", dtype=torch.float32), ok.ScalarInput("alpha", float)],
                      outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))], extras=[ok.Numel("x")],
                      geometry=ok.Elementwise(block=(128,)))  # fmt: skip
    relu = ok.triton_op(f"{NS}::relu", relu_kernel, inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Numel("x")], geometry=ok.Elementwise(block=("BLOCK",)))  # fmt: skip
    return [add_bias, scale, relu]


class Model(torch.nn.Module):
    def __init__(self, d_in: int = 256, d_out: int = 512) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(d_in, d_out, generator=g) / d_in**0.5)
        self.bias = torch.nn.Parameter(torch.randn(d_out, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.ops.deploy.add_bias(x @ self.weight, self.bias)
        return torch.ops.deploy.relu(torch.ops.deploy.scale(h, 0.5))
