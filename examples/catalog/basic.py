"""The example ops: one of each kind the API supports, with inputs and a PyTorch reference.

The demo, the GPU tests, opcheck and the benchmarks all use these. ``register_all(ns)`` registers them
under namespace ``ns`` (each test module uses its own), returning ``{name: CheckCase}``:
the op with its input builder, reference and example shapes, ready for ``opsmith.check``.
"""

from __future__ import annotations

from importlib import resources

import torch

from opsmith import (
    CheckCase,
    Dim,
    DimSize,
    Elementwise,
    Grid,
    InputDecl,
    KernelSpec,
    Numel,
    OutputDecl,
    ReduceDims,
    Reduction,
    SameAs,
    ScalarInput,
    cuda_kernel_op,
    ptx_op,
)

__all__ = ["FLAT", "ROWS", "register_all"]

RELU = r"""
extern "C" __global__ void my_relu(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

# Multi-input, two by-value float scalars, a 64-bit element count, one template per dtype.
AXPBY = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
template <typename T>
__global__ void axpby(const T* x, const T* y, float a, float b, long long n, T* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = T(a * static_cast<float>(x[i]) + b * static_cast<float>(y[i]));
}
"""

# One block per row; rows = numel / N. Shared-memory tree reduction in float.
ROW_REDUCE = r"""
#define FLT_MAX 3.402823466e+38f  // NVRTC has no <cfloat>
extern "C" __global__ void __launch_bounds__(256) row_sum(const float* x, int n, float* out) {
    __shared__ float buf[256];
    const float* row = x + (long long)blockIdx.x * n;
    float acc = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) acc += row[j];
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

extern "C" __global__ void __launch_bounds__(256) row_minmax(const float* x, int n, float* mn, float* mx) {
    __shared__ float lo[256], hi[256];
    const float* row = x + (long long)blockIdx.x * n;
    float a = FLT_MAX, b = -FLT_MAX;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { a = fminf(a, row[j]); b = fmaxf(b, row[j]); }
    lo[threadIdx.x] = a; hi[threadIdx.x] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            lo[threadIdx.x] = fminf(lo[threadIdx.x], lo[threadIdx.x + s]);
            hi[threadIdx.x] = fmaxf(hi[threadIdx.x], hi[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) { mn[blockIdx.x] = lo[0]; mx[blockIdx.x] = hi[0]; }
}

extern "C" __global__ void __launch_bounds__(256) softmax_rows(const float* x, int n, float* y) {
    __shared__ float buf[256];
    const float* row = x + (long long)blockIdx.x * n;
    float* out = y + (long long)blockIdx.x * n;
    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, row[j]);
    buf[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();
    float acc = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) acc += __expf(row[j] - m);
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.f / buf[0];
    for (int j = threadIdx.x; j < n; j += blockDim.x) out[j] = __expf(row[j] - m) * inv;
}
"""

# layout="nd": block (32, 8) tiles (cols, rows); leading (batch) axes fold into grid z.
BIAS2D = r"""
extern "C" __global__ void add_bias_2d(const float* x, const float* bias, int rows, int cols, float* y) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        long long i = ((long long)blockIdx.z * rows + r) * cols + c;
        y[i] = x[i] + bias[c];
    }
}
"""

# Shape-changing: the output is twice as long as the input, one thread per input element.
REPEAT2 = r"""
extern "C" __global__ void repeat2(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = x[i]; y[i + n] = x[i]; }
}
"""


def _rand(*shape: int, device, dtype) -> torch.Tensor:
    return torch.randn(*shape, device=device).to(dtype)


def _one(shape, dtype, device) -> tuple:
    return (_rand(*shape, device=device, dtype=dtype),)


FLAT = ((1000,), (3, 257), (33, 65))  # odd sizes: blocks are never full
ROWS = ((7, 1000), (2, 3, 100), (40, 33))


