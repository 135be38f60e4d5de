"""Run by test_autograd_cpu.py with TRITON_INTERPRET=1: the Triton RMSNorm and the autograd rules on CPU.

Forward and backward against the PyTorch reference (row lengths below and above the block, one row, zero
rows, a non-contiguous input), gradcheck in float64, the errors for differentiating an op without a
backward and for double backward. Prints one line per check group; exits non-zero on a failure.
"""

import warnings

import torch

import opsmith as ok
from examples.catalog.tuned import register_tuned
from opsmith.ops.rmsnorm import reference_rms_norm, rms_norm

torch.manual_seed(0)


def grads(fn, x, w, dy):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    y = fn(x, w)
    gx, gw = torch.autograd.grad(y, (x, w), dy)
    return y, gx, gw


cases = 0
# Row lengths inside one block, above it (the looping path of the default BLOCK=4096 config), odd ones.
for shape in [(3, 37), (1, 4096), (2, 5000), (0, 64), (4, 1)]:
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(shape, dtype=dt)
        w = torch.randn(shape[-1], dtype=dt)
        dy = torch.randn(shape, dtype=dt)
        got = grads(lambda a, b: rms_norm(a, b, 1e-6), x, w, dy)
        want = grads(lambda a, b: reference_rms_norm(a.float(), b.float(), 1e-6), x.float(), w.float(), dy.float())
        tol = {"atol": 1e-5, "rtol": 1e-4} if dt == torch.float32 else {"atol": 5e-2, "rtol": 2e-2}
        for name, g, r in zip(("y", "dx", "dw"), got, want, strict=True):
            torch.testing.assert_close(g.float(), r, **tol, msg=lambda m, s=shape, d=dt, n=name: f"{s} {d} {n}: {m}")
        cases += 1
# A non-contiguous input (a transposed view) is made contiguous; its gradient has the input's layout.
x = torch.randn(64, 9).t()
w = torch.randn(64)
dy = torch.randn(9, 64)
got = grads(lambda a, b: rms_norm(a, b, 1e-5), x, w, dy)
want = grads(lambda a, b: reference_rms_norm(a, b, 1e-5), x, w, dy)
for g, r in zip(got, want, strict=True):
    torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)
cases += 1
print(f"rmsnorm forward/backward vs reference: {cases} cases")

# gradcheck in float64: x, weight, several row lengths.
for shape in [(3, 7), (2, 33)]:
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    w = torch.randn(shape[-1], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: rms_norm(a, b, 1e-6), (x, w), eps=1e-6, atol=1e-6, rtol=1e-5)
# Only x needs a gradient: dweight is not reduced.
x = torch.randn(2, 8, dtype=torch.float64, requires_grad=True)
w = torch.randn(8, dtype=torch.float64)
assert torch.autograd.gradcheck(lambda a: rms_norm(a, w, 1e-6), (x,), eps=1e-6, atol=1e-6, rtol=1e-5)
print("gradcheck float64: passed")

# Differentiating through an op without a backward raises DifferentiationError, whatever the warnings
# filters say (PyTorch's default for such ops only warns and returns a zero gradient).
relu = register_tuned("t_rms_interp", only=("relu_tt",))["relu_tt"].op
for mode in ("plain", "ignore", "record"):
    x = torch.randn(16, requires_grad=True)
    with warnings.catch_warnings(record=mode == "record"):
        if mode == "ignore":
            warnings.simplefilter("ignore")
        try:
            (relu(x).sum() + x.sum()).backward()
        except ok.DifferentiationError as e:
            assert "t_rms_interp::relu_tt" in str(e) and "declares no backward" in str(e), e
        else:
            raise AssertionError(f"backward through an op without a backward did not raise ({mode})")
    assert x.grad is None, "a gradient was accumulated although the backward failed"
with torch.no_grad():
    relu(torch.randn(16, requires_grad=True))  # no graph: no error
y = relu(torch.randn(16, requires_grad=True).detach())  # detached: no graph either
assert not y.requires_grad
print("missing backward: raises")

# Double backward is refused unless declared.
x = torch.randn(2, 8, dtype=torch.float64, requires_grad=True)
w = torch.randn(8, dtype=torch.float64, requires_grad=True)
try:
    torch.autograd.grad(rms_norm(x, w, 1e-6).sum(), (x,), create_graph=True)
except ok.DifferentiationError as e:
    assert "double backward" in str(e), e
else:
    raise AssertionError("double backward was not refused")
print("double backward: refused")
