"""Run by test_published_rows_cpu.py with TRITON_INTERPRET=1: the row kernels of examples/catalog/rows.py on
CPU tensors of rank 2 to 4, dense, row-sliced (a row stride the kernel is given: no copy) and with the leading
axes transposed (their strides do not flatten into one row stride: copied), forward and the backward whose
GEMMA constexpr a heuristic computes from the declared one, and the layer norm whose block and warps
heuristics choose, and the roll whose WRAP a heuristic computes from a scalar's value, against PyTorch."""

import torch

from examples.catalog.rows import layer_norm_reference, register_rows, rms_backward_reference, rms_reference

ops = register_rows("t_rows_interp")
torch.manual_seed(0)
n = 0
for gemma in (False, True):
    tag = "_gemma" if gemma else ""
    fwd, bwd = ops[f"forward{tag}"], ops[f"backward{tag}"]
    for x in (torch.randn(2, 3, 96), torch.randn(2, 3, 130)[..., :96], torch.randn(3, 2, 96).transpose(0, 1),
              torch.randn(5, 96), torch.randn(2, 2, 2, 96)):  # fmt: skip
        w, dy = torch.randn(96), torch.randn(x.shape)
        y, rstd = fwd(x, w, 1e-6)
        want_y, want_rstd = rms_reference(x, w, 1e-6, gemma)
        torch.testing.assert_close(y, want_y, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(rstd, want_rstd, atol=1e-4, rtol=1e-4)
        dx = bwd(dy, x, w, rstd)
        torch.testing.assert_close(dx, rms_backward_reference(dy, x, w, rstd, gemma), atol=1e-4, rtol=1e-4)
        n += 1
for x in (torch.randn(2, 3, 300), torch.randn(4, 1000), torch.randn(2, 10000)):  # 10,000: the capped block loops
    w, b = torch.randn(x.shape[-1]), torch.randn(x.shape[-1])
    for got, want in zip(ops["layer_norm"](x, w, b, 1e-5), layer_norm_reference(x, w, b, 1e-5), strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    n += 1
for ls in (0.0, 0.1, -0.0):  # a constexpr set per call (compiled per value)
    x = torch.softmax(torch.randn(3, 50), -1)
    want = x * (1 - ls) + ls / 50 if ls != 0.0 else x
    torch.testing.assert_close(ops["smooth"](x, ls), want, atol=1e-6, rtol=1e-6)
    n += 1
for shift in (0, 3, 50, -7, 123):  # a heuristic over the scalar shift (WRAP = shift % n_cols != 0)
    x = torch.randn(4, 50)
    assert torch.equal(ops["roll"](x, shift), torch.roll(x, shift, -1))
    n += 1
print(f"checked {n} cases")
