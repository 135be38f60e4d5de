"""Triton kernels in the published style of issue 60's kernels, for tests/test_round_four_cpu.py and its
interpreter check: a flag the host passes and a heuristic reads back (unsloth's RoPE), a pointer offset before
the flag says whether it is read (Liger's JSD), a GLU over ``(M, 2 * N)``, a classifier whose extra outputs are
written only where their pointers are given (llm.c's fused classifier)."""

import triton
import triton.language as tl


def _add_flagged(x_ptr, b_ptr, y_ptr, n, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if HAS_B:
        x += tl.load(b_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x, mask=m)


# One body, two ways of setting HAS_B: unsloth's RoPE reads back the flag its host passes; another derives it.
add_readback = triton.heuristics({"HAS_B": lambda args: bool(args["HAS_B"])})(triton.jit(_add_flagged))
add_derived = triton.heuristics({"HAS_B": lambda args: args["b_ptr"] is not None})(triton.jit(_add_flagged))


@triton.heuristics({"HAS_B": lambda args: args["n"] > 4})
@triton.jit
def add_by_size(x_ptr, b_ptr, y_ptr, n, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def shifted_rows(x_ptr, label_ptr, y_ptr, n_cols, HAS_LABEL: tl.constexpr, BLOCK: tl.constexpr):
    """Liger's ``_jsd_kernel`` style: the label pointer is moved to the row before the flag says whether it is
    read; each row is scaled by 2 where its label is 1."""
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * n_cols
    y_ptr += row * n_cols
    label_ptr += row
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols, mask=cols < n_cols)
    if HAS_LABEL:  # read only here
        x = x * tl.where(tl.load(label_ptr) == 1, 2.0, 1.0)
    tl.store(y_ptr + cols, x, mask=cols < n_cols)


@triton.jit
def glu_rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """A GLU over rows of ``2 * n``: y = a * sigmoid(b) for x = [a, b]."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    a = tl.load(x_ptr + row * 2 * n + cols, mask=m)
    b = tl.load(x_ptr + row * 2 * n + n + cols, mask=m)
    tl.store(y_ptr + row * n + cols, a * tl.sigmoid(b), mask=m)


@triton.jit
def add_flat(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(w_ptr + offs, mask=m), mask=m)


@triton.jit
def row_sums(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """One program per row; BLOCK must be a power of two at least ``n``."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    tl.store(y_ptr + row, tl.sum(tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0), 0))


@triton.jit
def fused_classifier(logits, targets, losses, probs, dlogits, n_cols, dloss, BLOCK: tl.constexpr):
    """llm.c's fused classifier in Triton: the loss always, the probabilities and the gradient only where their
    pointers are given (None is compiled in, so each branch is decided at compile time)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(logits + row * n_cols + offs, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    e = tl.where(mask, tl.exp(x - m), 0.0)
    s = tl.sum(e, 0)
    p = e / s
    t = tl.load(targets + row)
    tl.store(losses + row, tl.log(s) + m - tl.sum(tl.where(offs == t, x, 0.0), 0))
    if probs is not None:
        tl.store(probs + row * n_cols + offs, p, mask=mask)
    if dlogits is not None:
        tl.store(dlogits + row * n_cols + offs, (p - tl.where(offs == t, 1.0, 0.0)) * dloss, mask=mask)
