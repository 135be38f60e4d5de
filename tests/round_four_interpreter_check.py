"""Run under TRITON_INTERPRET=1 by tests/test_round_four_cpu.py: issue 60's published forms give PyTorch's values
in the interpreter; prints one line per form checked."""

import torch
from round_four_ops import jsd_reference, triton_ops

import opsmith as ok

NS = "t_r4_interp"
torch.manual_seed(0)
ops = triton_ops(NS)

# Item 3: a Present flag a heuristic also sets (read back, or derived from the pointer) is the flag.
for name in ("add_readback", "add_derived"):
    x, b = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(ops[name](x, b), x + b)
    torch.testing.assert_close(ops[name](x, None), x)
    print(f"present beside heuristic: {name}")

# Item 2: an absent label reaches the kernel as a pointer it offsets and never reads.
x, label = torch.randn(5, 40), torch.tensor([1, 0, 1, 1, 0])
torch.testing.assert_close(ops["shifted_rows"](x, label), x * torch.where(label == 1, 2.0, 1.0)[:, None])
torch.testing.assert_close(ops["shifted_rows"](x, None), x)
print("dummy when absent: shifted_rows")

# Item 4: x ("M", "2 * N") gives y ("M", "N"); w ("B * S", "H") is x ("B", "S", "H") flat.
x = torch.randn(5, 2 * 37)
torch.testing.assert_close(ops["glu_rows"](x), x[:, :37] * torch.sigmoid(x[:, 37:]))
x, w = torch.randn(2, 3, 8), torch.randn(6, 8)
torch.testing.assert_close(ops["add_flat"](x, w), x + w.view(2, 3, 8))
print("shape expressions: glu_rows, add_flat")

# Item 8: a block bound to a size that is not a power of two is a CompileError naming the op and the fix (it was
# Triton's raw InterpreterError); bound with bucket="pow2" the op runs.
for bucket in ("exact", "pow2"):
    x = torch.randn(3, 40)
    try:
        torch.testing.assert_close(ops[f"row_sums_{bucket}"](x), x.sum(-1))
        print(f"pow2 hint: {bucket} ran")
    except ok.CompileError as e:
        assert f"{NS}::row_sums_{bucket}: kernel 'row_sums' failed to compile" in str(e), e
        assert "bucket='pow2'" in str(e) and "cols = tl.arange(0, BLOCK)" in str(e), e
        print(f"pow2 hint: {bucket} refused with the fix")

# Liger-Kernel's _jsd_kernel from its package, unchanged, with and without a label.
if "liger_jsd" not in ops:
    print("liger jsd: liger-kernel not installed")
else:
    X, Y = torch.randn(6, 100).log_softmax(-1), torch.randn(6, 100).log_softmax(-1)
    label = torch.tensor([1, -100, 3, 4, -100, 2])
    for lab, n in ((label, 4), (None, 6)):
        loss, dX = ops["liger_jsd"](X, Y, lab, n)
        want_loss, want_dx = jsd_reference(X, Y, lab, n)
        torch.testing.assert_close(loss, want_loss, atol=1e-6, rtol=1e-4)
        torch.testing.assert_close(dX, want_dx, atol=1e-6, rtol=1e-4)
    print("liger jsd: label given and absent")
