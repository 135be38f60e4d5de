"""Triton kernels of the example ops (imported only when Triton is installed)."""

import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, n, y_ptr, BLOCK: tl.constexpr = 1024):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    # Compared in float32: Triton 3.9's interpreter compares bf16 values by their raw bits (negative > 0).
    tl.store(y_ptr + offs, tl.maximum(x.to(tl.float32), 0.0).to(x.dtype), mask=m)


@triton.jit
def softmax_kernel(x_ptr, n, y_ptr, BLOCK: tl.constexpr):
    """One program per row, any row length: an online max/sum pass, then a normalizing pass."""
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * n
    yr = y_ptr + row * n
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    # `while` rather than `for ... in range(0, n, BLOCK)`: Triton 3.6's interpreter cannot take a runtime
    # bound in range() under NumPy >= 2.3, and the compiled code is the same loop.
    start = 0
    while start < n:
        cols = start + offs
        v = tl.load(xr + cols, mask=cols < n, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        # Lanes that have seen no element yet hold -inf; exp(-inf - -inf) would be NaN.
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        add = tl.where(v == float("-inf"), 0.0, tl.exp(v - m_new))
        s = s * scale + add
        m = m_new
        start += BLOCK
    mx = tl.max(m, 0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - mx)), 0)
    start = 0
    while start < n:
        cols = start + offs
        v = tl.load(xr + cols, mask=cols < n, other=0.0).to(tl.float32)
        tl.store(yr + cols, (tl.exp(v - mx) / total).to(y_ptr.dtype.element_ty), mask=cols < n)
        start += BLOCK


@triton.jit
def axpy_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    """In place: x += alpha * y."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(x_ptr + offs, (x + alpha * y).to(x.dtype), mask=m)
