"""RMSNorm forward and backward in Triton, with the math of ``rmsnorm.cu`` (see there).

Generic over dtype: ``x + zeros(float32)`` promotes 16-bit inputs to float32 and keeps float64 as float64,
so float64 inputs accumulate in float64 (what gradcheck needs); scalar results are cast back to that type
because a Python-float ``eps`` (as torch.compile passes it) would promote them to float64. ``while`` loops rather than ``range``: the
Triton 3.6 interpreter cannot take a runtime bound in ``range`` under NumPy >= 2.3.
"""

import triton
import triton.language as tl


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, w_ptr, eps, n, y_ptr, BLOCK: tl.constexpr):
    """One program per row; the row stays in registers when ``n <= BLOCK``."""
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * n
    yr = y_ptr + row * n
    offs = tl.arange(0, BLOCK)
    zero = tl.zeros([BLOCK], tl.float32) + tl.zeros([BLOCK], x_ptr.dtype.element_ty)  # the accumulator type
    if n <= BLOCK:
        m = offs < n
        x = tl.load(xr + offs, mask=m, other=0.0) + zero
        rstd = (1.0 / tl.sqrt(tl.sum(x * x, 0) / n + eps)).to(zero.dtype)
        w = tl.load(w_ptr + offs, mask=m, other=0.0) + zero
        tl.store(yr + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
    else:
        acc = zero
        start = 0
        while start < n:
            cols = start + offs
            x = tl.load(xr + cols, mask=cols < n, other=0.0) + zero
            acc += x * x
            start += BLOCK
        rstd = (1.0 / tl.sqrt(tl.sum(acc, 0) / n + eps)).to(zero.dtype)
        start = 0
        while start < n:
            cols = start + offs
            m = cols < n
            x = tl.load(xr + cols, mask=m, other=0.0) + zero
            w = tl.load(w_ptr + cols, mask=m, other=0.0) + zero
            tl.store(yr + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
            start += BLOCK


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, eps, partial_ptr, n, numel, dx_ptr, BLOCK: tl.constexpr):
    """Persistent programs: program p takes rows p, p + programs, ... and writes its partial dweight sums
    to ``partial[p, :]`` (no atomics; the caller sums the partial rows)."""
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    rows = numel // n
    offs = tl.arange(0, BLOCK)
    pr = partial_ptr + pid.to(tl.int64) * n
    zero = tl.zeros([BLOCK], tl.float32) + tl.zeros([BLOCK], x_ptr.dtype.element_ty)
    if n <= BLOCK:
        m = offs < n
        w = tl.load(w_ptr + offs, mask=m, other=0.0) + zero
        dw = zero
        row = pid.to(tl.int64)
        # The next row's x and dy are loaded before this row's math (a two-row software pipeline): with
        # ~2 programs per SM, one row in flight per program leaves HBM idle half the time.
        # A row past the end loads nothing: its bound is 0. (``m & (row < rows)`` says the same, but Triton
        # 3.9's interpreter gives that mask an int32 dtype and refuses it.)
        x_next = tl.load(x_ptr + row * n + offs, mask=offs < tl.where(row < rows, n, 0), other=0.0)
        g_next = tl.load(dy_ptr + row * n + offs, mask=offs < tl.where(row < rows, n, 0), other=0.0)
        while row < rows:
            x = x_next + zero
            g = g_next + zero
            nxt = row + step
            x_next = tl.load(x_ptr + nxt * n + offs, mask=offs < tl.where(nxt < rows, n, 0), other=0.0)
            g_next = tl.load(dy_ptr + nxt * n + offs, mask=offs < tl.where(nxt < rows, n, 0), other=0.0)
            rstd = (1.0 / tl.sqrt(tl.sum(x * x, 0) / n + eps)).to(zero.dtype)
            c = (tl.sum(g * w * x, 0) / n * rstd * rstd * rstd).to(zero.dtype)
            tl.store(dx_ptr + row * n + offs, (rstd * g * w - x * c).to(dx_ptr.dtype.element_ty), mask=m)
            dw += g * x * rstd
            row = nxt
        tl.store(pr + offs, dw.to(partial_ptr.dtype.element_ty), mask=m)
    else:
        start = 0
        while start < n:
            cols = start + offs
            tl.store(pr + cols, zero.to(partial_ptr.dtype.element_ty), mask=cols < n)
            start += BLOCK
        row = pid.to(tl.int64)
        while row < rows:
            ss = zero
            sg = zero
            start = 0
            while start < n:
                cols = start + offs
                m = cols < n
                x = tl.load(x_ptr + row * n + cols, mask=m, other=0.0) + zero
                g = tl.load(dy_ptr + row * n + cols, mask=m, other=0.0) + zero
                w = tl.load(w_ptr + cols, mask=m, other=0.0) + zero
                ss += x * x
                sg += g * w * x
                start += BLOCK
            rstd = (1.0 / tl.sqrt(tl.sum(ss, 0) / n + eps)).to(zero.dtype)
            c = (tl.sum(sg, 0) / n * rstd * rstd * rstd).to(zero.dtype)
            start = 0
            while start < n:
                cols = start + offs
                m = cols < n
                x = tl.load(x_ptr + row * n + cols, mask=m, other=0.0) + zero
                g = tl.load(dy_ptr + row * n + cols, mask=m, other=0.0) + zero
                w = tl.load(w_ptr + cols, mask=m, other=0.0) + zero
                tl.store(dx_ptr + row * n + cols, (rstd * g * w - x * c).to(dx_ptr.dtype.element_ty), mask=m)
                p = tl.load(pr + cols, mask=m, other=0.0)
                tl.store(pr + cols, p + (g * x * rstd).to(partial_ptr.dtype.element_ty), mask=m)
                start += BLOCK
            row += step


@triton.jit
def rmsnorm_dw_kernel(partial_ptr, dw_ptr, prows, n, BLOCK_N: tl.constexpr = 32, BLOCK_P: tl.constexpr = 64):
    """The dweight pass: column sums of the partial rows in a fixed order, cast to the dtype of ``dw`` (the
    weight's) in the same kernel: one launch instead of ``partial.sum(0).to(w.dtype)``."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_P)
    acc = tl.zeros([BLOCK_P, BLOCK_N], partial_ptr.dtype.element_ty)
    start = 0
    while start < prows:
        r = start + rows
        ptrs = partial_ptr + r[:, None].to(tl.int64) * n + cols[None, :]
        acc += tl.load(ptrs, mask=(r[:, None] < prows) & (cols[None, :] < n), other=0.0)
        start += BLOCK_P
    tl.store(dw_ptr + cols, tl.sum(acc, 0).to(dw_ptr.dtype.element_ty), mask=cols < n)
