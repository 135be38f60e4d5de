"""Example ops with tuning configs: CUDA C++ (template and define configs, an in-place op) and Triton.

``register_tuned(ns)`` returns ``{name: CheckCase}`` like ``catalog.register_all``. The Triton examples are
registered only when Triton is importable, so the core examples never need it.
"""

from __future__ import annotations

import torch

from opsmith import (
    Autotune,
    CheckCase,
    Config,
    DimSize,
    Elementwise,
    Grid,
    InputDecl,
    KernelSpec,
    Numel,
    OutputDecl,
    Reduction,
    SameAs,
    ScalarInput,
    TuneDim,
    cuda_kernel_op,
)

from .basic import FLAT, ROWS, _one, _rand

__all__ = ["BLOCKS", "register_tuned", "triton_available"]

# Row softmax with a compile-time block size: three passes over the row in BLOCK-thread strides, block
# reductions in shared memory. Short rows want small blocks, long rows large ones: a real tuning problem.
SOFTMAX_T = r"""
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax_t(const float* x, int n, float* y) {
    __shared__ float buf[BLOCK];
    const float* row = x + (long long)blockIdx.x * n;
    float* out = y + (long long)blockIdx.x * n;
    float m = -3.402823466e+38f;
    for (int j = threadIdx.x; j < n; j += BLOCK) m = fmaxf(m, row[j]);
    buf[threadIdx.x] = m;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();
    float acc = 0.f;
    for (int j = threadIdx.x; j < n; j += BLOCK) acc += __expf(row[j] - m);
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.f / buf[0];
    for (int j = threadIdx.x; j < n; j += BLOCK) out[j] = __expf(row[j] - m) * inv;
}
"""

# In place, tuned over the block size through a define: x += alpha * y.
AXPY_INPLACE = r"""
extern "C" __global__ void __launch_bounds__(BLOCK) axpy_(float* x, const float* y, float alpha, long long n) {
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) x[i] += alpha * y[i];
}
"""

BLOCKS = (64, 128, 256, 512, 1024)


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


TUNED_ROWS = ((64, 1000), (3, 5, 4099), *ROWS[2:])  # a row longer than every block: the looped path


def _axpy_inputs(shape, dtype, device) -> tuple:
    return _rand(*shape, device=device, dtype=dtype), _rand(*shape, device=device, dtype=dtype), -0.5


def _axpy_ref(x: torch.Tensor, y: torch.Tensor, a: float) -> None:
    x.add_(a * y)


def register_tuned(ns: str, only: tuple[str, ...] | None = None) -> dict[str, CheckCase]:
    """The tuned examples under ``ns``; ``only``: just the Triton ones named (for cold-start timing)."""
    if only is not None:
        return _register_triton(ns, only)
    ex: dict[str, CheckCase] = {}
    ex["softmax_tuned"] = CheckCase(
        cuda_kernel_op(f"{ns}::softmax_tuned", KernelSpec(
            kernel_source=SOFTMAX_T, kernel_name="softmax_t<{BLOCK}>", inputs=[InputDecl("x", torch.float32)],
            outputs=[OutputDecl("y", shape=SameAs("x"))], extras=[DimSize("x", -1)],
            geometry=Reduction(reduce_dims=(-1,), block_size="BLOCK"),
            autotune=Autotune([Config({"BLOCK": b}) for b in BLOCKS], key=[TuneDim("x", -1)], default=2))),
        _one, lambda x: torch.softmax(x, -1), TUNED_ROWS, tol={"atol": 1e-6, "rtol": 1e-4})  # fmt: skip
    ex["axpy_inplace"] = CheckCase(
        cuda_kernel_op(f"{ns}::axpy_inplace", KernelSpec(
            kernel_source=AXPY_INPLACE, kernel_name="axpy_",
            inputs=[InputDecl("x", mutates=True), InputDecl("y"), ScalarInput("alpha", float)], outputs=[],
            extras=[Numel("x", "int64")], geometry=Elementwise(block=("BLOCK",)),
            autotune=Autotune([Config({"BLOCK": b}) for b in (128, 256, 512)]))),
        _axpy_inputs, _axpy_ref, ((5000,), (7, 300)))  # fmt: skip
    if triton_available():
        ex.update(_register_triton(ns))
    return ex


def _register_triton(ns: str, only: tuple[str, ...] | None = None) -> dict[str, CheckCase]:
    from opsmith import triton_op

    from .kernels import triton_kernels as tk

    def want(name: str) -> bool:
        return only is None or name in only

    ex: dict[str, CheckCase] = {}
    if want("relu_tt"):
        ex["relu_tt"] = CheckCase(
            triton_op(f"{ns}::relu_tt", tk.relu_kernel, inputs=[InputDecl("x")], outputs=[OutputDecl("y", SameAs("x"))],
                      extras=[Numel("x")], geometry=Elementwise(block=("BLOCK",))),
            _one, torch.relu, FLAT, (torch.float32, torch.float16, torch.bfloat16))  # fmt: skip
    if want("softmax_tt"):
        ex["softmax_tt"] = CheckCase(
            triton_op(f"{ns}::softmax_tt", tk.softmax_kernel, inputs=[InputDecl("x")], outputs=[OutputDecl("y", SameAs("x"))],
                      extras=[DimSize("x", -1)], geometry=Reduction(reduce_dims=(-1,)),
                      autotune=Autotune([Config({"BLOCK": b}, num_warps=w) for b in (256, 1024, 4096) for w in (4, 8)],
                                        key=[TuneDim("x", -1)], default=2)),
            _one, lambda x: torch.softmax(x.float(), -1).to(x.dtype), TUNED_ROWS,
            (torch.float32, torch.float16, torch.bfloat16),
            tol={"atol": 1e-5, "rtol": 1e-4})  # fmt: skip
    if want("axpy_tt"):
        ex["axpy_tt"] = CheckCase(
            triton_op(f"{ns}::axpy_tt", tk.axpy_kernel,
                      inputs=[InputDecl("x", mutates=True), InputDecl("y"), ScalarInput("alpha", float)], outputs=[],
                      extras=[Numel("x")],
                      geometry=Grid(grid=("cdiv(numel(x), BLOCK)",)),
                      autotune=Autotune([Config({"BLOCK": b}) for b in (256, 1024)])),
            _axpy_inputs, _axpy_ref, ((5000,), (7, 300)))  # fmt: skip
    return ex
