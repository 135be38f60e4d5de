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
