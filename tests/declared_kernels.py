"""Triton kernels written for the declaration and check tests (opsmith's own text), each in the shape of a published
kernel the issue met: a row kernel that takes a weight's row stride and never reads it (Liger's RMSNorm family), a
kernel that addresses a second tensor with the first one's stride (the tutorial attention's ``qvk_offset``), a
vectorized kernel without masks that needs whole groups of 4 columns, a norm that saves float32 statistics, and a
column sum whose output is non-empty over zero rows."""

import triton
import triton.language as tl


@triton.jit
def rows_scale_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, W_row_stride, n_cols,
                      BLOCK_SIZE: tl.constexpr):  # fmt: skip
    """y = x * w per row; w is loaded as ``W_ptr + cols`` and ``W_row_stride`` is never read (as Liger's)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0)
    w = tl.load(W_ptr + cols, mask=mask, other=0.0)
    tl.store(Y_ptr + row * Y_row_stride + cols, x * w, mask=mask)


@triton.jit
def pair_add_kernel(A_ptr, B_ptr, C_ptr, stride_a, stride_b, stride_c, n_cols, BLOCK_SIZE: tl.constexpr):
    """c = a + b per row; b is addressed with a's row stride (``stride_b`` is never read)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    offset = row * stride_a
    a = tl.load(A_ptr + offset + cols, mask=mask, other=0.0)
    b = tl.load(B_ptr + offset + cols, mask=mask, other=0.0)
    tl.store(C_ptr + row * stride_c + cols, a + b, mask=mask)


@triton.jit
def vec4_kernel(X_ptr, Y_ptr, alpha, shift, n_cols):
    """y = alpha * x + shift over groups of 4 columns, without masks: the columns must be a multiple of 4."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * 4 + tl.arange(0, 4)
    x = tl.load(X_ptr + row * n_cols + cols)
    tl.store(Y_ptr + row * n_cols + cols, alpha * x + shift)


@triton.jit
def rms_rows_kernel(Y_ptr, RSTD_ptr, X_ptr, W_ptr, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    """y = x * rstd * w per row, with rstd = 1 / sqrt(mean(x^2) + eps) saved in float32 beside y."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(RSTD_ptr + row, rstd)
    tl.store(Y_ptr + row * n_cols + cols, (x * rstd * w).to(Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def colsum_kernel(X_ptr, OUT_ptr, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    """out[c] += x[r, c] over every row r: one program per block of columns, accumulating into the output."""
    cols = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for r in range(0, n_rows):
        acc += tl.load(X_ptr + r * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(OUT_ptr + cols, tl.load(OUT_ptr + cols, mask=mask, other=0.0) + acc, mask=mask)


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    """One program per row of ``N``: the grid gives the rows, ``N`` the columns (issue 61's most common row op)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * N + cols, e / tl.sum(e, 0), mask=cols < N)


@triton.jit
def glu_reused_offs_kernel(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    """A GLU whose one local name holds x's offsets for the loads, then y's for the store (issue 61)."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    offs = row * stride_x + c
    a = tl.load(x_ptr + offs, mask=c < N)
    b = tl.load(x_ptr + offs + N, mask=c < N)
    offs = row * stride_y + c
    tl.store(y_ptr + offs, a * tl.sigmoid(b), mask=c < N)


@triton.jit
def unmasked_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    """Rows of ``BLOCK`` with no mask: ``n_cols`` is taken and never read (issue 61's missing mask)."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    tl.store(y_ptr + row * BLOCK + c, tl.load(x_ptr + row * BLOCK + c) * 2)


@triton.jit
def copy_desc_kernel(X, Y, stride_x, stride_y, M, N, BLOCK: tl.constexpr):
    """A copy through tensor descriptors whose Y descriptor is given X's row stride (issue 61's missed misuse)."""
    xd = tl.make_tensor_descriptor(X, shape=[M, N], strides=[stride_x, 1], block_shape=[1, BLOCK])
    yd = tl.make_tensor_descriptor(Y, shape=[M, N], strides=[stride_x, 1], block_shape=[1, BLOCK])
    row = tl.program_id(0)
    yd.store([row, 0], xd.load([row, 0]))


@triton.jit
def copy_block_ptr_kernel(X, Y, stride_x, stride_y, M, N, BLOCK: tl.constexpr):
    """The same copy through block pointers, Y's given X's row stride."""
    row = tl.program_id(0)
    xb = tl.make_block_ptr(
        X, shape=(M, N), strides=(stride_x, 1), offsets=(row, 0), block_shape=(1, BLOCK), order=(1, 0)
    )
    yb = tl.make_block_ptr(
        Y, shape=(M, N), strides=(stride_x, 1), offsets=(row, 0), block_shape=(1, BLOCK), order=(1, 0)
    )
    tl.store(yb, tl.load(xb, boundary_check=(1,)), boundary_check=(1,))
