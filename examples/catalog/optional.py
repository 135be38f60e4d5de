"""Kernels whose host code passes ``None`` for a feature that is off (issue 40, item 1): optional tensor inputs
(``InputDecl(optional=True)``, schema ``Tensor?``) with presence flags (``Present``), as Liger-Kernel's
``liger_cross_entropy_kernel`` takes its class weights, z-loss, token-accuracy and predicted-token buffers.

``register_optional(ns)`` declares ``scale_rows`` (CUDA C++: ``y = x * w + b`` with ``w`` and ``b`` optional, a
null pointer when absent) and ``ce_rows`` (our own Triton kernel in Liger's style, ``kernels/rows_triton.py``);
``liger_cross_entropy(ns)`` declares Liger's own kernel from its package, unchanged. Both cross-entropies write
the loss's gradient into the logits in place (``mutates=True``), as Liger's forward does; the optional buffers a
kernel fills are optional in-place inputs. ``ce_reference`` and ``scale_reference`` are the PyTorch results.
"""

from __future__ import annotations

from typing import Any

import torch

from opsmith import Autotune, Config, Const, Dim, Grid, InputDecl, OutputDecl, Present, SameAs, ScalarInput, Stride

__all__ = ["ce_reference", "liger_case", "liger_cross_entropy", "register_optional", "scale_reference"]

SCALE_ROWS = r"""
// y = x * w + b over rows of n_cols; w and b are optional: a null pointer, with has_w / has_b saying so. w is
// read at its own stride (0 when absent), so a strided or broadcast weight is not copied.
extern "C" __global__ void scale_rows(const float* x, const float* w, const float* b, float* y, long long n,
                                      int n_cols, bool has_w, bool has_b, long long w_stride) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int c = i % n_cols;
  float v = x[i];
  if (has_w) v *= w[c * w_stride];
  if (has_b) v += b[c];
  y[i] = v;
}
"""


def register_optional(ns: str) -> dict[str, Any]:
    """``{"scale_rows": op, "ce_rows": op}`` (``ce_rows`` only with Triton); ``liger_cross_entropy(ns)`` adds
    Liger's own."""
    from opsmith import Elementwise, KernelSpec, Numel, cuda_kernel_op

    from .tuned import triton_available

    ops: dict[str, Any] = {"scale_rows": cuda_kernel_op(f"{ns}::scale_rows", KernelSpec(
        kernel_source=SCALE_ROWS, kernel_name="scale_rows",
        inputs=[InputDecl("x", shape=("*R", "N")), InputDecl("w", shape=("N",), optional=True),
                InputDecl("b", shape=("N",), optional=True)],
        outputs=[OutputDecl("y", SameAs("x"))],
        extras=[Numel("x", name="n", dtype="int64"), Dim("N", name="n_cols"), Present("w", name="has_w"),
                Present("b", name="has_b"), Stride("w", 0, name="w_stride", dtype="int64")],
        geometry=Elementwise(), index_dtype="int64"))}  # fmt: skip
    if not triton_available():
        return ops
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
    return {**ops, "ce_rows": op}


def liger_cross_entropy(ns: str) -> Any:
    """Liger-Kernel's own ``liger_cross_entropy_kernel`` from the installed package, declared with its four
    optional buffers: class ``weight`` (``HAS_WEIGHT``), ``z_loss`` (``RETURN_Z_LOSS``), ``token_accuracy`` and
    ``predicted_tokens``. ``lse_square_scale`` and ``label_smoothing`` are scalars the kernel compiles in (its
    ``tl.constexpr``s), one kernel per value; ``reduction="mean"``, no softcapping, gradients on. Liger's host
    code picks ``BLOCK_SIZE = min(32768, next_power_of_2(V))`` and 32 warps (16 on its AMD path); so does this
    declaration: the block as a heuristic, the warps as its one config."""
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
                InputDecl("z_loss", dtype="X", **buffer),
                InputDecl("token_accuracy", dtype=torch.float32, **buffer),
                InputDecl("predicted_tokens", dtype=torch.int64, **buffer),
                ScalarInput("n_non_ignore", int), ScalarInput("sum_non_ignore_weight", float),
                ScalarInput("weight_sum", float), ScalarInput("ignore_index", int),
                ScalarInput("lse_square_scale", float), ScalarInput("label_smoothing", float)],
        # Liger's kernel returns early for an ignored row without writing its loss (its host zeroes the buffer)
        outputs=[OutputDecl("loss", shape=("BT",), dtype_from="X", init=0)],  # in X's dtype, as Liger's host
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


def scale_reference(x: torch.Tensor, w: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor:
    y = x if w is None else x * w
    return y if b is None else y + b


def liger_case(op: Any) -> Any:
    """``opsmith check`` of Liger's cross-entropy (weights and buffers None, ``reduction="mean"``): per row its
    loss, and the gradient it writes into the logits, against PyTorch. A third of the rows are ignored."""
    from opsmith import CheckCase

    def inputs(shape: tuple, dtype: torch.dtype, device: str) -> tuple:
        rows, v = shape
        x, y = torch.randn(rows, v, dtype=dtype, device=device), torch.randint(0, v, (rows,), device=device)
        y[1::3] = -100
        # The divisor of the mean: Liger passes the count of kept rows; a constant here, so torch.export (which
        # specializes an int argument) meets the same value at every shape the check runs
        return x, y, None, None, None, None, 5, 5.0, 0.0, -100, 0.0, 0.0

    def reference(x: torch.Tensor, y: torch.Tensor, *rest: Any) -> torch.Tensor:
        n, keep = rest[4], y != -100
        xf = x.float()
        lse = torch.logsumexp(xf, -1)
        x_y = xf.gather(1, y.clamp(min=0)[:, None])[:, 0]
        grad = torch.softmax(xf, -1) - torch.nn.functional.one_hot(y.clamp(min=0), x.shape[-1]).float()
        x.copy_(torch.where(keep[:, None], grad / n, 0.0).to(x.dtype))
        return torch.where(keep, (lse - x_y) / n, 0.0).to(x.dtype)

    return CheckCase(op, inputs=inputs, reference=reference, shapes=((16, 1000), (7, 4096)), dtypes=(torch.float32,),
                     tol=1e-5)  # fmt: skip
