"""Example ops whose shapes only named dimensions can state: a matmul, an embedding lookup, and a vectorized
kernel with preconditions.

Before named dimensions each needed a Python ``meta_fn`` (no native library, no derived sharding, no dtype
guards while tracing) or read out of bounds on a short input. ``register_shapes(ns)`` returns
``{name: CheckCase}`` like ``catalog.register_all``; the Triton matmul only where Triton is importable.
"""

from __future__ import annotations

import torch

from opsmith import (
    Autotune,
    CheckCase,
    Config,
    Dim,
    Divisible,
    Elementwise,
    Grid,
    InputDecl,
    KernelSpec,
    Numel,
    OutputDecl,
    ScalarInput,
    Stride,
    TuneDim,
    cuda_kernel_op,
)

from .basic import _rand

__all__ = ["register_shapes"]

# One thread per output element: out[r, c] = table[ids[r], c]. An id outside [0, V) would read another row or
# past the table, so its row is written as NaN instead (PyTorch's embedding asserts on the device; a kernel
# cannot raise, and a NaN row is loud where a silent wrong row is not).
EMBEDDING = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
template <typename T>
__global__ void embedding(const long long* ids, const T* table, long long rows, long long V, int C, T* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * C) return;
    long long r = i / C, c = i - r * C;
    long long id = ids[r];
    out[i] = (id >= 0 && id < V) ? table[id * C + c] : T(__int_as_float(0x7fc00000));
}
"""

# 128-bit loads and stores, four floats per thread and no scalar tail: the pointers must be 16-byte aligned
# and n a multiple of 4, which the declaration requires (align=16, Divisible). Without them a view like x[1:]
# faults (misaligned address) and n = 1,001 reads and writes 3 floats past the end.
AXPBY_VEC4 = r"""
extern "C" __global__ void axpby_vec4(const float* x, const float* y, float a, float b, long long n, float* out) {
    long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i >= n) return;
    float4 u = *reinterpret_cast<const float4*>(x + i);
    float4 v = *reinterpret_cast<const float4*>(y + i);
    *reinterpret_cast<float4*>(out + i) =
        make_float4(a * u.x + b * v.x, a * u.y + b * v.y, a * u.z + b * v.z, a * u.w + b * v.w);
}
"""

_LOWP = (torch.float32, torch.float16, torch.bfloat16)


def register_shapes(ns: str) -> dict[str, CheckCase]:
    ex: dict[str, CheckCase] = {}
    for dt, cname in zip(_LOWP, ("float", "__half", "__nv_bfloat16"), strict=True):
        tag = str(dt).removeprefix("torch.")
        op = cuda_kernel_op(f"{ns}::embedding_{tag}", KernelSpec(
            kernel_source=EMBEDDING, kernel_name=f"embedding<{cname}>",
            inputs=[InputDecl("ids", dtype=torch.int64, shape=("*B",)), InputDecl("table", shape=("V", "C"))],
            outputs=[OutputDecl("out", shape=("*B", "C"))],
            extras=[Numel("ids", name="rows"), Dim("V"), Dim("C")],
            geometry=Elementwise(block=(256,))))  # fmt: skip

        def lookup(shape, dtype, device):  # shape: (*B, V, C)
            *b, v, c = shape
            return torch.randint(0, v, tuple(b), device=device), _rand(v, c, device=device, dtype=dtype)

        ex[f"embedding_{tag}"] = CheckCase(op, lookup, lambda ids, table: table[ids],
                                           ((4, 9, 50, 33), (7, 1000, 64)), (dt,))  # fmt: skip

    vec4 = cuda_kernel_op(f"{ns}::axpby_vec4", KernelSpec(
        kernel_source=AXPBY_VEC4, kernel_name="axpby_vec4",
        inputs=[InputDecl("x", shape=("*S",), align=16), InputDecl("y", shape=("*S",), align=16),
                ScalarInput("a", float), ScalarInput("b", float)],
        outputs=[OutputDecl("out", shape=("*S",))], extras=[Numel("x", name="n")],
        geometry=Grid(grid=("cdiv(numel(x), 1024)",), block=(256,)),
        requires=[Divisible("numel(x)", 4, why="each thread loads and stores one float4, with no scalar tail")]))  # fmt: skip

    def vec_inputs(shape, dtype, device):  # the last axis rounded up to a multiple of 4
        shape = (*shape[:-1], -(-shape[-1] // 4) * 4)
        return _rand(*shape, device=device, dtype=dtype), _rand(*shape, device=device, dtype=dtype), 0.75, -1.5

    ex["axpby_vec4"] = CheckCase(vec4, vec_inputs, lambda x, y, a, b: a * x + b * y, ((4096,), (17, 36)))
    ex.update(_register_matmul(ns))
    return ex


def _register_matmul(ns: str) -> dict[str, CheckCase]:
    from .tuned import triton_available

    if not triton_available():
        return {}
    from opsmith import triton_op

    from .kernels.matmul_triton import matmul_kernel

    # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): the tutorial's fp16 configs for Hopper-class GPUs, plus a
    # small tile for skinny problems. Tuned per (M, N, K) bucket.
    tiles = [(128, 256, 64, 8, 3), (128, 128, 32, 4, 4), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4), (32, 64, 32, 4, 5)]
    configs = [Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w, num_stages=s)
               for m, n, k, w, s in tiles]  # fmt: skip
    op = triton_op(
        f"{ns}::matmul", matmul_kernel,
        inputs=[InputDecl("a", shape=("M", "K")), InputDecl("b", dtype="a", shape=("K", "N"))],
        outputs=[OutputDecl("c", shape=("M", "N"), dtype_from="a")],
        extras=[Dim("M"), Dim("N"), Dim("K"),
                Stride("a", 0, name="stride_am"), Stride("a", 1, name="stride_ak"),
                Stride("b", 0, name="stride_bk"), Stride("b", 1, name="stride_bn"),
                Stride("c", 0, name="stride_cm"), Stride("c", 1, name="stride_cn")],
        geometry=Grid(grid=("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)",)),
        autotune=Autotune(configs, key=[TuneDim("a", 0), TuneDim("b", 1), TuneDim("a", 1)], default=1),
    )  # fmt: skip

    def operands(shape, dtype, device):  # shape: (M, K, N); b is a transposed (N, K) weight, read in place
        m, k, n = shape
        return _rand(m, k, device=device, dtype=dtype), _rand(n, k, device=device, dtype=dtype).t()

    ref = lambda a, b: (a.float() @ b.float()).to(a.dtype)  # noqa: E731
    return {"matmul": CheckCase(op, operands, ref, ((64, 96, 80), (129, 257, 65)), (torch.float16, torch.bfloat16),
                                lowp_tol={"atol": 2e-2, "rtol": 2e-2})}  # fmt: skip
