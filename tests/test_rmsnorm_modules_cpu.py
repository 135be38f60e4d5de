"""The shipped RMSNorm modules are drop-ins (issue 50, item 4): on a CPU tensor they compute the reference, as
``torch.nn.RMSNorm`` runs there, with gradients; the functional ``rms_norm`` keeps refusing CPU tensors, naming
the fix; fake tensors still trace the op (tests/test_autograd_cpu.py)."""

from __future__ import annotations

import pytest
import torch

import opsmith as ok
from opsmith.ops.rmsnorm import LlamaRMSNorm, RMSNorm, rms_norm


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_a_module_on_cpu_tensors_computes_the_reference_with_gradients(impl):
    if impl == "triton":
        pytest.importorskip("triton", reason="the Triton RMSNorm (the test extra installs Triton)")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 64, generator=g, requires_grad=True)
    ours, theirs = RMSNorm(64, eps=1e-6, impl=impl), torch.nn.RMSNorm(64, eps=1e-6)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(64, generator=g))
        theirs.weight.copy_(ours.weight)
    y = ours(x)
    torch.testing.assert_close(y, theirs(x))
    (gx,) = torch.autograd.grad(y.square().sum(), x)
    (want,) = torch.autograd.grad(theirs(x).square().sum(), x)
    torch.testing.assert_close(gx, want)
    llama = LlamaRMSNorm(64, eps=1e-6, impl=impl)
    torch.testing.assert_close(llama(x), torch.nn.functional.rms_norm(x, (64,), llama.weight, 1e-6))


def test_the_functional_form_refuses_a_cpu_tensor_naming_the_fix():
    with pytest.raises(
        ok.InputError,
        match=r"argument 'x': expected a CUDA tensor, got a tensor on cpu\. Fix: pass "
        r"x\.cuda\(\)",
    ):
        rms_norm(torch.randn(4, 64), torch.randn(64), 1e-6, impl="cuda")
