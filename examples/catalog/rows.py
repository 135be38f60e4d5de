"""Published row kernels declared as they are (issue 40): activations of any rank ``(..., n_cols)`` given to
kernels that take one row stride (``("*R", "N")`` with ``Stride(x, -2)``: a group before the strided axis is
flattened into it, or the tensor is copied where its strides do not allow that), a heuristic over a declared
constexpr (unsloth's ``GEMMA``), and Liger-Kernel's own RMSNorm forward from its package where installed.

A heuristic may read an int scalar input's value (``roll_rows``: ``WRAP = shift % n_cols != 0``).
``register_rows(ns)`` returns ``{name: Op}`` (empty without Triton); ``rms_reference`` is the PyTorch result.
"""

from __future__ import annotations

from typing import Any

import torch

from opsmith import Const, Dim, DimSize, InputDecl, OutputDecl, Reduction, SameAs, ScalarInput, Stride

__all__ = ["layer_norm_reference", "liger_rms_norm", "register_rows", "rms_backward_reference", "rms_reference"]


def _rows(x: str) -> list[Any]:
    """A tensor's row stride and the row length, named as the kernels name them."""
    return [Stride(x, -2, name=f"{x}_row_stride")]


def register_rows(ns: str) -> dict[str, Any]:
    from .tuned import triton_available

    if not triton_available():
        return {}
    from opsmith import triton_op

    from .kernels import rows_triton as rt

    block = DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")  # the block covering the row, compiled in
    ops: dict[str, Any] = {}
    for gemma in (False, True):
        tag = "_gemma" if gemma else ""
        ops[f"forward{tag}"] = triton_op(
            f"{ns}::rms_rows_forward{tag}", rt.rms_rows_forward,
            inputs=[InputDecl("X", shape=("*R", "N")), InputDecl("W", shape=("N",), dtype="X"), ScalarInput("eps", float)],
            outputs=[OutputDecl("Y", SameAs("X")), OutputDecl("RSTD", shape=("*R",), dtype=torch.float32)],
            extras=[*_rows("Y"), *_rows("X"), Dim("N", name="n_cols"), block],
            geometry=Reduction(reduce_dims=(-1,)), constexprs={"GEMMA": gemma})  # fmt: skip
        ops[f"backward{tag}"] = triton_op(
            f"{ns}::rms_rows_backward{tag}", rt.rms_rows_backward,
            inputs=[InputDecl("dY", shape=("*R", "N")), InputDecl("X", shape=("*R", "N"), dtype="dY"),
                    InputDecl("W", shape=("N",), dtype="dY"), InputDecl("RSTD", shape=("*R",), dtype=torch.float32)],
            outputs=[OutputDecl("dX", SameAs("X"))],
            extras=[*_rows("dY"), *_rows("dX"), *_rows("X"), Dim("N", name="n_cols"), block],
            geometry=Reduction(reduce_dims=(-1,)), constexprs={"GEMMA": gemma})  # fmt: skip
    # A scalar named like a constexpr is compiled in per value (Liger's label_smoothing)
    ops["smooth"] = triton_op(
        f"{ns}::smooth_rows", rt.smooth_rows, inputs=[InputDecl("X", shape=("R", "N")), ScalarInput("label_smoothing", float)],
        outputs=[OutputDecl("Y", SameAs("X"))],
        extras=[Dim("N", name="n_cols"), DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=Reduction(reduce_dims=(-1,)))  # fmt: skip
    # A heuristic over a scalar's value (WRAP = shift % n_cols != 0)
    ops["roll"] = triton_op(
        f"{ns}::roll_rows", rt.roll_rows, inputs=[InputDecl("X", shape=("R", "N")), ScalarInput("shift", int)],
        outputs=[OutputDecl("Y", SameAs("X"))],
        extras=[Dim("N", name="n_cols"), DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=Reduction(reduce_dims=(-1,)))  # fmt: skip
    ops["layer_norm"] = triton_op(
        f"{ns}::layer_norm_rows", rt.layer_norm_rows,
        inputs=[InputDecl("X", shape=("*R", "N")), InputDecl("W", shape=("N",), dtype="X"),
                InputDecl("B", shape=("N",), dtype="X"), ScalarInput("eps", float)],
        outputs=[OutputDecl("Y", SameAs("X")), OutputDecl("Mean", shape=("*R",), dtype=torch.float32),
                 OutputDecl("Rstd", shape=("*R",), dtype=torch.float32)],
        extras=[Stride(("X", "Y"), -2, name="stride"), Dim("N")], geometry=Reduction(reduce_dims=(-1,)))  # fmt: skip
    return ops


def layer_norm_reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> tuple:
    """(y, mean, rstd) as the layer-norm kernel gives them: float32 statistics, y in x's dtype."""
    xf = x.float()
    mean, var = xf.mean(-1), xf.var(-1, unbiased=False)
    rstd = torch.rsqrt(var + eps)
    return ((xf - mean[..., None]) * rstd[..., None] * w.float() + b.float()).to(x.dtype), mean, rstd


def liger_rms_norm(ns: str) -> Any:
    """Liger-Kernel's own ``_rms_norm_forward_kernel`` (Llama casting, with a weight), from the installed
    package: Liger's host code views x as ``(-1, n_cols)``; declared ``("*R", "N")`` it takes ``(B, T, H)``."""
    from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel

    from opsmith import triton_op

    return triton_op(
        f"{ns}::liger_rms_norm", _rms_norm_forward_kernel,
        inputs=[InputDecl("X", shape=("*R", "N")), InputDecl("W", shape=("N",), dtype="X"), ScalarInput("eps", float),
                ScalarInput("offset", float)],
        outputs=[OutputDecl("Y", SameAs("X")), OutputDecl("RSTD", shape=("*R",), dtype=torch.float32)],
        extras=[Stride("Y", -2, name="Y_row_stride"), Stride("X", -2, name="X_row_stride"),
                Const(0, name="W_row_stride"), Stride("RSTD", -1, name="RSTD_row_stride"), Dim("N", name="n_cols"),
                DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=Reduction(reduce_dims=(-1,)), constexprs={"casting_mode": 0, "elementwise_affine": True})  # fmt: skip


def rms_reference(
    x: torch.Tensor, w: torch.Tensor, eps: float, gemma: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, rstd): float32 statistics, y in x's dtype; Gemma's weight is 1 + w."""
    xf, wf = x.float(), w.float() + (1.0 if gemma else 0.0)
    rstd = torch.rsqrt(xf.pow(2).mean(-1) + eps)
    return (xf * rstd[..., None] * wf).to(x.dtype), rstd


def rms_backward_reference(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor,
                           gemma: bool = False) -> torch.Tensor:  # fmt: skip
    xf, wf = x.float(), w.float() + (1.0 if gemma else 0.0)
    normed, dyw = xf * rstd[..., None], dy.float() * wf
    return (rstd[..., None] * (dyw - normed * (dyw * normed).mean(-1, keepdim=True))).to(x.dtype)
