"""Issue 60's forms declared as ops, for the interpreter check, the CPU tests and tests/test_gpu_round_four.py:
each declaration as a user writes it for a published kernel (Liger's JSD from its package where installed)."""

import contextlib

import round_four_kernels as K
import torch
from round_four_cuda import FUSED_CLASSIFIER, GLU_SRC, LABEL_SRC, STD_HEADERS

import opsmith as ok

__all__ = [
    "classifier_backward",
    "cuda_ops",
    "cuda_optional_classifier",
    "glu_reference",
    "jsd_reference",
    "optional_classifier",
    "triton_ops",
]


def _flagged(ns: str, name: str, kernel):
    return ok.triton_op(f"{ns}::{name}", kernel,
                        inputs=[ok.InputDecl("x", torch.float32), ok.InputDecl("b", torch.float32, optional=True)],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Numel("x", name="n"), ok.Present("b", name="HAS_B")],
                        geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), constexprs={"BLOCK": 64})  # fmt: skip


def _row_sums(ns: str, bucket: str):
    return ok.triton_op(f"{ns}::row_sums_{bucket}", K.row_sums, inputs=[ok.InputDecl("x", shape=("R", "N"))],
                        outputs=[ok.OutputDecl("y", ("R",))],
                        extras=[ok.Dim("N", name="n"), ok.DimSize("x", -1, name="BLOCK", bucket=bucket)],
                        geometry=ok.Grid(grid=("R",)))  # fmt: skip


def triton_ops(ns: str) -> dict:
    """Item 3 (a Present beside a heuristic), item 2 (a dummy for an absent label), item 4 (size expressions),
    item 8 (a block that must be a power of two), and Liger's JSD."""
    ops = {name: _flagged(ns, name, getattr(K, name)) for name in ("add_readback", "add_derived")}
    ops["shifted_rows"] = ok.triton_op(f"{ns}::shifted_rows", K.shifted_rows,
        inputs=[ok.InputDecl("x", torch.float32, shape=("R", "N")),
                ok.InputDecl("label", torch.int64, shape=("R",), optional=True, absent="dummy")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Dim("N", name="n_cols"), ok.Present("label", name="HAS_LABEL"),
                ok.DimSize("x", -1, name="BLOCK", bucket="pow2")],
        geometry=ok.Grid(grid=("R",)))  # fmt: skip
    ops["glu_rows"] = ok.triton_op(f"{ns}::glu_rows", K.glu_rows,
        inputs=[ok.InputDecl("x", torch.float32, shape=("M", "2 * N"))], outputs=[ok.OutputDecl("y", ("M", "N"))],
        extras=[ok.Dim("N", name="n")], geometry=ok.Grid(grid=("M",)), constexprs={"BLOCK": 64})  # fmt: skip
    ops["add_flat"] = ok.triton_op(f"{ns}::add_flat", K.add_flat,
        inputs=[ok.InputDecl("x", torch.float32, shape=("B", "S", "H")),
                ok.InputDecl("w", torch.float32, shape=("B * S", "H"))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
        geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), constexprs={"BLOCK": 64})  # fmt: skip
    ops["row_sums_exact"], ops["row_sums_pow2"] = _row_sums(ns, "exact"), _row_sums(ns, "pow2")
    with contextlib.suppress(ImportError):  # liger-kernel is a test extra
        ops["liger_jsd"] = liger_jsd(ns)
    return ops


def liger_jsd(ns: str, name: str = "liger_jsd"):
    """Liger-Kernel's ``_jsd_kernel`` from its package (ImportError without it): its kernel moves label_ptr before
    HAS_LABEL says whether it is read, so an absent label is a dummy."""
    from liger_kernel.ops.jsd import _jsd_kernel

    return ok.triton_op(f"{ns}::{name}", _jsd_kernel,
        inputs=[ok.InputDecl("X", torch.float32, shape=("BT", "V")), ok.InputDecl("Y", torch.float32, shape=("BT", "V")),
                ok.InputDecl("label", torch.int64, shape=("BT",), optional=True, absent="dummy"),
                ok.ScalarInput("n_non_ignore", int)],
        outputs=[ok.OutputDecl("loss", ok.SameAs("X"), init=0), ok.OutputDecl("dX", ok.SameAs("X"))],
        extras=[ok.Stride("X", 0, name="X_stride"), ok.Stride("Y", 0, name="Y_stride"),
                ok.Stride("loss", 0, name="loss_stride"), ok.Stride("dX", 0, name="dX_stride"),
                ok.Dim("V", name="n_cols"), ok.Present("label", name="HAS_LABEL")],
        geometry=ok.Grid(grid=("BT",)), constexprs={"beta": 0.5, "ignore_index": -100, "BLOCK_SIZE": 1024})  # fmt: skip


def optional_classifier(ns: str, backward: bool = False):
    """llm.c's fused classifier in Triton with its probabilities and gradient as optional outputs (item 5): the
    call asks for them (``return_probs``, ``return_dlogits``); left out, the kernel gets None compiled in. With
    ``backward``, the loss differentiates through a Python backward (the optional outputs take no gradient)."""
    bwd = ok.Backward(classifier_backward, args=("grad_losses", "logits", "targets"), grads=("logits",))
    return ok.triton_op(f"{ns}::optional_classifier{'_bwd' if backward else ''}", K.fused_classifier,
        inputs=[ok.InputDecl("logits", torch.float32, shape=("R", "V")),
                ok.InputDecl("targets", torch.int64, shape=("R",)), ok.ScalarInput("dloss", float)],
        outputs=[ok.OutputDecl("losses", ("R",)), ok.OutputDecl("probs", ok.SameAs("logits"), optional=True),
                 ok.OutputDecl("dlogits", ok.SameAs("logits"), optional=True)],
        extras=[ok.Dim("V", name="n_cols"), ok.DimSize("logits", -1, name="BLOCK", bucket="pow2")],
        geometry=ok.Reduction(reduce_dims=(-1,)), backward=bwd if backward else None)  # fmt: skip


