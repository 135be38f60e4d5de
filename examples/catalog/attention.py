"""The fused attention forward in the Triton tutorial's style (``kernels/attention_triton.py``), declared
unchanged. The kernel offsets K, V and Out by Q's batch and head strides, so the declaration gives those two
strides as one parameter for all four tensors (``Stride(("Q", "K", "V", "Out"), 0, name="stride_qz")``): opsmith
then makes the four agree on every path (a Q that arrives as a transposed view is copied), where a declaration
with a stride per tensor passes such a Q as it is and the kernel reads K and V at the wrong places.

``register_attention(ns, shared=True)`` returns the op; ``attention_reference`` is PyTorch's.
"""

from __future__ import annotations

from typing import Any

import torch

from opsmith import Dim, Grid, InputDecl, OutputDecl, SameAs, ScalarInput, Stride

__all__ = ["attention_reference", "register_attention"]

_AXES = ("z", "h", "m", "k")


def register_attention(ns: str, shared: bool = True) -> Any:
    from opsmith import triton_op

    from .kernels.attention_triton import attn_fwd

    strides = []
    for t, tag in (("Q", "q"), ("K", "k"), ("V", "v"), ("Out", "o")):
        for axis, a in enumerate(_AXES):
            # K and V name their sequence axis n (stride_kn), as the kernel does
            name = f"stride_{tag}{'n' if a == 'm' and tag in 'kv' else a}"
            if shared and axis < 2 and tag == "q":
                strides.append(Stride(("Q", "K", "V", "Out"), axis, name=name))  # the qvk_offset the kernel shares
            else:
                strides.append(Stride(t, axis, name=name))
    shape = ("Z", "H", "N_CTX", "HEAD_DIM")
    return triton_op(
        f"{ns}::attention{'' if shared else '_unshared'}", attn_fwd,
        inputs=[InputDecl("Q", shape=shape), InputDecl("K", shape=shape, dtype="Q"), InputDecl("V", shape=shape, dtype="Q"),
                ScalarInput("sm_scale", float)],
        outputs=[OutputDecl("Out", SameAs("Q"))],
        extras=[*strides, Dim("Z"), Dim("H"), Dim("N_CTX"), Dim("HEAD_DIM")],
        geometry=Grid(grid=("cdiv(N_CTX, BLOCK_M)", "Z * H")))  # fmt: skip


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float) -> torch.Tensor:
    p = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * sm_scale, dim=-1)
    return (p @ v.float()).to(q.dtype)
