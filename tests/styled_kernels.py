"""Kernels written for these tests in the styles of public projects, declared for opsmith as they stand (this
file's text is opsmith's own; the projects' kernels themselves are used from the packages that ship them, in
``register_liger_swiglu``):

- llm.c's style (github.com/karpathy/llm.c, dev/cuda): outputs first, C++ linkage, sizes named ``N`` and
  ``count``, a constant the file takes from ``<math.h>``; a template over the data type with cooperative
  groups and one atomic per block into an accumulator the caller zeroes.
- Liger-Kernel's style (github.com/linkedin/Liger-Kernel, src/liger_kernel/ops): a Triton kernel over rows with
  one row stride for every tensor, a runtime scalar, the row length and its power-of-two block as constexprs.

opsmith binds the declaration to the kernels' parameters by name. What such a file takes from its headers is
supplied beside it: ``M_PI`` as a define, cooperative groups from the CUDA headers.
"""

from __future__ import annotations

import torch

import opsmith as ok

GELU_SRC = r"""
#define SQRT_2_OVER_PI sqrtf(2.0f / M_PI)

// GELU with the tanh approximation, one element per thread
__global__ void gelu_tanh_forward(float* out, const float* inp, int N) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N) return;
    const float x = inp[idx];
    const float inner = SQRT_2_OVER_PI * fmaf(0.044715f * x, x * x, x);
    out[idx] = 0.5f * x * (1.0f + tanhf(inner));
}
"""

NORM_SRC = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

