"""A backward over an optional input (issue 49, item 2), as Liger-Kernel's DyT has: ``y = gamma * x + beta`` with
``beta`` optional. With beta given, every input gets its gradient; passed as None, beta's gradient is None and
the others are unchanged, on every backward path: the Python path's autograd (a backward op, a program), the
native library's C++ Autograd kernel (``native.use``, a dry run on CPU: gradients' shapes), and JAX's
``custom_vjp``. The backward receives beta itself (None when absent), as a kernel with HAVE_BETA would. Values
come from CPU references (``reference=``)."""

from __future__ import annotations

import pytest
import torch
from interpreted import child_json

import opsmith as ok

NS = "t_opt_backward"

SRC = r"""
extern "C" __global__ void fwd(const float* x, const float* gamma, const float* beta, int n, int C, float* y) {}
extern "C" __global__ void bwd(const float* g, const float* x, const float* gamma, const float* beta, int n, int C,
                               float* dx, float* dgamma, float* dbeta) {}
extern "C" __global__ void colsum(const float* g, int n, int C, float* s) {}
"""


def _bwd_reference(g, x, gamma, beta):
    # dbeta is computed only where beta was given (a kernel's HAVE_BETA); zeros otherwise, never read
    return gamma * g, (g * x).sum(0), g.sum(0) if beta is not None else torch.zeros_like(gamma)


def register(ns: str = NS, beta_first: bool = False) -> dict:
    """The forward op twice (its backward another op; a program of two steps) and the backward ops;
    ``beta_first``: the optional input declared before a required one, ``(x, beta, gamma)``."""
    rows = dict(extras=[ok.Numel("g"), ok.Dim("C")], geometry=ok.Elementwise())
    bwd = ok.cuda_kernel_op(f"{ns}::bwd", ok.KernelSpec(
        kernel_source=SRC, kernel_name="bwd",
        inputs=[ok.InputDecl("g", shape=("R", "C")), ok.InputDecl("x", shape=("R", "C")),
                ok.InputDecl("gamma", shape=("C",)), ok.InputDecl("beta", shape=("C",), optional=True)],
        outputs=[ok.OutputDecl("dx", shape=("R", "C")), ok.OutputDecl("dgamma", shape=("C",)),
                 ok.OutputDecl("dbeta", shape=("C",))], **rows), reference=_bwd_reference)  # fmt: skip
    colsum = ok.cuda_kernel_op(f"{ns}::colsum", ok.KernelSpec(
        kernel_source=SRC, kernel_name="colsum", inputs=[ok.InputDecl("g", shape=("R", "C"))],
        outputs=[ok.OutputDecl("s", shape=("C",))], **rows), reference=lambda g: g.sum(0))  # fmt: skip
    ins = [
        ok.InputDecl("x", shape=("R", "C")),
        ok.InputDecl("gamma", shape=("C",)),
        ok.InputDecl("beta", shape=("C",), optional=True),
    ]
    decl = ok.KernelSpec(
        kernel_source=SRC, kernel_name="fwd", inputs=[ins[0], ins[2], ins[1]] if beta_first else ins,
        outputs=[ok.OutputDecl("y", shape=("R", "C"))], extras=[ok.Numel("x", name="n"), ok.Dim("C")],
        geometry=ok.Elementwise())  # fmt: skip

    def ref(x, gamma, beta):
        return gamma * x + (beta if beta is not None else 0)

    if beta_first:
        ref = (lambda f: lambda x, beta, gamma: f(x, gamma, beta))(ref)

    args, grads = ("grad_y", "x", "gamma", "beta"), ("x", "gamma", "beta")
    by_op = ok.cuda_kernel_op(f"{ns}::by_op", decl, reference=ref, backward=ok.Backward(bwd, args=args, grads=grads))
    # The program: dbeta by a step of its own, which runs only when beta's gradient is needed.
    program = (ok.Step(bwd, args=args, outputs=("dx", "dgamma", "unused")),
               ok.Step(colsum, args=("grad_y",), outputs=("dbeta",)))  # fmt: skip
    by_program = ok.cuda_kernel_op(f"{ns}::by_program", decl, reference=ref, backward=ok.Backward(
        program, args=args, grads=grads, returns=("dx", "dgamma", "dbeta")))  # fmt: skip
    return {"by_op": by_op, "by_program": by_program}


@pytest.fixture(scope="module", params=["beta_last", "beta_first"])
def ops(request) -> dict:
    first = request.param == "beta_first"
    return {**register(f"{NS}_{request.param}", beta_first=first), "first": first}


