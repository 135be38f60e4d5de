"""A Triton kernel written for these tests in Liger-Kernel's style (rows addressed through one stride, a runtime
scalar, the row length and its power-of-two block as constexprs): opsmith's own text, declared beside the real
Liger kernel (from the installed ``liger-kernel`` package) by ``styled_kernels.py``."""

import triton
import triton.language as tl


@triton.jit
def swiglu_rows_kernel(a_ptr, b_ptr, c_ptr, stride, gate_multiplier, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """c = silu(gate_multiplier * a) * b, row by row; the gate's math in float32, the product in b's dtype."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    offset = row * stride + cols
    gate = tl.load(a_ptr + offset, mask=inside, other=0.0).to(tl.float32) * gate_multiplier.to(tl.float32)
    up = tl.load(b_ptr + offset, mask=inside, other=0.0)
    activated = gate / (1.0 + tl.exp(-gate))
    tl.store(c_ptr + offset, activated.to(up.dtype) * up, mask=inside)


@triton.jit
def seeded_dropout_kernel(x_ptr, out_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    """out = x / (1 - p) where a Philox draw keyed by (seed, element index) is above p, else 0: the same seed
    drops the same elements, so a backward can redraw the mask instead of storing it. ``seed`` is a full 64-bit
    value (Philox takes both halves)."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=inside)
    keep = tl.rand(seed, offsets) > p
    tl.store(out_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=inside)


@triton.jit
def rms_norm_rows_kernel(y_ptr, x_ptr, w_ptr, stride, eps, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                         X_dtype: tl.constexpr):  # fmt: skip
    """y = (x * rstd) rounded to X_dtype, times w, row by row (Liger's "llama" casting: the normalized row is
    rounded to the input's dtype before the weight multiplies it). The host passes X_dtype per call."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=inside, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0)
    tl.store(y_ptr + row * stride + cols, (x * rstd).to(X_dtype) * w, mask=inside)


@triton.jit
def dyt_forward_kernel(x_ptr, gamma_ptr, beta_ptr, y_ptr, stride, alpha, n_cols: tl.constexpr,
                       BLOCK_SIZE: tl.constexpr):  # fmt: skip
    """DyT (Liger's "dynamic tanh" norm): y = gamma * tanh(alpha * x) + beta, row by row; beta may be None (no
    bias), compiled in as Triton's launcher compiles a None."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=inside, other=0.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    t = 2.0 / (1.0 + tl.exp(-2.0 * alpha * x)) - 1.0  # tanh(alpha * x)
    y = gamma * t
    if beta_ptr is not None:
        y += tl.load(beta_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def dyt_backward_kernel(dy_ptr, x_ptr, gamma_ptr, dx_ptr, dyt_ptr, stride, alpha, n_cols: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr):  # fmt: skip
    """dx = dy * gamma * alpha * (1 - tanh^2), and dy * tanh per element (gamma's gradient, once summed)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    dy = tl.load(dy_ptr + row * stride + cols, mask=inside, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + row * stride + cols, mask=inside, other=0.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    t = 2.0 / (1.0 + tl.exp(-2.0 * alpha * x)) - 1.0
    tl.store(
        dx_ptr + row * stride + cols, (dy * gamma * alpha * (1.0 - t * t)).to(dx_ptr.dtype.element_ty), mask=inside
    )
    tl.store(dyt_ptr + row * stride + cols, (dy * t).to(dyt_ptr.dtype.element_ty), mask=inside)


@triton.jit
def column_sum_kernel(x_ptr, out_ptr, n_rows, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    """out[c] = sum over rows of x[r, c], in float32: one program per BLOCK_SIZE columns."""
    cols = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = cols < n_cols
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    row_ptr = x_ptr + cols
    for _ in range(n_rows):  # the pointer steps a row at a time: 64-bit addresses past 2^31 elements
        acc += tl.load(row_ptr, mask=inside, other=0.0).to(tl.float32)
        row_ptr += stride
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=inside)