// out += sum(data^2): a grid-stride loop per thread, a warp-level reduction, the warps' sums reduced by the
// first warp, and one atomic per block (the caller zeroes out first).
template <typename T>
__global__ void sumsq_accumulate(float* out, const T* data, size_t count) {
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float per_warp[32];

    float local = 0.0f;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        const float v = static_cast<float>(data[i]);
        local = fmaf(v, v, local);
    }
    const float warp_sum = cg::reduce(warp, local, cg::plus<float>());
    if (warp.thread_rank() == 0) per_warp[warp.meta_group_rank()] = warp_sum;
    block.sync();
    if (warp.meta_group_rank() != 0) return;
    const float mine = warp.thread_rank() < warp.meta_group_size() ? per_warp[warp.thread_rank()] : 0.0f;
    const float block_sum = cg::reduce(warp, mine, cg::plus<float>());
    if (warp.thread_rank() == 0) atomicAdd(out, block_sum);
}
"""


def gelu_reference(inp: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(inp, approximate="tanh")


def register_gelu(ns: str) -> ok.Op:
    """out, inp, N: bound by name (``N`` names the extra); M_PI as <math.h> defines it."""
    return ok.cuda_kernel_op(f"{ns}::llmc_gelu", ok.KernelSpec(
        kernel_source=GELU_SRC, kernel_name="gelu_tanh_forward", inputs=[ok.InputDecl("inp")],
        outputs=[ok.OutputDecl("out", ok.SameAs("inp"))], extras=[ok.Numel("inp", name="N")],
        geometry=ok.Elementwise(block=(128,)), defines={"M_PI": "3.14159265358979323846"}))  # fmt: skip


def _norm_grid(inputs: dict, outputs: dict) -> tuple:
    """Each block strides over the data: enough blocks to fill the GPU, never more than the data needs."""
    n = inputs["data"].numel()
    return ((max(1, min(132 * 4, (n + 511) // 512)),), (512,))


def register_norm(ns: str) -> ok.Op:
    """``sumsq_accumulate<T>``: one instantiation per data dtype, out (a float accumulator the caller zeroes)
    written in place."""
    return ok.cuda_kernel_op(f"{ns}::llmc_norm", ok.KernelSpec(
        kernel_source=NORM_SRC, kernel_name="sumsq_accumulate<{T_data}>",
        inputs=[ok.InputDecl("out", shape=(1,), mutates=True), ok.InputDecl("data")], outputs=[],
        extras=[ok.Numel("data", name="count")], geometry=ok.Custom(_norm_grid), index_dtype="int64"))  # fmt: skip


def norm_reference(out: torch.Tensor, data: torch.Tensor) -> None:
    out.add_(data.double().pow(2).sum().to(out.dtype))


_SWIGLU_DECL = dict(
    inputs=[ok.InputDecl("a", shape=("M", "N")), ok.InputDecl("b", shape=("M", "N")), ok.ScalarInput("gate_multiplier", float)],
    outputs=[ok.OutputDecl("c", shape=("M", "N"))],
    extras=[ok.Stride(("a", "b", "c"), 0, name="stride"), ok.Dim("N", name="n_cols"),
            ok.DimSize("a", -1, name="BLOCK_SIZE", bucket="pow2")],
    geometry=ok.Reduction(reduce_dims=(-1,)),  # one program per row
)  # fmt: skip


def register_swiglu(ns: str) -> ok.Op:
    """a_ptr, b_ptr, c_ptr, stride, gate_multiplier, n_cols, BLOCK_SIZE: every name bound; one stride for
    the three tensors; the row length and its power-of-two block compiled in per value."""
    from styled_triton import swiglu_rows_kernel

    return ok.triton_op(f"{ns}::liger_style_swiglu", swiglu_rows_kernel, **_SWIGLU_DECL)


def register_liger_swiglu(ns: str) -> ok.Op:
    """Liger-Kernel's own SwiGLU forward kernel, from the installed ``liger-kernel`` package (a test extra),
    declared the same way: its signature is the one ``swiglu_rows_kernel`` copies the style of."""
    from liger_kernel.ops.swiglu import _swiglu_forward_kernel

    return ok.triton_op(f"{ns}::liger_swiglu", _swiglu_forward_kernel, **_SWIGLU_DECL)


def swiglu_reference(a: torch.Tensor, b: torch.Tensor, gate_multiplier: float) -> torch.Tensor:
    a32 = a.float() * gate_multiplier
    return (a32 * torch.sigmoid(a32)).to(b.dtype) * b


def register_seeded_dropout(ns: str) -> ok.Op:
    """A ``seed`` ScalarInput of any 64-bit value: compiled as i32 or i64 by the call's value, as Triton's own
    launcher does (a seed past 2^31 is its own specialization)."""
    from styled_triton import seeded_dropout_kernel

    return ok.triton_op(f"{ns}::seeded_dropout", seeded_dropout_kernel,
                        inputs=[ok.InputDecl("x"), ok.ScalarInput("p", float), ok.ScalarInput("seed", int)],
                        outputs=[ok.OutputDecl("out", ok.SameAs("x"))], extras=[ok.Numel("x", name="n_elements")],
                        geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK_SIZE)",)),
                        autotune=ok.Autotune([ok.Config({"BLOCK_SIZE": 1024})]))  # fmt: skip


def seeded_dropout_reference(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """Triton's own launch of the same kernel: the Philox stream is Triton's, so it is the reference."""
    from styled_triton import seeded_dropout_kernel

    out = torch.full_like(x, float("nan"))
    xc = x.contiguous()
    seeded_dropout_kernel[(-(-xc.numel() // 1024),)](xc, out, xc.numel(), p, seed, BLOCK_SIZE=1024)
    return out


def register_rms_norm_rows(ns: str) -> ok.Op:
    """``X_dtype`` a constexpr taking the Triton dtype of ``x`` per call (``DtypeOf``): one compile per dtype."""
    from styled_triton import rms_norm_rows_kernel

    return ok.triton_op(f"{ns}::rms_norm_rows", rms_norm_rows_kernel,
                        inputs=[ok.InputDecl("x", shape=("M", "N")), ok.InputDecl("w", shape=("N",), dtype="x"),
                                ok.ScalarInput("eps", float)],
                        outputs=[ok.OutputDecl("y", shape=("M", "N"))],
                        extras=[ok.Stride(("x", "y"), 0, name="stride"), ok.Dim("N", name="n_cols"),
                                ok.DimSize("x", -1, name="BLOCK_SIZE", bucket="pow2")],
                        geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"X_dtype": ok.DtypeOf("x")})  # fmt: skip


def rms_norm_rows_reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    normed = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (normed.float() * w.float()).to(x.dtype)
