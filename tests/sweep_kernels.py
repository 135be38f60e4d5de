"""Kernels of our own in the style of published code whose package is not installed here (issue 60's sweep):
unsloth's cross-entropy (unsloth: it needs a GPU to import), llm.c's encoder (a C file, no package). Each keeps the published kernel's form: its parameter names, its heuristics over optional
tensors, its flags and pointer arithmetic."""

import triton
import triton.language as tl

__all__ = ["ENCODER", "unsloth_cross_entropy_fwd"]


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
