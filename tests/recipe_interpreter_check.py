"""Run under TRITON_INTERPRET=1 by tests/test_llama_recipe_cpu.py: the recipe's column sums (RMSNorm's backward
program's second step, opsmith's RMSNorm dweight kernel) at ragged sizes, the output poisoned first, and SwiGLU's backward program (Liger's kernel
writing over its saved inputs) against autograd through the reference, on CPU tensors in Triton's interpreter.
Liger's RMSNorm kernels do not run in the interpreter (a float scalar's ``.to()``); the GPU test covers them."""

import torch

from examples.llama.kernels import _swiglu_ref, llama_kernels

ops = llama_kernels("recipe_interp")
g = torch.Generator().manual_seed(0)
cases = 0
for rows, n in ((132, 2048), (133, 2500), (5, 31)):
    p = torch.randn(rows, n, generator=g)
    out = torch.full((n,), float("nan"), dtype=torch.bfloat16)
    ops["column_sum"](p, out)
    torch.testing.assert_close(out.float(), p.sum(0).to(torch.bfloat16).float(), rtol=1e-2, atol=1e-2)
    cases += 1

for shape in ((4, 64), (3, 5, 96)):
    dy = torch.randn(shape, generator=g).to(torch.bfloat16)
    a = torch.randn(shape, generator=g).to(torch.bfloat16).requires_grad_()
    b = torch.randn(shape, generator=g).to(torch.bfloat16).requires_grad_()
    ar, br = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ops["swiglu"](a, b).backward(dy)
    _swiglu_ref(ar, br).backward(dy)
    torch.testing.assert_close(a.grad.float(), ar.grad.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(b.grad.float(), br.grad.float(), rtol=2e-2, atol=2e-2)
    cases += 1
print(f"checked {cases} cases")
