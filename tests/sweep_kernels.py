"""Kernels of our own in the style of published code whose package is not installed here (issue 60's sweep):
flash-linear-attention's l2norm and token shift (fla-core), unsloth's cross-entropy (unsloth), llm.c's encoder
(a C file, no package). Each keeps the published kernel's form: its parameter names, its heuristics over optional
tensors, its flags and pointer arithmetic."""

import triton
import triton.language as tl

__all__ = ["ENCODER", "fla_l2norm_fwd", "fla_token_shift_fwd", "unsloth_cross_entropy_fwd"]


@triton.jit
def fla_l2norm_fwd(x, y, rstd, eps, D, BD: tl.constexpr):
    """fla.modules.l2norm's forward: one row per program, y = x / sqrt(sum(x^2) + eps), rstd kept."""
    i_t = tl.program_id(0)
    p_x = x + i_t * D + tl.arange(0, BD)
    m = tl.arange(0, BD) < D
    b_x = tl.load(p_x, mask=m, other=0.0).to(tl.float32)
    b_rstd = 1 / tl.sqrt(tl.sum(b_x * b_x) + eps)
    tl.store(y + i_t * D + tl.arange(0, BD), (b_x * b_rstd).to(y.dtype.element_ty), mask=m)
    tl.store(rstd + i_t, b_rstd)


@triton.heuristics({"IS_VARLEN": lambda args: args["cu_seqlens"] is not None,
                    "USE_INITIAL_STATE": lambda args: args["cache"] is not None})  # fmt: skip
@triton.jit
def fla_token_shift_fwd(x, y, cache, cu_seqlens, T, N, D: tl.constexpr, BD: tl.constexpr, IS_VARLEN: tl.constexpr,
                        USE_INITIAL_STATE: tl.constexpr):  # fmt: skip
    """fla.modules.token_shift's forward: y[t] = x[t - 1] - x[t] within each sequence (a batch of B sequences of
    length T, or with cu_seqlens N packed sequences in one row of T tokens); a sequence's first token takes its
    cache row as predecessor where a cache is given, else 0."""
    i_t, i_b = tl.program_id(0), tl.program_id(1)
    if IS_VARLEN:
        i_n = 0
        for j in range(0, N):  # the sequence holding token i_t
            i_n += (tl.load(cu_seqlens + j + 1) <= i_t).to(tl.int32)
        t = i_t - tl.load(cu_seqlens + i_n)
    else:
        i_n = i_b
        t = i_t
    row = i_b * T + i_t
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_x = tl.load(x + row * D + o_d, mask=m_d, other=0.0)
    if t > 0:
        b_prev = tl.load(x + (row - 1) * D + o_d, mask=m_d, other=0.0)
    elif USE_INITIAL_STATE:
        b_prev = tl.load(cache + i_n * D + o_d, mask=m_d, other=0.0)
    else:
        b_prev = tl.zeros([BD], dtype=b_x.dtype)
    tl.store(y + row * D + o_d, b_prev - b_x, mask=m_d)


@triton.heuristics({"DO_LOGIT_SCALING": lambda args: args["LOGIT_SCALE"] != 0})
@triton.jit
def unsloth_cross_entropy_fwd(logits_ptr, logits_row_stride, loss_ptr, logsumexp_ptr, labels_ptr, VOCAB_SIZE,
                              BLOCK_SIZE: tl.constexpr, DO_LOGIT_SCALING: tl.constexpr, LOGIT_SCALE):  # fmt: skip
    """unsloth's _cross_entropy_forward: one row per program, the loss and the logsumexp kept; label -100 is
    ignored (loss 0); logits scaled first where LOGIT_SCALE is not 0 (Cohere's logit scaling)."""
    row_idx = tl.program_id(0)
    logits_ptr += row_idx * logits_row_stride
    loss_ptr += row_idx
    logsumexp_ptr += row_idx
    labels_ptr += row_idx
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < VOCAB_SIZE
    label_idx = tl.load(labels_ptr).to(tl.int32)
    logits = tl.load(logits_ptr + col_offsets, mask=mask, other=-float("inf")).to(tl.float32)
    if DO_LOGIT_SCALING:
        logits = LOGIT_SCALE * logits
    c = tl.max(logits, 0)
    logsumexp = c + tl.log(tl.sum(tl.exp(logits - c), 0))
    if label_idx != -100:
        x = tl.load(logits_ptr + label_idx).to(tl.float32)
        if DO_LOGIT_SCALING:
            x = LOGIT_SCALE * x
        loss = logsumexp - x
    else:
        loss = 0.0
    tl.store(logsumexp_ptr, logsumexp)
    tl.store(loss_ptr, loss)


#: llm.c's encoder_forward_kernel3 (train_gpt2.cu), as published: out[b, t, :] = wte[inp[b, t], :] + wpe[t, :],
#: one thread per element, int indices and float tensors.
ENCODER = r"""
#include <assert.h>
__global__ void encoder_forward_kernel3(float* out, const int* inp, const float* wte, const float* wpe,
                                        int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        assert(ix >= 0);
        float* out_btc = out + b * T * C + t * C + c;
        const float* wte_ix = wte + ix * C + c;
        const float* wpe_tc = wpe + t * C + c;
        *out_btc = *wte_ix + *wpe_tc;
    }
}
"""
