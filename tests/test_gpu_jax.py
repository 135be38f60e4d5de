"""opsmith ops in JAX on the GPU (``opsmith.jax``): the XLA handlers against jax.numpy references in float32 and
bfloat16, under jit; grad against finite differences; vmap; in-place aliasing; and the JAX and PyTorch ops of
one declaration bit-identical on the same inputs. Needs a CUDA build of JAX (the device image has one)."""

from __future__ import annotations

import os

# Allocate on demand (before JAX starts a backend): by default JAX takes 75% of the GPU, and the PyTorch ops
# these tests compare with (and the tuning runs behind the JAX ops) need memory beside it.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import pytest
import torch

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a CUDA build of JAX (jax[cuda13])"),
]

NS = "jaxgpu"


@pytest.fixture(scope="module")
def ex():
    from examples.jax_ops import jax_examples, references

    return jax_examples(NS), references()


def _key(k: int):
    return jax.random.key(k + 1000 * torch.randint(0, 1000, ()).item())  # fresh per run


def _torch(a):
    return torch.from_dlpack(a)


def _bits_equal(a, b) -> bool:
    t = _torch(a) if not isinstance(a, torch.Tensor) else a
    u = _torch(b) if not isinstance(b, torch.Tensor) else b
    return t.shape == u.shape and t.dtype == u.dtype and torch.equal(t.view(torch.uint8), u.view(torch.uint8))


@pytest.mark.parametrize("impl", ["rmsnorm_cuda", "rmsnorm_triton"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(4, 1000), (2, 3, 4096), (3, 20000), (2, 65536)])
def test_rmsnorm_forward_backward_against_jax_numpy_and_torch(ex, impl, dtype, shape):
    ops, ref = ex
    if impl not in ops:
        pytest.skip("Triton is not importable")
    op, dt = ops[impl], getattr(jnp, dtype)
    x = jax.random.normal(_key(0), shape, jnp.float32).astype(dt)
    w = (1 + 0.25 * jax.random.normal(_key(1), shape[-1:], jnp.float32)).astype(dt)
    dy = jax.random.normal(_key(2), shape, jnp.float32).astype(dt)

    y = jax.jit(lambda x, w: op(x, w, 1e-6))(x, w)
    want = ref[impl](x, w, 1e-6)
    tol = 1e-5 if dtype == "float32" else 2e-2
    assert jnp.allclose(y.astype(jnp.float32), want.astype(jnp.float32), atol=tol, rtol=tol)

    def vjp(f):
        return jax.jit(lambda x, w, dy: jax.vjp(lambda x, w: f(x, w, 1e-6), x, w)[1](dy))(x, w, dy)

    dx, dw = vjp(op)
    dx_ref, dw_ref = vjp(ref[impl])
    scale = float(jnp.max(jnp.abs(dw_ref.astype(jnp.float32))))
    assert jnp.allclose(dx.astype(jnp.float32), dx_ref.astype(jnp.float32), atol=tol * 4, rtol=tol * 4)
    assert float(jnp.max(jnp.abs(dw.astype(jnp.float32) - dw_ref.astype(jnp.float32)))) <= tol * 4 * max(scale, 1)

    # The PyTorch op of the same declaration, on the same memory: the same bits, forward and backward.
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd = rmsnorm_ops(impl.removeprefix("rmsnorm_"), NS)[0]
    xt, wt = _torch(x).clone().requires_grad_(), _torch(w).clone().requires_grad_()
    yt = fwd(xt, wt, 1e-6)
    yt.backward(_torch(dy))
    assert _bits_equal(y, yt.detach())
    assert _bits_equal(dx, xt.grad) and _bits_equal(dw, wt.grad)


