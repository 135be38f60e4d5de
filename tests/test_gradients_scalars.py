"""Gradients land on the right inputs when scalars sit before and between the tensors (issue 38, item 9), on
every backward path: the Python path's autograd, the native library's C++ Autograd kernel (``native.use``, a dry
run on CPU), and JAX's ``custom_vjp``; for a backward that is another op, and one that is a program. The op is
``y = alpha * x + beta * w`` (w broadcast over rows) with inputs (alpha, x, beta, w): a gradient assigned by input
position, not tensor position, gives x nothing or w a gradient of x's shape. Values come from CPU references
(``reference=``); the dry-run library's kernels compute nothing, so there the gradients' shapes are checked."""

from __future__ import annotations

import pytest
import torch
from interpreted import child_json

import opsmith as ok

NS = "t_grad_scalars"
ALPHA, BETA = 1.5, -0.25

SRC = r"""
extern "C" __global__ void fwd(float alpha, const float* x, float beta, const float* w, int n, int C, float* y) {}
extern "C" __global__ void bwd(const float* g, float alpha, float beta, int n, int C, float* gw, float* gx) {}
"""


def register(ns: str = NS) -> dict:
    """The forward op twice (its backward another op; a program of one step), and the backward op. The backward
    returns (gw, gx): the reverse of the inputs' order."""
    bwd = ok.cuda_kernel_op(f"{ns}::bwd", ok.KernelSpec(
        kernel_source=SRC, kernel_name="bwd",
        inputs=[ok.InputDecl("g", shape=("R", "C")), ok.ScalarInput("alpha", float), ok.ScalarInput("beta", float)],
        outputs=[ok.OutputDecl("gw", shape=("C",)), ok.OutputDecl("gx", shape=("R", "C"))],
        extras=[ok.Numel("g"), ok.Dim("C")], geometry=ok.Elementwise()),
        reference=lambda g, a, b: (b * g.sum(0), a * g))  # fmt: skip
    decl = ok.KernelSpec(
        kernel_source=SRC, kernel_name="fwd",
        inputs=[ok.ScalarInput("alpha", float), ok.InputDecl("x", shape=("R", "C")), ok.ScalarInput("beta", float),
                ok.InputDecl("w", shape=("C",))],
        outputs=[ok.OutputDecl("y", shape=("R", "C"))], extras=[ok.Numel("x"), ok.Dim("C")], geometry=ok.Elementwise())  # fmt: skip
    ref = lambda a, x, b, w: a * x + b * w  # noqa: E731
    by_op = ok.cuda_kernel_op(f"{ns}::by_op", decl, reference=ref, backward=ok.Backward(
        bwd, args=("grad_y", "alpha", "beta"), grads=("w", "x")))  # fmt: skip
    program = (ok.Step(bwd, args=("grad_y", "alpha", "beta"), outputs=("gw", "gx")),)
    by_program = ok.cuda_kernel_op(f"{ns}::by_program", decl, reference=ref, backward=ok.Backward(
        program, args=("grad_y", "alpha", "beta"), grads=("w", "x"), returns=("gw", "gx")))  # fmt: skip
    return {"by_op": by_op, "by_program": by_program, "bwd": bwd}


@pytest.fixture(scope="module")
def ops() -> dict:
    return register()


@pytest.mark.parametrize("which", ["by_op", "by_program"])
def test_the_python_paths_autograd(ops, which):
    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    ops[which](ALPHA, x, BETA, w).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((4, 3), ALPHA))
    torch.testing.assert_close(w.grad, torch.full((3,), 4 * BETA))


_NATIVE = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from test_gradients_scalars import register, ALPHA, BETA
from opsmith import native
ops = register("t_grad_scalars_native")
native.use([ops["by_op"], ops["by_program"]], dry_run=True)
out = {}
for which in ("by_op", "by_program"):
    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    ops[which](ALPHA, x, BETA, w).sum().backward()
    out[which] = [None if t.grad is None else list(t.grad.shape) for t in (x, w)]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_native_libraries_autograd_kernel():
    got = child_json(_NATIVE)
    assert got == {"by_op": [[4, 3], [3]], "by_program": [[4, 3], [3]]}, got


@pytest.mark.parametrize("which", ["by_op", "by_program"])
def test_jax_custom_vjp(ops, which):
    jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
    import jax.numpy as jnp

    from opsmith.jax import jax_op

    f = jax_op(ops[which])
    with jax.default_device(jax.devices("cpu")[0]):  # the CPU references serve JAX's CPU platform
        gx, gw = jax.grad(lambda x, w: f(ALPHA, x, BETA, w).sum(), argnums=(0, 1))(jnp.ones((4, 3)), jnp.ones(3))
    assert jnp.allclose(gx, ALPHA) and gx.shape == (4, 3)
    assert jnp.allclose(gw, 4 * BETA) and gw.shape == (3,)
