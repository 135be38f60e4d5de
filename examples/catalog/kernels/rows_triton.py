"""Row kernels in the style Liger-Kernel and unsloth publish (written for opsmith, not copied): each program
takes one row of a tensor its host code viewed as ``(rows, n_cols)``, addressed by a row stride per tensor, and
the block covering the row is a power of two compiled in. The backward computes its ``GEMMA`` constexpr with
``@triton.heuristics`` from the ``GEMMA`` it is passed, as unsloth's RMSNorm backward does (Gemma's weight is
``1 + w``)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def rms_rows_forward(Y, Y_row_stride, X, X_row_stride, W, RSTD, n_cols, eps, GEMMA: tl.constexpr,
                     BLOCK_SIZE: tl.constexpr):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * X_row_stride + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0).to(tl.float32)
    if GEMMA:
        w = w + 1.0
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(RSTD + row, rstd)
    tl.store(Y + row * Y_row_stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.heuristics({"GEMMA": lambda args: bool(args["GEMMA"])})
@triton.jit
def rms_rows_backward(dY, dY_row_stride, dX, dX_row_stride, X, X_row_stride, W, RSTD, n_cols,
                      GEMMA: tl.constexpr, BLOCK_SIZE: tl.constexpr):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dy = tl.load(dY + row * dY_row_stride + cols, mask=mask, other=0).to(tl.float32)
    x = tl.load(X + row * X_row_stride + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0).to(tl.float32)
    if GEMMA:
        w = w + 1.0
    rstd = tl.load(RSTD + row)
    normed = x * rstd
    dy_w = dy * w
    dx = rstd * (dy_w - normed * (tl.sum(dy_w * normed, axis=0) / n_cols))
    tl.store(dX + row * dX_row_stride + cols, dx.to(dX.dtype.element_ty), mask=mask)


# The Triton layer-norm tutorial's host code picks the block and the warps from the row length; here the same
# choices are heuristics, so every path computes them from the call: the block covers the row up to a cap
# (longer rows loop), and the warps follow the block.
MAX_BLOCK = 8192


@triton.heuristics({"BLOCK_SIZE": lambda args: min(MAX_BLOCK, triton.next_power_of_2(args["N"]))})
@triton.heuristics({"num_warps": lambda args: min(max(args["BLOCK_SIZE"] // 256, 1), 8)})
@triton.jit
def layer_norm_rows(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    X += row * stride
    Y += row * stride
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        d = tl.where(cols < N, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask).to(tl.float32)
        b = tl.load(B + cols, mask=mask).to(tl.float32)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + cols, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def smooth_rows(Y, X, n_cols, label_smoothing: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """Label smoothing of probability rows, with the smoothing a constexpr that callers set per call (as
    Liger-Kernel's cross-entropy takes ``label_smoothing: tl.constexpr``): 0 compiles the branch away."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    if label_smoothing != 0.0:
        x = x * (1.0 - label_smoothing) + label_smoothing / n_cols
    tl.store(Y + row * n_cols + cols, x.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def ce_rows(X, X_stride, Y, weight, loss, z_loss, n_cols, n_non_ignore, ignore_index, HAS_WEIGHT: tl.constexpr,
            RETURN_Z_LOSS: tl.constexpr, BLOCK_SIZE: tl.constexpr):  # fmt: skip
    """Cross-entropy per row in Liger's calling style: ``weight`` and ``z_loss`` are None when their feature is
    off, ``HAS_WEIGHT`` / ``RETURN_Z_LOSS`` say which; the row's loss (divided by ``n_non_ignore``, a mean) and,
    with ``RETURN_Z_LOSS``, its ``lse ** 2`` are written; X is overwritten with the loss's gradient."""
    row = tl.program_id(0).to(tl.int64)
    y = tl.load(Y + row)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * X_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    w = 1.0
    if HAS_WEIGHT:
        w = tl.load(weight + y).to(tl.float32)
    keep = y != ignore_index
    x_y = tl.sum(tl.where(cols == y, x, 0.0), axis=0)
    row_loss = tl.where(keep, w * (lse - x_y) / n_non_ignore, 0.0)
    grad = tl.exp(x - lse) - tl.where(cols == y, 1.0, 0.0)
    grad = tl.where(keep, w * grad / n_non_ignore, 0.0)
    tl.store(X + row * X_stride + cols, grad.to(X.dtype.element_ty), mask=mask)
    tl.store(loss + row, row_loss)
    if RETURN_Z_LOSS:
        tl.store(z_loss + row, tl.where(keep, lse * lse, 0.0))


@triton.heuristics({"WRAP": lambda args: args["shift"] % args["n_cols"] != 0})
@triton.jit
def roll_rows(Y, X, n_cols, shift, WRAP: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """``torch.roll(x, shift, -1)`` per row; a heuristic over the scalar ``shift`` compiles the kernel that only
    copies when the shift is a whole number of rows (``WRAP`` false)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    src = cols
    if WRAP:
        src = ((cols - shift) % n_cols + n_cols) % n_cols
    x = tl.load(X + row * n_cols + src, mask=mask)
    tl.store(Y + row * n_cols + cols, x, mask=mask)