def cuda_optional_classifier(ns: str, name: str = "cuda_optional_classifier"):
    """llm.c's fused classifier (CUDA C++, unchanged: it tests ``probs != NULL``) with dlogits and probs declared
    as optional outputs (item 5)."""
    return ok.cuda_kernel_op(f"{ns}::{name}", ok.KernelSpec(
        kernel_source=FUSED_CLASSIFIER, kernel_name="fused_classifier",
        inputs=[ok.InputDecl("logits", shape=("R", "V")), ok.InputDecl("targets", shape=("R",)),
                ok.ScalarInput("dloss", float)],
        outputs=[ok.OutputDecl("losses", ("R",)), ok.OutputDecl("dlogits", ok.SameAs("logits"), optional=True),
                 ok.OutputDecl("probs", ok.SameAs("logits"), optional=True)],
        extras=[ok.Dim("V")], geometry=ok.Grid(grid=("R",), block=(32,))))  # fmt: skip


def classifier_backward(g, logits, targets):
    p = torch.softmax(logits.float(), -1)
    return (p - torch.nn.functional.one_hot(targets, logits.shape[-1])) * g[:, None]


def cuda_ops(ns: str) -> dict:
    """CUDA C++: the standard headers, llm.c's style of classifier, a GLU over ``("M", "2 * N")``, a flat add
    over ``("B * S", "H")`` (declaration only) and a label pointer moved before it is read (a dummy)."""
    ops = {"every_header": ok.cuda_kernel_op(f"{ns}::every_header", ok.KernelSpec(
        kernel_source=STD_HEADERS, kernel_name="every_header", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise()))}  # fmt: skip
    ops["fused_classifier"] = ok.cuda_kernel_op(f"{ns}::fused_classifier", ok.KernelSpec(
        kernel_source=FUSED_CLASSIFIER, kernel_name="fused_classifier",
        inputs=[ok.InputDecl("logits", shape=("R", "V")), ok.InputDecl("targets", shape=("R",)),
                ok.ScalarInput("dloss", float)],
        outputs=[ok.OutputDecl("losses", ("R",)), ok.OutputDecl("dlogits", ok.SameAs("logits")),
                 ok.OutputDecl("probs", ok.SameAs("logits"))],
        extras=[ok.Dim("V")], geometry=ok.Grid(grid=("R",), block=(32,))))  # fmt: skip
    # Today's form of llm.c's optional outputs (issue 60, item 5 is the declared form): the caller passes the
    # buffers it wants written, or None for a NULL pointer the kernel tests.
    ops["fused_classifier_buffers"] = ok.cuda_kernel_op(f"{ns}::fused_classifier_buffers", ok.KernelSpec(
        kernel_source=FUSED_CLASSIFIER, kernel_name="fused_classifier",
        inputs=[ok.InputDecl("logits", shape=("R", "V")), ok.InputDecl("targets", shape=("R",)),
                ok.InputDecl("dlogits", shape=("R", "V"), optional=True, mutates=True),
                ok.InputDecl("probs", shape=("R", "V"), optional=True, mutates=True), ok.ScalarInput("dloss", float)],
        outputs=[ok.OutputDecl("losses", ("R",))], extras=[ok.Dim("V")],
        geometry=ok.Grid(grid=("R",), block=(32,))))  # fmt: skip
    ops["glu"] = ok.cuda_kernel_op(f"{ns}::glu", ok.KernelSpec(
        kernel_source=GLU_SRC, kernel_name="glu", inputs=[ok.InputDecl("x", shape=("M", "2 * N"))],
        outputs=[ok.OutputDecl("y", ("M", "N"))], extras=[ok.Dim("N", name="n")],
        geometry=ok.Grid(grid=("M",), block=(128,))), reference=glu_reference)  # fmt: skip
    ops["flat"] = ok.cuda_kernel_op(f"{ns}::flat", ok.KernelSpec(
        kernel_source='extern "C" __global__ void k(const float* x, const float* w, float* y, int n) {}',
        kernel_name="k", inputs=[ok.InputDecl("x", shape=("B", "S", "H")), ok.InputDecl("w", shape=("B * S", "H"))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
        geometry=ok.Elementwise()), reference=lambda x, w: x + w.view(x.shape))  # fmt: skip
    ops["rows_cpp"] = ok.cuda_kernel_op(f"{ns}::rows_cpp", ok.KernelSpec(
        kernel_source=LABEL_SRC, kernel_name="rows",
        inputs=[ok.InputDecl("x", shape=("R", "N")), ok.InputDecl("label", shape=("R",), optional=True, absent="dummy")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("N", name="n"), ok.Present("label", name="has_label")],
        geometry=ok.Grid(grid=("R",), block=(128,))))  # fmt: skip
    return ops


def glu_reference(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    return x[:, :n] * torch.sigmoid(x[:, n:])


def jsd_reference(X, Y, label, n):
    """Liger's JSD at beta = 0.5, per element: loss and its gradient in X, scaled by 1 / n; rows whose label is
    the ignore index: no loss, a zero gradient."""
    log_m = torch.logaddexp(X, Y) - torch.log(torch.tensor(2.0, device=X.device))
    loss = 0.5 * Y.exp() * (Y - log_m) + 0.5 * X.exp() * (X - log_m)
    dX = 0.5 * X.exp() * (X - log_m)
    if label is not None:
        keep = (label != -100)[:, None]
        loss, dX = loss * keep, dX * keep
    return loss / n, dX / n
