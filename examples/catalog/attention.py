"""The fused attention forward in the Triton tutorial's style (``kernels/attention_triton.py``), declared
unchanged. The kernel offsets K, V and Out by Q's batch and head strides, so the declaration gives those two
strides as one parameter for all four tensors (``Stride(("Q", "K", "V", "Out"), 0, name="stride_qz")``): opsmith
then makes the four agree on every path (a Q that arrives as a transposed view is copied). A declaration with a
stride per tensor would pass such a Q as it is and the kernel would read K and V at the wrong places; opsmith
reads the kernel, sees Q's strides in K's, V's and Out's addresses, warns and shares them itself.

``register_attention(ns, shared=True)`` returns the op; ``attention_reference`` is PyTorch's.
"""

from __future__ import annotations

from typing import Any

import torch

from opsmith import Const, Dim, Grid, InputDecl, OneOf, OutputDecl, SameAs, ScalarInput, Stride

__all__ = ["attention_reference", "register_attention"]

_AXES = ("z", "h", "m", "k")


def register_attention(ns: str, shared: bool = True, silence: tuple[str, ...] = ()) -> Any:
    """``shared``: the declaration this kernel needs (Q's batch and head strides for all four tensors, the
    per-tensor ones the kernel never reads passed as ``Const``). ``shared=False``: a stride per tensor, as a
    newcomer writes it; opsmith reads the kernel, warns, and shares the strides itself unless ``silence`` names
    them (``silence=("stride_qz", "stride_qh")`` keeps the per-tensor declaration, and its wrong values)."""
    from opsmith import triton_op

    from .kernels.attention_triton import attn_fwd

    strides: list[Any] = []
    for t, tag in (("Q", "q"), ("K", "k"), ("V", "v"), ("Out", "o")):
        for axis, a in enumerate(_AXES):
            # K and V name their sequence axis n (stride_kn), as the kernel does
            name = f"stride_{tag}{'n' if a == 'm' and tag in 'kv' else a}"
            if shared and axis < 2:  # the qvk_offset the kernel shares; K's, V's and Out's own are never read
                strides.append(Stride(("Q", "K", "V", "Out"), axis, name=name) if tag == "q" else Const(0, name=name))
            else:
                strides.append(Stride(t, axis, name=name))
    shape = ("Z", "H", "N_CTX", "HEAD_DIM")
    return triton_op(
        f"{ns}::attention{'' if shared else '_unshared'}{'_silenced' if silence else ''}", attn_fwd,
        inputs=[InputDecl("Q", shape=shape), InputDecl("K", shape=shape, dtype="Q"), InputDecl("V", shape=shape, dtype="Q"),
                ScalarInput("sm_scale", float)],
        outputs=[OutputDecl("Out", SameAs("Q"))],
        extras=[*strides, Const(0, name="Z") if shared else Dim("Z"), Dim("H"), Dim("N_CTX"), Dim("HEAD_DIM")],
        geometry=Grid(grid=("cdiv(N_CTX, BLOCK_M)", "Z * H")), silence=silence,
        requires=[OneOf("HEAD_DIM", (16, 32, 64, 128), why="tl.arange and tl.dot over the head dimension")])  # fmt: skip


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float) -> torch.Tensor:
    p = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * sm_scale, dim=-1)
    return (p @ v.float()).to(q.dtype)
