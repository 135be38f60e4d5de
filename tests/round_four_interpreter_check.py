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
