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


SOFTMAX_SRC = r"""
#define NEG_INF __int_as_float(0xff800000)  // -inf, without <math.h> (NVRTC has none)
// Softmax over each row, the row staged in dynamic shared memory (C floats), one block per row; the host sizes
// the shared memory per call from C. Block-wide max and sum through warp shuffles and a static scratch.
__device__ float block_reduce(float v, bool take_max) {
  __shared__ float warp_vals[32];
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffff, v, o);
    v = take_max ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? warp_vals[lane] : (take_max ? NEG_INF : 0.0f);
    for (int o = 16; o > 0; o /= 2) {
      const float w = __shfl_xor_sync(0xffffffff, v, o);
      v = take_max ? fmaxf(v, w) : v + w;
    }
    if (lane == 0) warp_vals[0] = v;
  }
  __syncthreads();
  const float result = warp_vals[0];
  __syncthreads();
  return result;
}

__global__ void softmax_forward_rows(float* out, const float* inp, int N, int C) {
  extern __shared__ float row[];
  if (blockIdx.x >= N) return;  // the grid is N blocks; a guard as llm.c writes one
  const float* x = inp + static_cast<size_t>(blockIdx.x) * C;
  float maxval = NEG_INF;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    row[i] = x[i];
    maxval = fmaxf(maxval, row[i]);
  }
  maxval = block_reduce(maxval, true);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    row[i] = expf(row[i] - maxval);
    sum += row[i];
  }
  sum = block_reduce(sum, false);
  for (int i = threadIdx.x; i < C; i += blockDim.x) out[static_cast<size_t>(blockIdx.x) * C + i] = row[i] / sum;
}
"""


def register_softmax_rows(ns: str) -> ok.Op:
    """llm.c's style with the row in dynamic shared memory: ``shared_mem="C * 4"``, a size expression computed
    per call (rows past 227 KiB of floats are refused before the launch)."""
    return ok.cuda_kernel_op(f"{ns}::softmax_rows", ok.KernelSpec(
        kernel_source=SOFTMAX_SRC, kernel_name="softmax_forward_rows",
        inputs=[ok.InputDecl("inp", shape=("N", "C"), dtype=torch.float32)],
        outputs=[ok.OutputDecl("out", shape=("N", "C"))], extras=[ok.Dim("N"), ok.Dim("C")],
        geometry=ok.Grid(grid=("N",), block=(256,), shared_mem="C * 4")))  # fmt: skip


def register_dyt(ns: str) -> ok.Op:
    """DyT with an optional bias and a backward over it (a program): with beta None, beta gets no gradient and
    its column sum never runs."""
    from styled_triton import column_sum_kernel, dyt_backward_kernel, dyt_forward_kernel

    rows = dict(extras=[ok.Stride(("x", "y"), 0, name="stride"), ok.Dim("N", name="n_cols"),
                        ok.DimSize("x", -1, name="BLOCK_SIZE", bucket="pow2")],
                geometry=ok.Reduction(reduce_dims=(-1,)))  # fmt: skip
    colsum = ok.triton_op(f"{ns}::column_sum", column_sum_kernel, inputs=[ok.InputDecl("x", shape=("M", "N"))],
                          outputs=[ok.OutputDecl("out", shape=("N",), init=0)],  # zero rows sum to 0
                          extras=[ok.Dim("M", name="n_rows"), ok.Stride("x", 0, name="stride"), ok.Dim("N", name="n_cols")],
                          geometry=ok.Grid(grid=("cdiv(N, BLOCK_SIZE)",)),
                          autotune=ok.Autotune([ok.Config({"BLOCK_SIZE": 128})]))  # fmt: skip
    backward_rows = dict(rows, extras=[ok.Stride(("dy", "x", "dx", "dyt"), 0, name="stride"), ok.Dim("N", name="n_cols"),
                                       ok.DimSize("x", -1, name="BLOCK_SIZE", bucket="pow2")])  # fmt: skip
    bwd = ok.triton_op(f"{ns}::dyt_backward", dyt_backward_kernel,
                       inputs=[ok.InputDecl("dy", shape=("M", "N")), ok.InputDecl("x", shape=("M", "N")),
                               ok.InputDecl("gamma", shape=("N",), dtype="x"), ok.ScalarInput("alpha", float)],
                       outputs=[ok.OutputDecl("dx", shape=("M", "N")), ok.OutputDecl("dyt", shape=("M", "N"))],
                       **backward_rows)  # fmt: skip
    program = (ok.Step(bwd, args=("grad_y", "x", "gamma", "alpha"), outputs=("dx", "dyt")),
               ok.Step(colsum, args=("dyt",), outputs=("dgamma",)),
               ok.Step(colsum, args=("grad_y",), outputs=("dbeta",)))  # fmt: skip
    return ok.triton_op(f"{ns}::dyt", dyt_forward_kernel,
                        inputs=[ok.InputDecl("x", shape=("M", "N")), ok.InputDecl("gamma", shape=("N",), dtype="x"),
                                ok.InputDecl("beta", shape=("N",), dtype="x", optional=True),
                                ok.ScalarInput("alpha", float)],
                        outputs=[ok.OutputDecl("y", shape=("M", "N"))], **rows,
                        backward=ok.Backward(program, args=("grad_y", "x", "gamma", "alpha"),
                                             grads=("x", "gamma", "beta"), returns=("dx", "dgamma", "dbeta")))  # fmt: skip


def dyt_reference(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor | None, alpha: float) -> torch.Tensor:
    y = gamma.float() * torch.tanh(alpha * x.float())
    return (y + beta.float() if beta is not None else y).to(x.dtype)
