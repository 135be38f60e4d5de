"""Run under TRITON_INTERPRET=1 by tests/test_round_four_cpu.py: issue 60's published forms give PyTorch's values
in the interpreter, outputs poisoned first; prints one line per form checked."""

import round_four_kernels as K
import torch

import opsmith as ok

NS = "t_r4_interp"
torch.manual_seed(0)


def present_beside_heuristic() -> None:
    """Item 3: a Present flag a heuristic also sets (read back, or derived from the pointer) is the flag."""
    for kernel in (K.add_readback, K.add_derived):
        op = ok.triton_op(f"{NS}::{kernel.fn.__name__}", kernel,
                          inputs=[ok.InputDecl("x", torch.float32), ok.InputDecl("b", torch.float32, optional=True)],
                          outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                          extras=[ok.Numel("x", name="n"), ok.Present("b", name="HAS_B")],
                          geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), constexprs={"BLOCK": 64})  # fmt: skip
        x, b = torch.randn(100), torch.randn(100)
        torch.testing.assert_close(op(x, b), x + b)
        torch.testing.assert_close(op(x, None), x)
        print(f"present beside heuristic: {kernel.fn.__name__}")


present_beside_heuristic()


def dummy_when_absent() -> None:
    """Item 2: an absent label reaches the kernel as a pointer it offsets and never reads."""
    op = ok.triton_op(f"{NS}::shifted_rows", K.shifted_rows,
                      inputs=[ok.InputDecl("x", torch.float32, shape=("R", "N")),
                              ok.InputDecl("label", torch.int64, shape=("R",), optional=True, absent="dummy")],
                      outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                      extras=[ok.Dim("N", name="n_cols"), ok.Present("label", name="HAS_LABEL")],
                      geometry=ok.Grid(grid=("R",)), constexprs={"BLOCK": 64})  # fmt: skip
    x, label = torch.randn(5, 40), torch.tensor([1, 0, 1, 1, 0])
    torch.testing.assert_close(op(x, label), x * torch.where(label == 1, 2.0, 1.0)[:, None])
    torch.testing.assert_close(op(x, None), x)
    print("dummy when absent: shifted_rows")


dummy_when_absent()


def shape_expressions() -> None:
    """Item 4: x ``("M", "2 * N")`` gives y ``("M", "N")``; w ``("B * S", "H")`` is x ``("B", "S", "H")`` flat."""
    glu = ok.triton_op(f"{NS}::glu_rows", K.glu_rows, inputs=[ok.InputDecl("x", torch.float32, shape=("M", "2 * N"))],
                       outputs=[ok.OutputDecl("y", ("M", "N"))], extras=[ok.Dim("N", name="n")],
                       geometry=ok.Grid(grid=("M",)), constexprs={"BLOCK": 64})  # fmt: skip
    x = torch.randn(5, 2 * 37)
    torch.testing.assert_close(glu(x), x[:, :37] * torch.sigmoid(x[:, 37:]))
    flat = ok.triton_op(f"{NS}::add_flat", K.add_flat,
                        inputs=[ok.InputDecl("x", torch.float32, shape=("B", "S", "H")),
                                ok.InputDecl("w", torch.float32, shape=("B * S", "H"))],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                        geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), constexprs={"BLOCK": 64})  # fmt: skip
    x, w = torch.randn(2, 3, 8), torch.randn(6, 8)
    y = flat(x, w)
    torch.testing.assert_close(y, x + w.view(2, 3, 8))
    print("shape expressions: glu_rows, add_flat")


shape_expressions()


def jsd_op(ns: str):
    """Liger-Kernel's ``_jsd_kernel`` from its package, unchanged: the label pointer is moved before HAS_LABEL
    says whether it is read, so an absent label is a dummy (``absent="dummy"``)."""
    from liger_kernel.ops.jsd import _jsd_kernel

    return ok.triton_op(f"{ns}::liger_jsd", _jsd_kernel,
                        inputs=[ok.InputDecl("X", torch.float32, shape=("BT", "V")),
                                ok.InputDecl("Y", torch.float32, shape=("BT", "V")),
                                ok.InputDecl("label", torch.int64, shape=("BT",), optional=True, absent="dummy"),
                                ok.ScalarInput("n_non_ignore", int)],
                        outputs=[ok.OutputDecl("loss", ok.SameAs("X"), init=0), ok.OutputDecl("dX", ok.SameAs("X"))],
                        extras=[ok.Stride("X", 0, name="X_stride"), ok.Stride("Y", 0, name="Y_stride"),
                                ok.Stride("loss", 0, name="loss_stride"), ok.Stride("dX", 0, name="dX_stride"),
                                ok.Dim("V", name="n_cols"), ok.Present("label", name="HAS_LABEL")],
                        geometry=ok.Grid(grid=("BT",)),
                        constexprs={"beta": 0.5, "ignore_index": -100, "BLOCK_SIZE": 64})  # fmt: skip


def jsd_reference(X, Y, label, n):
    """Liger's JSD at beta = 0.5, per element: loss and its gradient in X, scaled by 1 / n; rows whose label is
    the ignore index: no loss, a zero gradient."""
    log_m = torch.logaddexp(X, Y) - torch.log(torch.tensor(2.0))
    loss = 0.5 * Y.exp() * (Y - log_m) + 0.5 * X.exp() * (X - log_m)
    dX = 0.5 * X.exp() * (X - log_m)
    if label is not None:
        keep = (label != -100)[:, None]
        loss, dX = loss * keep, dX * keep
    return loss / n, dX / n


def liger_jsd() -> None:
    try:
        op = jsd_op(NS)
    except ImportError:
        print("liger jsd: liger-kernel not installed")
        return
    X, Y = torch.randn(6, 100).log_softmax(-1), torch.randn(6, 100).log_softmax(-1)
    label = torch.tensor([1, -100, 3, 4, -100, 2])
    for lab, n in ((label, 4), (None, 6)):
        loss, dX = op(X, Y, lab, n)
        want_loss, want_dx = jsd_reference(X, Y, lab, n)
        torch.testing.assert_close(loss, want_loss, atol=1e-6, rtol=1e-4)
        torch.testing.assert_close(dX, want_dx, atol=1e-6, rtol=1e-4)
    print("liger jsd: label given and absent")


liger_jsd()
