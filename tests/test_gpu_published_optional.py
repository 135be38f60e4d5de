"""Optional tensor inputs on the GPU (issue 40, item 1): Liger-Kernel's own cross-entropy kernel (from its
package) with its class weights, z-loss, token-accuracy and predicted-token buffers each None or given, bit for
bit against Liger's own launch and against PyTorch; our Liger-style ce_rows; a CUDA C++ kernel taking a null
pointer for None; eager, ``torch.compile(fullgraph=True)``, ``torch.export``, a native library and
``opsmith check``."""

import os

import pytest
import torch

import opsmith as ok

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from examples.catalog.optional import ce_reference, register_optional, scale_reference  # noqa: E402

NS = "t_gpu_optional"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    os.environ["OPSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return register_optional(NS)


def _targets(rows: int, v: int) -> torch.Tensor:
    y = torch.randint(0, v, (rows,), device="cuda")
    y[::7] = -100  # ignored rows
    return y


def test_a_cuda_kernel_gets_a_null_pointer_for_none(ops):
    op = ops["scale_rows"]
    x = torch.randn(4, 33, 1000, device="cuda")
    w, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    for ww in (w, None, torch.randn(1, device="cuda").expand(1000), torch.randn(2000, device="cuda")[::2]):
        for bb in (b, None):
            y = op(x, ww, bb)
            torch.testing.assert_close(y, scale_reference(x, ww, bb))
    with pytest.raises(ok.InputError, match=r"argument 'w': expected shape \(N,\)"):
        op(x, torch.randn(999, device="cuda"), None)
    compiled = torch.compile(lambda x, w, b: op(x, w, b) * 2, fullgraph=True)
    for ww, bb in ((w, None), (None, b), (None, None)):
        torch.testing.assert_close(compiled(x, ww, bb), scale_reference(x, ww, bb) * 2)

    class M(torch.nn.Module):
        def forward(self, x, b):
            return op(x, None, b)

    ep = torch.export.export(M(), (x, b))
    torch.testing.assert_close(ep.module()(x, b), x + b)


def test_a_native_library_serves_none_and_given(ops):
    from opsmith import native

    op = ops["scale_rows"]
    x, w = torch.randn(8, 512, device="cuda"), torch.randn(512, device="cuda")
    want = [scale_reference(x, w, None), scale_reference(x, None, w)]
    native.use([op])
    assert torch.equal(op(x, w, None), want[0]) and torch.equal(op(x, None, w), want[1])
    assert torch.equal(op(x, None, None), x)


def test_scale_rows_passes_check(ops):
    case = ok.CheckCase(ops["scale_rows"], inputs=lambda s, dt, dev: (torch.randn(s, dtype=dt, device=dev), None,
                                                                      torch.randn(s[-1], dtype=dt, device=dev)),
                        reference=scale_reference, shapes=((4, 256), (2, 3, 1000)), dtypes=(torch.float32,))  # fmt: skip
    report = ok.check(case, examples=4)
    print(report.table())
    assert report.ok, report.table()


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("with_z", [False, True])
def test_ce_rows_against_pytorch_eagerly_and_compiled(ops, weighted, with_z):
    op = ops["ce_rows"]
    v = 5000
    x, y = torch.randn(64, v, device="cuda"), _targets(64, v)
    w = torch.rand(v, device="cuda") + 0.5 if weighted else None
    keep = y != -100
    total = float(w[y[keep]].sum()) if weighted else float(keep.sum())
    loss_want, grad_want, z_want = ce_reference(x, y, w)

    def run(x):
        z = torch.full((64,), float("nan"), device="cuda") if with_z else None
        xx = x.clone()
        return op(xx, y, w, z, total, -100), xx, z

    for f in (run, torch.compile(run, fullgraph=True)):
        loss, grad, z = f(x)
        torch.testing.assert_close(loss.sum(), loss_want, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(grad, grad_want, atol=1e-6, rtol=1e-4)
        if with_z:
            torch.testing.assert_close(z, z_want, atol=1e-3, rtol=1e-4)


def _liger(op, x, y, w, z_scale, smoothing, buffers):
    keep = y != -100
    n = int(keep.sum())
    sw = float(w[y[keep]].sum()) if w is not None else float(n)
    ws = float(w.sum()) if w is not None else 0.0
    return op(x, y, w, *buffers, n, sw, ws, -100, z_scale, smoothing)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("features", [(), ("z",), ("z", "acc", "pred")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ligers_own_kernel_matches_its_own_launch_bit_for_bit(weighted, features, dtype):
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    from liger_kernel.ops.cross_entropy import cross_entropy_forward

    from examples.catalog.optional import liger_cross_entropy

    op = liger_cross_entropy(NS)
    v, rows = 32000, 96
    x, y = torch.randn(rows, v, device="cuda", dtype=dtype), _targets(rows, v)
    w = torch.rand(v, device="cuda") + 0.5 if weighted else None
    z_scale, smoothing = (1e-4, 0.1) if "z" in features else (0.0, 0.0)
    buffers = [torch.zeros(rows, device="cuda", dtype=dtype) if "z" in features else None,
               torch.zeros(rows, device="cuda") if "acc" in features else None,
               torch.full((rows,), -1, device="cuda", dtype=torch.int64) if "pred" in features else None]  # fmt: skip
    xx = x.clone()
    loss = _liger(op, xx, y, w, z_scale, smoothing, buffers)
    xl = x.clone().requires_grad_(True)  # Liger writes the gradient only for an input that requires grad
    with torch.no_grad():
        want = cross_entropy_forward(xl, y, w, -100, z_scale, smoothing, "mean", None, "z" in features,
                                     "acc" in features, "pred" in features)  # fmt: skip
    assert torch.equal(loss.sum(), want[0]) and torch.equal(xx, xl.detach())
    assert not torch.equal(xx, x)  # the gradient was written
    if "z" in features:
        assert torch.equal(buffers[0].sum(), want[1])
    if "acc" in features:
        torch.testing.assert_close(buffers[1].sum() / int((y != -100).sum()), want[2])
        assert torch.equal(buffers[2], want[3])
    if not features and dtype == torch.float32:  # and against PyTorch
        loss_want, grad_want, _ = ce_reference(x, y, w)
        torch.testing.assert_close(loss.sum(), loss_want, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(xx, grad_want, atol=1e-6, rtol=1e-4)


def test_ligers_kernel_compiles_whole_and_exports_with_none():
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    from examples.catalog.optional import liger_cross_entropy

    op = liger_cross_entropy(NS)
    v, rows = 32000, 64
    x, y = torch.randn(rows, v, device="cuda"), _targets(rows, v)
    n = int((y != -100).sum())

    def f(x, y):
        xx = x.clone()
        loss = op(xx, y, None, None, None, None, n, float(n), 0.0, -100, 0.0, 0.0)
        return loss.sum(), xx

    explain = torch._dynamo.explain(f)(x, y)
    assert explain.graph_count == 1 and explain.graph_break_count == 0, explain.break_reasons
    eager = f(x, y)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, y), eager)

    class M(torch.nn.Module):
        def forward(self, x, y):
            return f(x, y)

    ep = torch.export.export(M(), (x, y))
    torch.testing.assert_close(ep.module()(x, y), eager)


def test_jax_calls_the_op_with_none_on_the_gpu(ops):
    jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
    import jax.numpy as jnp

    from opsmith.jax import jax_op

    if not jax.devices("gpu"):
        pytest.skip("JAX sees no GPU")
    f = jax_op(ops["scale_rows"])
    x, w = jax.random.normal(jax.random.key(0), (6, 300)), jax.random.normal(jax.random.key(1), (300,))
    for ww, bb in ((w, None), (None, w), (None, None)):
        got = jax.jit(lambda x, ww=ww, bb=bb: f(x, ww, bb))(x)
        want = x if ww is None else x * ww
        want = want if bb is None else want + bb
        assert bool(jnp.allclose(got, want, rtol=1e-6, atol=1e-6)), (ww is None, bb is None)


def test_ligers_kernel_passes_check():
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    from examples.catalog.optional import liger_case, liger_cross_entropy

    report = ok.check(liger_case(liger_cross_entropy(NS)), examples=6)
    print(report.table())
    assert report.ok, report.table()
