"""Kernels from public projects, with their source text as published, declared for opsmith unchanged.

- llm.c (github.com/karpathy/llm.c, MIT License, Copyright (c) 2024 Andrej Karpathy):
  ``gelu_forward_kernel1`` from dev/cuda/gelu_forward.cu at commit 9141e04 (outputs first, C++ linkage),
  and ``norm_kernel1`` from dev/cuda/global_norm.cu at commit f1e2ace (a template over the data type,
  cooperative groups, an atomic accumulator the caller zeroes).
- Liger-Kernel (github.com/linkedin/Liger-Kernel, BSD 2-Clause License, Copyright 2024 LinkedIn
  Corporation): ``_swiglu_forward_kernel`` and its ``silu`` from src/liger_kernel/ops/swiglu.py at commit
  ead96b6 (a row stride, a runtime scalar, the row length and block size as ``tl.constexpr``).

Nothing in the kernels is edited: opsmith binds the declaration to their parameters by name. What the files
take from their own headers is supplied beside them: ``M_PI`` (which the llm.c file says to take from
<math.h>) as a define, cooperative groups from the CUDA headers.
"""

from __future__ import annotations

import torch

import opsmith as ok

GELU_SRC = r"""
#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

// elementwise ops are nice and ez
__global__ void gelu_forward_kernel1(float* out, const float* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
    }
}
"""

NORM_SRC = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

template<class T>
__global__ void norm_kernel1(float* out, const T* data, size_t count) {
    // we want as few atomics as possible, so each block tries to do
    // the maximum amount of work (so no fixed chunk, but instead iterating
    // until we run out of data), and then we reduce inside the block
    // and finally have just one atomic per block.
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

    __shared__ float block_result[32];

    // out will be updated atomically from all thread blocks
    size_t index = threadIdx.x + blockDim.x * blockIdx.x;
    size_t grid_width = blockDim.x * gridDim.x;
    float accumulator = 0.f;
    for(size_t i = index; i < count; i += grid_width) {
        accumulator += (float)data[i] * (float)data[i];
    }
    // warp-level reduce
    float warp_result = cg::reduce(warp, accumulator, cg::plus<float>{});
    block_result[warp.meta_group_rank()] = warp_result;
    block.sync();
    if(warp.meta_group_rank() == 0) {
        float gather = warp.thread_rank() < warp.meta_group_size() ? block_result[warp.thread_rank()] : 0.f;
        float block_sum = cg::reduce(warp, gather, cg::plus<float>{});
        if(warp.thread_rank() ==  0) {
            atomicAdd(out, block_sum);
        }
    }
}
"""


def gelu_reference(inp: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(inp, approximate="tanh")


def register_gelu(ns: str) -> ok.Op:
    """out, inp, N: bound by name (``N`` names the extra); M_PI as <math.h> defines it."""
    return ok.cuda_kernel_op(f"{ns}::llmc_gelu", ok.KernelSpec(
        kernel_source=GELU_SRC, kernel_name="gelu_forward_kernel1", inputs=[ok.InputDecl("inp")],
        outputs=[ok.OutputDecl("out", ok.SameAs("inp"))], extras=[ok.Numel("inp", name="N")],
        geometry=ok.Elementwise(block=(128,)), defines={"M_PI": "3.14159265358979323846"}))  # fmt: skip


def _norm_grid(inputs: dict, outputs: dict) -> tuple:
    """Each block strides over the data: enough blocks to fill the GPU, never more than the data needs."""
    n = inputs["data"].numel()
    return ((max(1, min(132 * 4, (n + 511) // 512)),), (512,))


def register_norm(ns: str) -> ok.Op:
    """``norm_kernel1<T>``: one instantiation per data dtype, out (a float accumulator the caller zeroes)
    written in place."""
    return ok.cuda_kernel_op(f"{ns}::llmc_norm", ok.KernelSpec(
        kernel_source=NORM_SRC, kernel_name="norm_kernel1<{T_data}>",
        inputs=[ok.InputDecl("out", shape=(1,), mutates=True), ok.InputDecl("data")], outputs=[],
        extras=[ok.Numel("data", name="count")], geometry=ok.Custom(_norm_grid), index_dtype="int64"))  # fmt: skip


def norm_reference(out: torch.Tensor, data: torch.Tensor) -> None:
    out.add_(data.double().pow(2).sum().to(out.dtype))


def register_swiglu(ns: str) -> ok.Op:
    """a_ptr, b_ptr, c_ptr, stride, gate_multiplier, n_cols, BLOCK_SIZE: every name bound; one stride for
    the three tensors; the row length and its power-of-two block compiled in per value."""
    from swiglu_liger import _swiglu_forward_kernel

    rows = ok.Reduction(reduce_dims=(-1,))  # one program per row
    return ok.triton_op(f"{ns}::liger_swiglu", _swiglu_forward_kernel,
                        inputs=[ok.InputDecl("a", shape=("M", "N")), ok.InputDecl("b", shape=("M", "N")),
                                ok.ScalarInput("gate_multiplier", float)],
                        outputs=[ok.OutputDecl("c", shape=("M", "N"))],
                        extras=[ok.Stride(("a", "b", "c"), 0, name="stride"), ok.Dim("N", name="n_cols"),
                                ok.DimSize("a", -1, name="BLOCK_SIZE", bucket="pow2")],
                        geometry=rows)  # fmt: skip


def swiglu_reference(a: torch.Tensor, b: torch.Tensor, gate_multiplier: float) -> torch.Tensor:
    a32 = a.float() * gate_multiplier
    return (a32 * torch.sigmoid(a32)).to(b.dtype) * b