def _call(ops: dict, which: str, f=None):
    """The op (or ``f``, its JAX function) called as ``(x, gamma, beta)``, whichever order it declares."""
    f = f or ops[which]
    return (lambda x, gamma, beta: f(x, beta, gamma)) if ops["first"] else f


def _leaves():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 3, generator=g).requires_grad_(), torch.randn(3, generator=g).requires_grad_(),
            torch.randn(3, generator=g).requires_grad_())  # fmt: skip


@pytest.mark.parametrize("which", ["by_op", "by_program"])
def test_the_python_paths_autograd_with_and_without_the_optional_input(ops, which):
    x, gamma, beta = _leaves()
    _call(ops, which)(x, gamma, beta).pow(2).sum().backward()
    want = [t.grad for t in _want(x, gamma, beta)]
    torch.testing.assert_close([x.grad, gamma.grad, beta.grad], want)
    x2, gamma2, _ = _leaves()
    _call(ops, which)(x2, gamma2, None).pow(2).sum().backward()
    want = _want(x2, gamma2, None)
    torch.testing.assert_close([x2.grad, gamma2.grad], [want[0].grad, want[1].grad])


def _want(x, gamma, beta):
    """PyTorch's own gradients of the same function, on fresh leaves."""
    leaves = [t.detach().clone().requires_grad_() for t in (x, gamma)] + \
        ([beta.detach().clone().requires_grad_()] if beta is not None else [])  # fmt: skip
    y = leaves[1] * leaves[0] + (leaves[2] if beta is not None else 0)
    y.pow(2).sum().backward()
    return leaves


_NATIVE = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from test_optional_backward_cpu import register
from opsmith import native
both = {first: register(f"t_opt_backward_native{int(first)}", beta_first=first) for first in (False, True)}
native.use([op for ops in both.values() for op in ops.values()], dry_run=True)
out = {}
for first, ops in both.items():
    for which in ("by_op", "by_program"):
        for given in (True, False):
            x, gamma, beta = (torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True),
                              torch.randn(3, requires_grad=True))
            b = beta if given else None
            (ops[which](x, b, gamma) if first else ops[which](x, gamma, b)).sum().backward()
            out[f"{which} {given}" + (" first" if first else "")] = [
                None if t.grad is None else list(t.grad.shape) for t in (x, gamma, beta)]
        # None for the required x while gamma requires grad: the op's refusal, before the autograd Function
        # (which had failed reading the undefined tensor's device)
        try:
            ops[which](None, None, gamma) if first else ops[which](None, gamma, None)
            out[f"{which} x=None" + (" first" if first else "")] = "accepted"
        except Exception as e:
            out[f"{which} x=None" + (" first" if first else "")] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_native_libraries_autograd_kernel():
    """Both declared orders: the optional input last, and before a required one (absent: no gradient, the
    others unchanged)."""
    got = child_json(_NATIVE)
    given, absent = [[4, 3], [3], [3]], [[4, 3], [3], None]
    want = {"by_op True": given, "by_op False": absent, "by_program True": given, "by_program False": absent}
    want = {**want, **{k + " first": v for k, v in want.items()}}
    for which in ("by_op", "by_program"):
        for first in (0, 1):
            want[f"{which} x=None" + (" first" if first else "")] = (
                f"InputError: t_opt_backward_native{first}::{which}: argument 'x': expected a tensor, got None. Fix: "
                "pass a tensor as x; only inputs declared optional=True take None.")  # fmt: skip
    assert got == want, got


@pytest.mark.parametrize("which", ["by_op", "by_program"])
def test_jax_custom_vjp(ops, which):
    jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
    import jax.numpy as jnp

    from opsmith.jax import jax_op

    f = _call(ops, which, jax_op(ops[which]))
    x, gamma, beta = (t.detach() for t in _leaves())
    want = _want(x, gamma, beta)
    with jax.default_device(jax.devices("cpu")[0]):  # the CPU references serve JAX's CPU platform
        got = jax.grad(lambda x, g, b: (f(x, g, b) ** 2).sum(), argnums=(0, 1, 2))(
            jnp.asarray(x.numpy()), jnp.asarray(gamma.numpy()), jnp.asarray(beta.numpy())
        )
        for a, w in zip(got, want, strict=True):
            assert jnp.allclose(a, jnp.asarray(w.grad.numpy()), atol=1e-5)
        want = _want(x, gamma, None)
        got = jax.grad(lambda x, g: (f(x, g, None) ** 2).sum(), argnums=(0, 1))(
            jnp.asarray(x.numpy()), jnp.asarray(gamma.numpy())
        )
        for a, w in zip(got, want, strict=True):
            assert jnp.allclose(a, jnp.asarray(w.grad.numpy()), atol=1e-5)
