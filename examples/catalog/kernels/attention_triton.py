"""A fused attention forward in the style of the Triton tutorial's (written for opsmith, not copied): one
program per block of query rows and (batch, head), an online softmax over key blocks, and the batch and head
offset computed once from Q's strides and applied to K, V and Out too (``qvk_offset``). So the kernel is right
only when the four tensors share their batch and head strides: the declaration says so by giving those two
strides as one parameter for all four (``examples/catalog/attention.py``). ``p`` is cast to V's element type
(fp16, or fp8 e5m2) before the second ``tl.dot``, as the tutorial does."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _attn_inner(acc, l_i, m_i, q, K, V, stride_kn, stride_kk, stride_vn, stride_vk, offs_n, offs_d, qk_scale,
                N_CTX, BLOCK_N: tl.constexpr):  # fmt: skip
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + cols[None, :] * stride_kn + offs_d[:, None] * stride_kk, mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(cols[None, :] < N_CTX, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk, mask=cols[:, None] < N_CTX, other=0.0)
        if V.dtype.element_ty == tl.float8e5:
            p = p.to(tl.float8e5)
        else:
            p = p.to(tl.float16)
        acc = tl.dot(p, v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.autotune(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=3),
                          triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3)],
                 key=["N_CTX", "HEAD_DIM"])  # fmt: skip
@triton.jit
def attn_fwd(Q, K, V, sm_scale, Out,
             stride_qz, stride_qh, stride_qm, stride_qk, stride_kz, stride_kh, stride_kn, stride_kk,
             stride_vz, stride_vh, stride_vn, stride_vk, stride_oz, stride_oh, stride_om, stride_ok,
             Z, H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    qvk_offset = off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m[:, None] < N_CTX
    q = tl.load(Q + qvk_offset + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk, mask=rows, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # 1 / ln(2): exp2 instead of exp
    acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K + qvk_offset, V + qvk_offset, stride_kn, stride_kk, stride_vn,
                                stride_vk, offs_n, offs_d, qk_scale, N_CTX, BLOCK_N)  # fmt: skip
    acc = acc / l_i[:, None]
    tl.store(Out + qvk_offset + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok, acc.to(Out.type.element_ty),
             mask=rows)  # fmt: skip
