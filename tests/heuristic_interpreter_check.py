"""Run under TRITON_INTERPRET=1 by tests/test_heuristic_operators_cpu.py: a heuristic over an int scalar's bits picks
the kernel Triton's own launcher picks, for every flags value from -8 to 8 (outputs poisoned first)."""

import torch
from heuristic_kernels import flagged_scale

import opsmith as ok

op = ok.triton_op("t_heur_bits::scale", flagged_scale, inputs=[ok.InputDecl("x"), ok.ScalarInput("flags", int)],
                  outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                  geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), autotune=ok.Autotune([ok.Config({"BLOCK": 64})]))  # fmt: skip
x = torch.randn(100)
for flags in range(-8, 9):
    want = torch.full_like(x, float("nan"))
    flagged_scale[(2,)](x, want, 100, flags, BLOCK=64)  # Triton's own launcher runs the heuristics in Python
    got = op(x, flags)
    scale = (2 if flags & 2 else 1) * (3 if flags & 5 == 5 else 1)
    torch.testing.assert_close(want, x * scale)
    torch.testing.assert_close(got, want, msg=f"flags={flags}")
print("checked 17 flags")
