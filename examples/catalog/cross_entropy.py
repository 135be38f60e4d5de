"""Cross-entropy kernels whose host code passes ``None`` for features that are off (issue 40, item 1): optional
tensor inputs (``InputDecl(optional=True)``, schema ``Tensor?``) with presence flags (``Present``), as
Liger-Kernel's ``liger_cross_entropy_kernel`` takes its class weights, z-loss, token-accuracy and
predicted-token buffers.

``register_cross_entropy(ns)`` declares ``ce_rows`` (our own kernel in Liger's style, ``kernels/rows_triton.py``)
and, where liger-kernel is installed, Liger's own kernel from its package, unchanged. Both write the loss's
gradient into the logits in place (``mutates=True``), as Liger's forward does; the optional buffers a kernel fills
are optional in-place inputs. ``ce_reference`` is the PyTorch result.
"""

from __future__ import annotations

from typing import Any

import torch

from opsmith import Autotune, Config, Const, Dim, Grid, InputDecl, OutputDecl, Present, ScalarInput, Stride

__all__ = ["ce_reference", "liger_cross_entropy", "register_cross_entropy"]


def register_cross_entropy(ns: str) -> dict[str, Any]:
    """``{"ce_rows": op}`` (empty without Triton); ``liger_cross_entropy(ns)`` adds Liger's own."""
    from .tuned import triton_available

    if not triton_available():
        return {}
    import triton

    from opsmith import triton_op

    from .kernels import rows_triton as rt

    block = triton.heuristics({"BLOCK_SIZE": lambda a: triton.next_power_of_2(a["n_cols"])})(rt.ce_rows)
    op = triton_op(
        f"{ns}::ce_rows", block,
        inputs=[InputDecl("X", shape=("BT", "V"), mutates=True), InputDecl("Y", shape=("BT",), dtype=torch.int64),
                InputDecl("weight", shape=("V",), dtype=torch.float32, optional=True),
                InputDecl("z_loss", shape=("BT",), dtype=torch.float32, optional=True, mutates=True),
                ScalarInput("n_non_ignore", float), ScalarInput("ignore_index", int)],
        outputs=[OutputDecl("loss", shape=("BT",), dtype=torch.float32)],
        extras=[Stride("X", 0, name="X_stride"), Dim("V", name="n_cols"), Present("weight", name="HAS_WEIGHT"),
                Present("z_loss", name="RETURN_Z_LOSS")],
        geometry=Grid(grid=("BT",)))  # fmt: skip
    return {"ce_rows": op}


def liger_cross_entropy(ns: str) -> Any:
    """Liger-Kernel's own ``liger_cross_entropy_kernel`` from the installed package, declared with its four
    optional buffers: class ``weight`` (``HAS_WEIGHT``), ``z_loss`` (``RETURN_Z_LOSS``), ``token_accuracy`` and
    ``predicted_tokens``. ``lse_square_scale`` and ``label_smoothing`` are scalars the kernel compiles in (its
    ``tl.constexpr``s), one kernel per value; ``reduction="mean"``, no softcapping, gradients on. Liger's host
    code picks ``BLOCK_SIZE = min(32768, next_power_of_2(V))`` and 32 warps (16 on its AMD path); so does this
    declaration, as a heuristic."""
    import triton
    from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel

    from opsmith import triton_op

    kernel = triton.heuristics({"BLOCK_SIZE": lambda a: min(32768, triton.next_power_of_2(a["n_cols"]))})(
        liger_cross_entropy_kernel
    )
    buffer = {"optional": True, "mutates": True, "shape": ("BT",)}
    return triton_op(
        f"{ns}::liger_cross_entropy", kernel,
        inputs=[InputDecl("X", shape=("BT", "V"), mutates=True), InputDecl("Y", shape=("BT",), dtype=torch.int64),
                InputDecl("weight", shape=("V",), dtype=torch.float32, optional=True),
                InputDecl("z_loss", dtype=torch.float32, **buffer),
                InputDecl("token_accuracy", dtype=torch.float32, **buffer),
                InputDecl("predicted_tokens", dtype=torch.int64, **buffer),
                ScalarInput("n_non_ignore", float), ScalarInput("sum_non_ignore_weight", float),
                ScalarInput("weight_sum", float), ScalarInput("ignore_index", int),
                ScalarInput("lse_square_scale", float), ScalarInput("label_smoothing", float)],
        # Liger's kernel returns early for an ignored row without writing its loss (its host zeroes the buffer)
        outputs=[OutputDecl("loss", shape=("BT",), dtype=torch.float32, init=0)],
        extras=[Stride("X", 0, name="X_stride"), Stride("Y", 0, name="Y_stride"), Stride("loss", 0, name="loss_stride"),
                Stride("token_accuracy", 0, name="token_accuracy_stride"),
                Stride("predicted_tokens", 0, name="predicted_tokens_stride"), Dim("V", name="n_cols"),
                Present("weight", name="HAS_WEIGHT"), Present("z_loss", name="RETURN_Z_LOSS"),
                Present("token_accuracy", name="RETURN_TOKEN_ACCURACY"),
                Present("predicted_tokens", name="RETURN_PREDICTED_TOKENS"),
                Const(0.0, name="softcap")],
        constexprs={"reduction": "mean", "HAS_SOFTCAPPING": False, "HAS_GRADIENTS": True},
        autotune=Autotune([Config(num_warps=32)]), geometry=Grid(grid=("BT",)))  # fmt: skip


def ce_reference(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None, ignore_index: int = -100,
                 label_smoothing: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """(the mean loss, its gradient with respect to x, per-row lse ** 2 (0 for ignored rows)), in float32."""
    xf = x.detach().float().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(xf, y, weight=weight, ignore_index=ignore_index,
                                             label_smoothing=label_smoothing)  # fmt: skip
    loss.backward()
    lse = torch.logsumexp(xf.detach(), dim=-1)
    return loss.detach(), xf.grad, torch.where(y != ignore_index, lse * lse, 0.0)
