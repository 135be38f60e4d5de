"""opsmith.jax on CPU: abstract evaluation from the declaration (shapes and dtypes through the op's own Meta
kernel, the same refusals and texts as a PyTorch call), what cannot be called from JAX, and no JAX import from
``import opsmith``."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import opsmith as ok

jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
jnp = pytest.importorskip("jax.numpy")

from opsmith.jax import abstract_eval, refusal, to_jax_dtype, to_torch_dtype  # noqa: E402

NS = "t_jax_cpu"
SRC = r"""
extern "C" __global__ void scale(const float* x, float a, int n, float* y) {}
extern "C" __global__ void rows(const float* x, int c, int n, float* y) {}
template <typename T> __global__ void norm(const T* x, const T* w, double eps, long long c, T* y) {}
extern "C" __global__ void bump(float* x, int n) {}
"""


def _spec(**kw) -> ok.KernelSpec:
    return ok.KernelSpec(kernel_source=SRC, **kw)


@pytest.fixture(scope="module")
def ops() -> dict:
    scale = ok.cuda_kernel_op(f"{NS}::scale", _spec(
        kernel_name="scale", inputs=[ok.InputDecl("x"), ok.ScalarInput("a", float)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    rows = ok.cuda_kernel_op(f"{NS}::rows", _spec(
        kernel_name="rows", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.ReduceDims("x", (-1,)))],
        extras=[ok.DimSize("x", -1), ok.Numel("x")], geometry=ok.Reduction((-1,))))  # fmt: skip
    norm = ok.cuda_kernel_op(f"{NS}::norm", _spec(
        kernel_name="norm<{T_x}>", inputs=[ok.InputDecl("x", shape=("*B", "C")), ok.InputDecl("w", shape=("C",), dtype="x"),
                                           ok.ScalarInput("eps", float)],
        outputs=[ok.OutputDecl("y", shape=("*B", "C"))], extras=[ok.Dim("C", "int64")],
        geometry=ok.Reduction((-1,)), index_dtype="int64"))  # fmt: skip
    bump = ok.cuda_kernel_op(f"{NS}::bump", _spec(
        kernel_name="bump", inputs=[ok.InputDecl("x", mutates=True)], outputs=[], extras=[ok.Numel("x")],
        geometry=ok.Grid(grid=("cdiv(numel(x), 256)",), block=(256,))))  # fmt: skip
    return {"scale": scale, "rows": rows, "norm": norm, "bump": bump}


def _sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def test_output_shapes_and_dtypes_come_from_the_declaration(ops):
    assert abstract_eval(ops["scale"], _sds((3, 5), jnp.float32), 2.0) == (_sds((3, 5), jnp.float32),)
    assert abstract_eval(ops["scale"], _sds((7,), jnp.float32), a=0.5) == (_sds((7,), jnp.float32),)
    assert abstract_eval(ops["rows"], _sds((4, 6, 9), jnp.float32)) == (_sds((4, 6), jnp.float32),)
    for dt in (jnp.bfloat16, jnp.float16, jnp.float32):
        x, w = _sds((2, 3, 64), dt), _sds((64,), dt)
        assert abstract_eval(ops["norm"], x, w, 1e-6) == (_sds((2, 3, 64), dt),)  # "*B" of any rank
        assert abstract_eval(ops["norm"], _sds((64,), dt), w, 1e-6) == (_sds((64,), dt),)  # an empty group


def test_the_shipped_rmsnorm_forward_evaluates_abstractly():
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd, _ = rmsnorm_ops("cuda")
    x, w = _sds((8, 4096, 4096), jnp.bfloat16), _sds((4096,), jnp.bfloat16)
    assert abstract_eval(fwd, x, w, 1e-6) == (_sds((8, 4096, 4096), jnp.bfloat16),)


def test_a_call_the_op_refuses_is_refused_with_the_pytorch_text(ops):
    """The guards are the op's: the same exception class and message as the PyTorch call on meta tensors."""
    for args in ((_sds((3, 64), jnp.float32), _sds((63,), jnp.float32), 1e-6),
                 (_sds((3, 64), jnp.float32), _sds((64,), jnp.float16), 1e-6)):  # fmt: skip
        with pytest.raises(ok.InputError) as got:
            abstract_eval(ops["norm"], *args)
        meta = [torch.empty(a.shape, dtype=to_torch_dtype(a.dtype), device="meta") for a in args[:2]]
        with pytest.raises(ok.InputError) as want:
            ops["norm"](*meta, 1e-6)
        assert str(got.value) == str(want.value) and "t_jax_cpu::norm" in str(got.value)


def _meta(x: torch.Tensor, a: float) -> torch.Tensor:
    return torch.empty_like(x)


def test_python_shaped_ops_are_refused_with_the_fix(ops):
    # An in-place input is served by input/output aliasing (test_jax_handlers_cpu.py runs one).
    assert refusal(ops["scale"]) is None and refusal(ops["norm"]) is None and refusal(ops["bump"]) is None
    py = ok.cuda_kernel_op(f"{NS}::py", _spec(kernel_name="scale", inputs=[ok.InputDecl("x"), ok.ScalarInput("a", float)],
                                              extras=[ok.Numel("x")], geometry=ok.Elementwise()),
                           meta_fn=_meta)  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"py: jax: .*meta_fn.*Fix: declare outputs="):
        abstract_eval(py, _sds((8,), jnp.float32), 1.0)


def test_arguments_are_checked(ops):
    with pytest.raises(TypeError, match="scalar 'a' is missing"):
        abstract_eval(ops["scale"], _sds((3,), jnp.float32))
    with pytest.raises(TypeError, match="unexpected arguments"):
        abstract_eval(ops["scale"], _sds((3,), jnp.float32), 1.0, b=2)


def test_dtypes_map_both_ways():
    for t in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.bool):
        assert to_torch_dtype(to_jax_dtype(t)) == t
    assert to_jax_dtype(torch.bfloat16) == jnp.bfloat16
    with pytest.raises(TypeError, match="no torch counterpart"):
        to_torch_dtype(jnp.complex64)


def test_import_opsmith_does_not_import_jax():
    code = "import sys, opsmith, opsmith.ops.rmsnorm; assert 'jax' not in sys.modules, 'jax imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