@pytest.mark.parametrize("impl", ["rmsnorm_cuda", "rmsnorm_triton"])
def test_rmsnorm_grad_matches_finite_differences(ex, impl):
    """d/dt of sum(f(x + t v, w + t u) * g) at 0, by central differences in float32, against <grad, (v, u)>."""
    ops, _ = ex
    if impl not in ops:
        pytest.skip("Triton is not importable")
    op = ops[impl]
    x = jax.random.normal(_key(3), (6, 512), jnp.float32)
    w = 1 + 0.25 * jax.random.normal(_key(4), (512,), jnp.float32)
    g = jax.random.normal(_key(5), (6, 512), jnp.float32)
    v, u = jax.random.normal(_key(6), x.shape), jax.random.normal(_key(7), w.shape)

    def loss(x, w):
        return jnp.sum(op(x, w, 1e-6) * g)

    gx, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)
    analytic = float(jnp.sum(gx * v) + jnp.sum(gw * u))
    h = 1e-2
    numeric = (float(loss(x + h * v, w + h * u)) - float(loss(x - h * v, w - h * u))) / (2 * h)
    assert abs(analytic - numeric) <= 2e-2 * max(1.0, abs(numeric)), (analytic, numeric)


def test_vmap_over_the_rows_group_is_the_unmapped_call(ex):
    ops, _ = ex
    op = ops["rmsnorm_cuda"]
    xs = jax.random.normal(_key(8), (5, 7, 1024), jnp.bfloat16)
    w = jax.random.normal(_key(9), (1024,), jnp.bfloat16)
    mapped = jax.jit(jax.vmap(lambda x: op(x, w, 1e-6)))(xs)
    whole = op(xs, w, 1e-6)
    assert _bits_equal(mapped, whole)
    with pytest.raises(NotImplementedError, match="input 'weight' is mapped"):
        jax.vmap(lambda x, w: op(x, w, 1e-6))(xs, jnp.stack([w] * 5))


def test_catalog_ops_match_jax_numpy_and_torch(ex):
    ops, ref = ex
    x = jax.random.normal(_key(10), (33, 1000), jnp.float32)
    mn, mx = jax.jit(ops["row_minmax"].__call__)(x)
    want = ref["row_minmax"](x)
    assert _bits_equal(mn, want[0]) and _bits_equal(mx, want[1])  # min and max are exact
    got_t = ops["row_minmax"].op(_torch(x))
    assert _bits_equal(mn, got_t[0]) and _bits_equal(mx, got_t[1])
    if "softmax_tt" in ops:
        for dt in (jnp.float32, jnp.bfloat16):
            xs = jax.random.normal(_key(11), (17, 3000), jnp.float32).astype(dt)
            y = jax.jit(ops["softmax_tt"].__call__)(xs)
            tol = 1e-5 if dt == jnp.float32 else 1e-2
            assert jnp.allclose(y.astype(jnp.float32), ref["softmax_tt"](xs).astype(jnp.float32), atol=tol, rtol=tol)
            assert _bits_equal(y, ops["softmax_tt"].op(_torch(xs)))


def test_in_place_input_is_an_aliased_result(ex):
    ops, ref = ex
    x = jax.random.normal(_key(12), (7, 300), jnp.float32)
    y = jax.random.normal(_key(13), (7, 300), jnp.float32)
    before = jnp.array(x)
    new_x = jax.jit(lambda x, y: ops["axpy_inplace"](x, y, -0.5))(x, y)
    assert jnp.allclose(new_x, ref["axpy_inplace"](before, y, -0.5), atol=1e-6)
    assert _bits_equal(x, before)  # the caller's array is unchanged: XLA copied it into the aliased result
    xt = _torch(before).clone()
    ops["axpy_inplace"].op(xt, _torch(y), -0.5)
    assert _bits_equal(new_x, xt)


def test_a_refused_call_raises_the_torch_text_at_trace_time(ex):
    from opsmith.errors import InputError

    ops, _ = ex
    x = jnp.ones((4, 64), jnp.float32)
    with pytest.raises(InputError, match="argument 'weight'") as got:
        jax.jit(lambda x, w: ops["rmsnorm_cuda"](x, w, 1e-6))(x, jnp.ones((65,), jnp.float32))
    with pytest.raises(InputError) as want:
        ops["rmsnorm_cuda"].op(torch.ones(4, 64, device="cuda"), torch.ones(65, device="cuda"), 1e-6)
    assert str(got.value) == str(want.value)