def register_all(ns: str) -> dict[str, CheckCase]:
    ex: dict[str, CheckCase] = {}
    ex["relu"] = CheckCase(
        cuda_kernel_op(f"{ns}::relu", KernelSpec(
            kernel_source=RELU, kernel_name="my_relu", inputs=[InputDecl("x")],
            outputs=[OutputDecl("y", shape=SameAs("x"))], extras=[Numel("x")],
            geometry=Elementwise(block=(256,), layout="flat"))),
        _one, torch.relu, FLAT)  # fmt: skip

    for dt, cname in ((torch.float32, "float"), (torch.float16, "__half"), (torch.bfloat16, "__nv_bfloat16")):
        tag = str(dt).removeprefix("torch.")
        op = cuda_kernel_op(f"{ns}::axpby_{tag}", KernelSpec(
            kernel_source=AXPBY, kernel_name=f"axpby<{cname}>",
            inputs=[InputDecl("x", shape=("*S",)), InputDecl("y", shape=("*S",)),
                    ScalarInput("a", float), ScalarInput("b", float)],
            outputs=[OutputDecl("out", shape=("*S",))], extras=[Numel("x", dtype="int64")],
            geometry=Elementwise(block=(256,))))  # fmt: skip

        def inputs(shape, dtype, device):
            return _rand(*shape, device=device, dtype=dtype), _rand(*shape, device=device, dtype=dtype), 0.75, -1.5

        ex[f"axpby_{tag}"] = CheckCase(op, inputs, lambda x, y, a, b: (a * x.float() + b * y.float()).to(x.dtype),
                                       ((4096,), (17, 31)), (dt,))  # fmt: skip

    ex["row_sum"] = CheckCase(
        cuda_kernel_op(f"{ns}::row_sum", KernelSpec(
            kernel_source=ROW_REDUCE, kernel_name="row_sum", inputs=[InputDecl("x")],
            outputs=[OutputDecl("out", shape=ReduceDims("x", dims=(-1,)))], extras=[DimSize("x", -1)],
            geometry=Reduction(reduce_dims=(-1,), block_size=256))),
        _one, lambda x: x.sum(-1), ROWS, tol={"atol": 1e-4, "rtol": 1e-4})  # fmt: skip

    ex["row_minmax"] = CheckCase(
        cuda_kernel_op(f"{ns}::row_minmax", KernelSpec(
            kernel_source=ROW_REDUCE, kernel_name="row_minmax", inputs=[InputDecl("x")],
            outputs=[OutputDecl("mn", shape=ReduceDims("x", dims=(-1,), keepdim=True)),
                     OutputDecl("mx", shape=ReduceDims("x", dims=(-1,), keepdim=True))],
            extras=[DimSize("x", -1)], geometry=Reduction(reduce_dims=(-1,), block_size=256))),
        _one, lambda x: (x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)), ROWS)  # fmt: skip

    ex["softmax"] = CheckCase(
        cuda_kernel_op(f"{ns}::softmax", KernelSpec(
            kernel_source=ROW_REDUCE, kernel_name="softmax_rows", inputs=[InputDecl("x")],
            outputs=[OutputDecl("y", shape=SameAs("x"))], extras=[DimSize("x", -1)],
            geometry=Reduction(reduce_dims=(-1,), block_size=256))),
        _one, lambda x: torch.softmax(x, -1), ROWS, tol={"atol": 1e-6, "rtol": 1e-4})  # fmt: skip

    def bias_inputs(shape, dtype, device):
        return _rand(*shape, device=device, dtype=dtype), _rand(shape[-1], device=device, dtype=dtype)

    ex["add_bias_2d"] = CheckCase(
        cuda_kernel_op(f"{ns}::add_bias_2d", KernelSpec(
            kernel_source=BIAS2D, kernel_name="add_bias_2d",
            inputs=[InputDecl("x", shape=("*B", "R", "C")), InputDecl("bias", shape=("C",))],
            outputs=[OutputDecl("y", shape=("*B", "R", "C"))], extras=[Dim("R", name="rows"), Dim("C", name="cols")],
            geometry=Elementwise(block=(32, 8), layout="nd"))),
        bias_inputs, lambda x, b: x + b, ((3, 50, 70), (37, 129)))  # fmt: skip

    # Output twice as long as the input: a size expression (before named dimensions, a meta_fn and an eager_fn).
    repeat2 = cuda_kernel_op(f"{ns}::repeat2", KernelSpec(
        kernel_source=REPEAT2, kernel_name="repeat2", inputs=[InputDecl("x", shape=("*S",))],
        outputs=[OutputDecl("y", shape=("2 * numel(x)",))], extras=[Numel("x")],
        geometry=Grid(grid=("cdiv(numel(x), 256)",), block=(256,))))  # fmt: skip
    ex["repeat2"] = CheckCase(repeat2, _one, lambda x: x.reshape(-1).repeat(2), FLAT)

    ptx = resources.files("examples.catalog.kernels").joinpath("scale.ptx").read_bytes()
    ex["scale_ptx"] = CheckCase(
        ptx_op(f"{ns}::scale_ptx", ptx, "scale_f32",
               inputs=[InputDecl("x", dtype=torch.float32), ScalarInput("alpha", float)],
               outputs=[OutputDecl("y", shape=SameAs("x"))], extras=[Numel("x")], geometry=Elementwise(block=(128,))),
        lambda shape, dtype, device: (*_one(shape, dtype, device), 2.5), lambda x, a: a * x, FLAT)  # fmt: skip
    return ex
