"""Kernels for the analysis table (test_analysis_table_cpu.py, issue 61, item 5): each pattern a published kernel
uses to address its tensors, written correctly, and the same pattern with one planted mistake. Triton kernels here;
CUDA C++ sources as strings (``CPP``: name -> source, each defining ``k``)."""

import triton
import triton.language as tl

__all__ = ["CPP", "alias_rows", "alias_rows_wrong", "helper_rows", "helper_rows_wrong", "loop_rows",
           "loop_rows_wrong", "scalar_loop_rows", "two_d_rows", "two_d_rows_wrong", "copy_desc", "copy_block_ptr",
           "while_rows", "while_rows_wrong"]  # fmt: skip


@triton.jit
def _row_ptr(base, row, stride):
    return base + row * stride


@triton.jit
def helper_rows(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """Row addresses made by a @triton.jit helper."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    v = tl.load(_row_ptr(x_ptr, row, stride_x) + c, mask=c < N)
    tl.store(_row_ptr(y_ptr, row, stride_y) + c, v * 2, mask=c < N)


@triton.jit
def helper_rows_wrong(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """The helper given x's stride for y (planted)."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    v = tl.load(_row_ptr(x_ptr, row, stride_x) + c, mask=c < N)
    tl.store(_row_ptr(y_ptr, row, stride_x) + c, v * 2, mask=c < N)


@triton.jit
def alias_rows(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """Pointers moved in place (``x_ptr += row * stride_x``), as Liger's kernels do."""
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * stride_x
    y_ptr += row * stride_y
    c = tl.arange(0, BLOCK)
    tl.store(y_ptr + c, tl.load(x_ptr + c, mask=c < N) + 1, mask=c < N)


@triton.jit
def alias_rows_wrong(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """y moved by x's stride (planted)."""
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * stride_x
    y_ptr += row * stride_x
    c = tl.arange(0, BLOCK)
    tl.store(y_ptr + c, tl.load(x_ptr + c, mask=c < N) + 1, mask=c < N)


@triton.jit
def loop_rows(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """A row longer than the block, walked in a loop (Liger's multi-block kernels)."""
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, N, BLOCK):
        c = start + tl.arange(0, BLOCK)
        tl.store(y_ptr + row * stride_y + c, tl.load(x_ptr + row * stride_x + c, mask=c < N) * 3, mask=c < N)


@triton.jit
def loop_rows_wrong(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """The loop with no mask: N bounds the loop only, the last block reads past the row (planted)."""
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, N, BLOCK):
        c = start + tl.arange(0, BLOCK)
        tl.store(y_ptr + row * stride_y + c, tl.load(x_ptr + row * stride_x + c) * 3)


@triton.jit
def scalar_loop_rows(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """One element per step: N bounds the loop alone, and every access is below it (no mask needed)."""
    row = tl.program_id(0).to(tl.int64)
    for i in range(N):
        tl.store(y_ptr + row * stride_y + i, tl.load(x_ptr + row * stride_x + i) * 3)


@triton.jit
def while_rows(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """Each program walks two rows apart in a ``while`` loop (scf.while), both pointers carried: the tutorial
    matmul's style."""
    row = tl.program_id(0).to(tl.int64) * 2
    x_ptr += row * stride_x
    y_ptr += row * stride_y
    c = tl.arange(0, BLOCK)
    k = 0
    while k < 2:
        tl.store(y_ptr + c, tl.load(x_ptr + c, mask=c < N) + 1, mask=c < N)
        x_ptr += stride_x
        y_ptr += stride_y
        k += 1


@triton.jit
def while_rows_wrong(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """The same walk, y moved to its next row by x's stride (planted)."""
    row = tl.program_id(0).to(tl.int64) * 2
    x_ptr += row * stride_x
    y_ptr += row * stride_y
    c = tl.arange(0, BLOCK)
    k = 0
    while k < 2:
        tl.store(y_ptr + c, tl.load(x_ptr + c, mask=c < N) + 1, mask=c < N)
        x_ptr += stride_x
        y_ptr += stride_x
        k += 1


@triton.jit
def copy_desc(X, Y, stride_x, stride_y, M, N, BLOCK: tl.constexpr):
    """A copy through tensor descriptors, each given its own tensor's row stride."""
    xd = tl.make_tensor_descriptor(X, shape=[M, N], strides=[stride_x, 1], block_shape=[1, BLOCK])
    yd = tl.make_tensor_descriptor(Y, shape=[M, N], strides=[stride_y, 1], block_shape=[1, BLOCK])
    row = tl.program_id(0)
    yd.store([row, 0], xd.load([row, 0]))


@triton.jit
def copy_block_ptr(X, Y, stride_x, stride_y, M, N, BLOCK: tl.constexpr):
    """The same copy through block pointers."""
    row = tl.program_id(0)
    xb = tl.make_block_ptr(
        X, shape=(M, N), strides=(stride_x, 1), offsets=(row, 0), block_shape=(1, BLOCK), order=(1, 0)
    )
    yb = tl.make_block_ptr(
        Y, shape=(M, N), strides=(stride_y, 1), offsets=(row, 0), block_shape=(1, BLOCK), order=(1, 0)
    )
    tl.store(yb, tl.load(xb, boundary_check=(1,)), boundary_check=(1,))


@triton.jit
def two_d_rows(x_ptr, y_ptr, stride_xm, stride_xn, stride_ym, stride_yn, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """A 2-D tile with both strides of each tensor (a transposed view reaches it uncopied)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    v = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=m)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, v, mask=m)


@triton.jit
def two_d_rows_wrong(x_ptr, y_ptr, stride_xm, stride_xn, stride_ym, stride_yn, M, N, BM: tl.constexpr,
                     BN: tl.constexpr):  # fmt: skip
    """x's column stride ignored (planted): a transposed x is read as if row-major."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    v = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :], mask=m)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, v, mask=m)


#: CUDA C++: (x, y, stride_x, stride_y, n) row kernels, correct and with a planted mistake, in each style.
CPP = {
    "compound": """
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  x += blockIdx.x * stride_x;
  y += blockIdx.x * stride_y;
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[c] = 2.f * x[c];
}""",
    "compound_wrong": """
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  x += blockIdx.x * stride_x;
  y += blockIdx.x * stride_x;  // planted: x's stride for y
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[c] = 2.f * x[c];
}""",
    "template": """
template <typename T>
__global__ void k(const T* x, T* y, long stride_x, long stride_y, int n) {
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * stride_y + c] = x[blockIdx.x * stride_x + c];
}""",
    "template_wrong": """
template <typename T>
__global__ void k(const T* x, T* y, long stride_x, long stride_y, int n) {
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * stride_y + c] = x[blockIdx.x * n + c];
}""",
    "device_helper": """
__device__ __forceinline__ const float* row_of(const float* p, long r, long s) { return p + r * s; }
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  const float* xr = row_of(x, blockIdx.x, stride_x);
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * stride_y + c] = xr[c] + 1.f;
}""",
    "device_helper_wrong": """
__device__ __forceinline__ const float* row_of(const float* p, long r, long s) { return p + r * s; }
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  const float* xr = row_of(x, blockIdx.x, stride_x);
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * stride_x + c] = xr[c] + 1.f;
}""",
    "pointer_locals": """
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  const float* src = x + (long)blockIdx.x * stride_x;
  float* dst = y + (long)blockIdx.x * stride_y;
  for (int c = threadIdx.x; c < n; c += blockDim.x) dst[c] = src[c] * src[c];
}""",
    "unbounded_wrong": """
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  int c = threadIdx.x;  // planted: no c < n, one block of threads per row whatever n is
  y[blockIdx.x * stride_y + c] = x[blockIdx.x * stride_x + c];
}""",
    "macro_wrong": """
#define AT(p, r, c) (p)[(r) * stride_x + (c)]
extern "C" __global__ void k(const float* x, float* y, long stride_x, long stride_y, int n) {
  for (int c = threadIdx.x; c < n; c += blockDim.x) AT(y, blockIdx.x, c) = 2.f * AT(x, blockIdx.x, c);
}""",
}
