"""Liger-Kernel's Triton kernels, imported from the installed ``liger-kernel`` package and declared with opsmith:
RMSNorm (forward; backward with per-program partial weight gradients), SwiGLU (forward; a backward that writes its
gradients over its saved inputs), RoPE (one kernel rotating q and k in place, forward or backward) and the
cross-entropy that fused linear cross-entropy runs per chunk (the loss and the logits' gradient in one pass).
None of Liger's host code is used: each declaration states what that host code computes (row blocks and warps,
strides, flags, the partial-gradient buffer), and opsmith derives every path from it. bf16 activations, Llama
casting, no weight offset.

``llama_kernels(ns, compile)`` registers them once per namespace and returns them by name; ``model.py`` swaps them
in. RMSNorm's forward, SwiGLU and RoPE carry a ``reference=`` in plain torch (Liger's arithmetic: fp32 where its
kernels upcast): it serves CPU tensors, ``opsmith check`` holds the kernels to it, and ``compile`` ("kernel",
"reference" or "auto") says whether ``torch.compile`` traces the kernel or the reference, which Inductor fuses.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from opsmith import (
    Autotune,
    Backward,
    Buffer,
    Config,
    Const,
    Dim,
    Divisible,
    Grid,
    InputDecl,
    OutputDecl,
    Present,
    SameAs,
    ScalarInput,
    Size,
    Step,
    Stride,
    triton_op,
)

__all__ = ["llama_kernels"]

_LLAMA = 0  # Liger's _CASTING_MODE_LLAMA


def _rows(kernel: Any) -> Any:
    """Liger's ``calculate_settings`` as stacked heuristics: the block covering a row of ``n_cols``, then its
    warps (4, 8 from 2,048, 16 from 8,192, 32 from 32,768)."""
    import triton

    # The outer heuristic runs first (as @triton.heuristics stacked above another): the block, then the warps
    warps = triton.heuristics({"num_warps": lambda a: 32 if a["BLOCK_SIZE"] >= 32768 else 16 if a["BLOCK_SIZE"]
                               >= 8192 else 8 if a["BLOCK_SIZE"] >= 2048 else 4})(kernel)  # fmt: skip
    return triton.heuristics({"BLOCK_SIZE": lambda a: triton.next_power_of_2(a["n_cols"])})(warps)


def _rms_norm_ref(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple:
    xf = x.float()  # Llama casting: the row in fp32, normalized, cast back, then times the weight
    rstd = torch.rsqrt(xf.pow(2).mean(-1) + eps)
    return (xf * rstd[..., None]).to(x.dtype) * w, rstd


def _swiglu_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(a.float()).to(b.dtype) * b


def _swiglu_backward_ref(dc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    af = a.float()
    sig = torch.sigmoid(af)
    silu = af * sig
    db = dc * silu
    a.copy_(dc * (silu * (1 - sig) + sig) * b)  # over the inputs, as the kernel writes
    b.copy_(db)


def _rope_ref(backward: bool) -> Any:
    def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
        # q (B, S, HQ, D), cos (CB, S, D) with both halves equal (transformers' layout); backward rotates back
        c, s = cos[:, :, None, :], (-sin if backward else sin)[:, :, None, :]
        for t in (q, k):
            h = t.shape[-1] // 2
            t.copy_(t * c + torch.cat((-t[..., h:], t[..., :h]), -1) * s)

    return rope


@functools.cache
def llama_kernels(ns: str, compile: str = "kernel") -> dict[str, Any]:
    """{"rms_norm", "swiglu", "rope", "rope_backward", "cross_entropy"} (and the backward ops they call): opsmith ops
    over Liger's kernels. ``compile``: the ops with a reference trace as the kernel, the reference, or the faster
    ("kernel", "reference", "auto"; docs/performance.md)."""
    traced = {"compile": compile}
    import triton
    import triton.language as tl
    from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel
    from liger_kernel.ops.rms_norm import _rms_norm_backward_kernel, _rms_norm_forward_kernel
    from liger_kernel.ops.rope import _triton_rope
    from liger_kernel.ops.swiglu import _swiglu_backward_kernel, _swiglu_forward_kernel

    from opsmith.ops.rmsnorm import dweight_op

    ops: dict[str, Any] = {}
    # RMSNorm backward: dX, and per program (one per multiprocessor) a partial dW, summed by the backward below.
    ops["rms_norm_backward"] = triton_op(
        f"{ns}::rms_norm_backward", _rows(_rms_norm_backward_kernel),
        inputs=[InputDecl("dY", shape=("*R", "N"), dtype="X"), InputDecl("X", shape=("*R", "N"), dtype=torch.bfloat16),
                InputDecl("W", shape=("N",), dtype="X"), InputDecl("RSTD", shape=("*R",), dtype=torch.float32)],
        outputs=[OutputDecl("dX", SameAs("X")), OutputDecl("dW", shape=("sm_count", "N"), dtype=torch.float32)],
        extras=[Stride("dY", -2, name="dY_row_stride"), Stride("dX", -2, name="dX_row_stride"),
                Stride("X", -2, name="X_row_stride"), Const(0, name="W_row_stride"),
                Stride("RSTD", -1, name="RSTD_row_stride"), Stride("dW", 0, name="dW_row_stride"),
                Size("numel(RSTD)", name="n_rows"), Dim("N", name="n_cols"), Const(0.0, name="offset"),
                Size("cdiv(numel(RSTD), sm_count)", name="rows_per_program")],
        constexprs={"X_dtype": tl.bfloat16, "casting_mode": _LLAMA, "elementwise_affine": True, "COMPUTE_DW": True},
        geometry=Grid(grid=("sm_count",)))  # fmt: skip

    # The partial rows' column sums in the weight's dtype, in a fixed order: opsmith's own Triton RMSNorm's dweight
    # op (one launch; Liger's host code calls sum(0) and .to()).
    ops["column_sum"] = dweight_op("triton")
    # Both backwards are programs (data: the native library runs them in C++), not Python functions, which would
    # keep RMSNorm and SwiGLU on the Python path eagerly (docs/llama.md: 2.5x the host time per call).
    rms_norm_backward = (Step(ops["rms_norm_backward"], ("grad_Y", "X", "W", "RSTD"), ("dX", "dW_partial")),
                         Buffer("dW", like="W"), Step(ops["column_sum"], ("dW_partial", "dW")))  # fmt: skip

    ops["rms_norm"] = triton_op(
        f"{ns}::rms_norm", _rows(_rms_norm_forward_kernel),
        inputs=[InputDecl("X", shape=("*R", "N")), InputDecl("W", shape=("N",), dtype="X"), ScalarInput("eps", float)],
        outputs=[OutputDecl("Y", SameAs("X")), OutputDecl("RSTD", shape=("*R",), dtype=torch.float32)],
        extras=[Stride("Y", -2, name="Y_row_stride"), Stride("X", -2, name="X_row_stride"),
                Const(0, name="W_row_stride"), Stride("RSTD", -1, name="RSTD_row_stride"),
                Dim("N", name="n_cols"), Const(0.0, name="offset")],
        constexprs={"casting_mode": _LLAMA, "elementwise_affine": True},
        geometry=Grid(grid=("numel(RSTD)",)), reference=_rms_norm_ref, **traced,
        backward=Backward(rms_norm_backward, args=("grad_Y", "X", "W", "RSTD"), grads=("X", "W"),
                          returns=("dX", "dW")))  # fmt: skip

    # SwiGLU: c = silu(a) * b over rows of a, b and c, which the kernel addresses with one row stride.
    rows = [InputDecl("a", shape=("*R", "N")), InputDecl("b", shape=("*R", "N"), dtype="a")]
    shared = [Stride(("a", "b", "c"), -2, name="stride"), Const(1.0, name="gate_multiplier"), Dim("N", name="n_cols")]
    ops["swiglu_backward"] = triton_op(
        f"{ns}::swiglu_backward", _rows(_swiglu_backward_kernel),
        inputs=[InputDecl("c", shape=("*R", "N")), *(InputDecl(d.name, shape=d.shape, dtype="c", mutates=True)
                                                     for d in rows)],
        outputs=[], extras=shared, geometry=Grid(grid=("numel(c) // N",)), reference=_swiglu_backward_ref, **traced)  # fmt: skip

    # The kernel writes the gradients over a and b, the saved inputs, as Liger's backward does: no copy of two
    # (rows, N) tensors per layer. Sound where nothing reads a and b after the forward (a Llama MLP's gate and up
    # projections, whose own backward needs only their input) and the graph is differentiated once.
    swiglu_backward = (Step(ops["swiglu_backward"], ("grad_c", "a", "b")),)

    ops["swiglu"] = triton_op(
        f"{ns}::swiglu", _rows(_swiglu_forward_kernel), inputs=rows, outputs=[OutputDecl("c", SameAs("a"))],
        extras=shared, geometry=Grid(grid=("numel(a) // N",)), reference=_swiglu_ref, **traced,
        backward=Backward(swiglu_backward, args=("grad_c", "a", "b"), grads=("a", "b"), returns=("a", "b")))  # fmt: skip

    # RoPE: q (B, S, HQ, D) and k (B, S, HK, D) rotated in place, one program per token; cos and sin (CB, S, D).
    for name, backward in (("rope", False), ("rope_backward", True)):
        ops[name] = triton_op(
            f"{ns}::{name}", triton.heuristics({"BLOCK_SIZE": lambda a: max(a["pad_n_qh"], a["pad_n_kh"])})(_triton_rope),
            inputs=[InputDecl("q", shape=("B", "S", "HQ", "D"), mutates=True),
                    InputDecl("k", shape=("B", "S", "HK", "D"), dtype="q", mutates=True),
                    InputDecl("cos", shape=("CB", "S", "D")), InputDecl("sin", shape=("CB", "S", "D"), dtype="cos")],
            outputs=[],
            extras=[Stride("q", 1, name="q_row_stride"), Stride("k", 1, name="k_row_stride"),
                    Stride("cos", -2, name="cos_row_stride"), Stride("sin", -2, name="sin_row_stride"),
                    Dim("S", name="sl"), Const(0, name="bs"), Dim("CB", name="cos_bs"), Dim("HQ", name="n_qh"),
                    Dim("HK", name="n_kh"), Dim("D", name="hd"), Dim("D", name="rd"),
                    Size("pow2(HQ)", name="pad_n_qh"), Size("pow2(HK)", name="pad_n_kh"),
                    Const(0, name="pad_hd"), Size("pow2(D)", name="pad_rd")],
            constexprs={"BACKWARD_PASS": backward}, geometry=Grid(grid=("B * S",)), reference=_rope_ref(backward),
            **traced,
            requires=[Divisible("D", 2, why="the rotation pairs the two halves of the head")])  # fmt: skip

    # Cross-entropy of a chunk of logits (rows of V), "sum" reduction (the mean's divisor is applied by the caller,
    # a tensor, so no .item() breaks the graph); the logits are overwritten with the loss's gradient. Liger's
    # optional buffers stay None (declared optional, as its host code passes them).
    buffer = {"optional": True, "mutates": True, "shape": ("BT",)}
    ops["cross_entropy"] = triton_op(
        f"{ns}::cross_entropy",
        triton.heuristics({"BLOCK_SIZE": lambda a: min(32768, triton.next_power_of_2(a["n_cols"]))})(
            liger_cross_entropy_kernel),
        inputs=[InputDecl("X", shape=("BT", "V"), mutates=True), InputDecl("Y", shape=("BT",), dtype=torch.int64),
                InputDecl("weight", shape=("V",), dtype=torch.float32, optional=True),
                InputDecl("z_loss", dtype="X", **buffer), InputDecl("token_accuracy", dtype=torch.float32, **buffer),
                InputDecl("predicted_tokens", dtype=torch.int64, **buffer), ScalarInput("ignore_index", int)],
        outputs=[OutputDecl("loss", shape=("BT",), dtype=torch.float32, init=0)],
        extras=[Stride("X", 0, name="X_stride"), Stride("Y", 0, name="Y_stride"), Stride("loss", 0, name="loss_stride"),
                Stride("token_accuracy", 0, name="token_accuracy_stride"),
                Stride("predicted_tokens", 0, name="predicted_tokens_stride"), Dim("V", name="n_cols"),
                Const(1, name="n_non_ignore"), Const(1.0, name="sum_non_ignore_weight"), Const(0.0, name="weight_sum"),
                Const(0.0, name="softcap"), Present("weight", name="HAS_WEIGHT"), Present("z_loss", name="RETURN_Z_LOSS"),
                Present("token_accuracy", name="RETURN_TOKEN_ACCURACY"),
                Present("predicted_tokens", name="RETURN_PREDICTED_TOKENS")],
        constexprs={"reduction": "sum", "lse_square_scale": 0.0, "label_smoothing": 0.0, "HAS_SOFTCAPPING": False,
                    "HAS_GRADIENTS": True},
        autotune=Autotune([Config(num_warps=32)]), geometry=Grid(grid=("BT",)))  # fmt: skip
    return ops
