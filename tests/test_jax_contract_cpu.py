"""opsmith.jax keeps the op's contract (issue 38, item 3), on CPU: vmap moves or refuses by the declared
shapes, never by comparing sizes; scalars reach the kernel bit for bit (-0.0 after 0.0); a launch refusal
is an InputError at trace time; a platform without the kernel gets the CPU reference or a clear refusal,
fast; a dry run's outputs are poison, said once; a missing JAX says how to install it. Values are checked
through the CPU reference (``reference=``), which JAX's CPU platform runs as a host callback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

import opsmith as ok

jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
jnp = pytest.importorskip("jax.numpy")

from opsmith.jax import BatchingError, DryRunWarning, jax_op  # noqa: E402

NS = "t_jax_contract"
SRC = r"""
extern "C" __global__ void swap(const float* x, int b, int n, float* y) {}
extern "C" __global__ void fill(const float* x, float a, int n, float* y) {}
extern "C" __global__ void tall(const float* x, int n, float* y) {}
"""


@pytest.fixture(autouse=True)
def _on_jax_cpu():
    with jax.default_device(jax.devices("cpu")[0]):
        yield


@pytest.fixture(scope="module")
def ops() -> dict:
    # y[n, *b] = x[*b, n]: the output declares the group after a named axis, where the mapped axis lands too.
    swap = ok.cuda_kernel_op(f"{NS}::swap", ok.KernelSpec(kernel_source=SRC, kernel_name="swap",
        inputs=[ok.InputDecl("x", shape=("*B", "N"))], outputs=[ok.OutputDecl("y", shape=("N", "*B"))],
        extras=[ok.Numel("x", name="b"), ok.Dim("N")], geometry=ok.Elementwise()),
        reference=lambda x: x.movedim(-1, 0).contiguous())  # fmt: skip
    fill = ok.cuda_kernel_op(f"{NS}::fill", ok.KernelSpec(kernel_source=SRC, kernel_name="fill",
        inputs=[ok.InputDecl("x"), ok.ScalarInput("a", float)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise()), reference=lambda x, a: torch.full_like(x, a))  # fmt: skip
    # One program per row along grid y: 70,000 rows exceed CUDA's 65,535 blocks along y.
    tall = ok.cuda_kernel_op(f"{NS}::tall", ok.KernelSpec(kernel_source=SRC, kernel_name="tall",
        inputs=[ok.InputDecl("x", ndim=2)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
        geometry=ok.Grid(grid=(1, "size(x, 0)"), block=(32,))))  # fmt: skip
    # y[*b] = sum over n of x[n, *b]: a reduction over an axis before the group (issue 49's audit survivor).
    colsum = ok.cuda_kernel_op(f"{NS}::colsum", ok.KernelSpec(kernel_source=SRC, kernel_name="tall",
        inputs=[ok.InputDecl("x", shape=("N", "*B"))], outputs=[ok.OutputDecl("y", ok.ReduceDims("x", (0,)))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise()), reference=lambda x: x.sum(0))  # fmt: skip
    return {"swap": swap, "fill": fill, "tall": tall, "colsum": colsum}


@pytest.mark.parametrize("size", [3, 4])  # 4 is the declared N: the old rule (compare sizes) read it transposed
def test_vmap_places_the_mapped_axis_where_the_declaration_puts_the_group(ops, size):
    f = jax_op(ops["swap"])
    xs = jax.random.normal(jax.random.key(0), (size, 2, 4))
    got = jax.jit(jax.vmap(f))(xs)
    want = jnp.stack([jnp.moveaxis(x, -1, 0) for x in xs])
    assert got.shape == (size, 4, 2)
    assert jnp.array_equal(got, want)


@pytest.mark.parametrize("size", [3, 2])  # 2 is the group's size: a transposed result keeps its shape
def test_vmap_of_a_reduction_over_an_axis_before_the_group_keeps_the_mapped_axis_first(ops, size):
    """The mapped axis joins x's group (after N); the reduction removes N, so it is the output's axis 0."""
    f = jax_op(ops["colsum"])
    xs = jax.random.normal(jax.random.key(1), (size, 5, 2))
    got = jax.jit(jax.vmap(f))(xs)
    want = jnp.stack([x.sum(0) for x in xs])
    assert got.shape == (size, 2)
    assert jnp.allclose(got, want, atol=1e-6)


def test_vmap_refuses_an_output_without_the_mapped_group(ops):
    f = jax_op(ops["fill"])  # its input x has no declared shape, so no group to take the axis
    with pytest.raises(BatchingError, match=r"input 'x' is mapped, but its declared shape \(any shape\) has no '\*'"):
        jax.vmap(lambda x: f(x, 1.0))(jnp.ones((3, 4)))


def test_a_negative_zero_after_a_zero_reaches_the_kernel_as_itself(ops):
    f = jax_op(ops["fill"])
    x = jnp.ones(4)
    assert not jnp.signbit(f(x, 0.0)).any()
    assert jnp.signbit(f(x, -0.0)).all()  # the function cache keyed on ==: -0.0 ran as +0.0
    assert jnp.isnan(f(x, float("nan"))).all() and len(f._fns) == 3


def test_a_negative_zero_is_the_kernels_argument_bit_for_bit(ops):
    f = jax_op(ops["fill"], dry_run=True)
    with pytest.warns(DryRunWarning):
        jax.block_until_ready(f(jnp.ones(4), 0.0))
    jax.block_until_ready(f(jnp.ones(4), -0.0))
    launches = json.loads(f.handlers().take_dry_run())
    scalars = [bytes.fromhex(r["args"])[8:12] for r in launches]  # x (8 bytes), then the float
    assert scalars == [bytes(4), bytes([0, 0, 0, 0x80])]


def test_a_dry_run_says_so_once_and_its_outputs_are_poison(ops):
    f = jax_op(ops["fill"], dry_run=True)
    with pytest.warns(DryRunWarning, match="records its launches and makes none"):
        y = f(jnp.ones(4), 2.0)
    assert jnp.isnan(y).all()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(jnp.ones(4), 3.0)  # said once per op


def test_a_launch_refusal_is_an_input_error_at_trace_time(ops):
    f = jax_op(ops["tall"], platform="cuda")  # no handler is built before the refusal
    x = jax.ShapeDtypeStruct((70_000, 4), jnp.float32)
    t0 = time.perf_counter()
    with pytest.raises(ok.InputError, match=r"argument 'x': expected a launch of 1 to 65535 blocks along y"):
        jax.jit(f).trace(x)
    assert time.perf_counter() - t0 < 5
    from opsmith.torchlib.eager import make_dry_run

    with pytest.raises(ok.InputError) as py:  # the PyTorch op's refusal (its eager code up to the launch): the same
        make_dry_run(ops["tall"])[0](torch.empty(70_000, 4))
    with pytest.raises(ok.InputError) as jx:
        jax.jit(f).trace(x)
    assert str(jx.value) == str(py.value)


def test_a_platform_without_the_kernel_runs_the_reference_or_refuses_fast(ops):
    x = jax.random.normal(jax.random.key(1), (2, 3))
    assert jnp.array_equal(jax.jit(jax_op(ops["swap"]))(x), x.T)  # the CPU reference serves JAX's CPU platform
    f = jax_op(ops["tall"])  # no reference: refused at trace time, before any handler is built
    t0 = time.perf_counter()
    with pytest.raises(ok.InputError, match=r"expected an array on a CUDA device .*got an array on cpu\. Fix: run"):
        f(jnp.ones((2, 4)))
    with pytest.raises(ok.InputError, match="got an array on cpu"):
        jax.jit(f)(jnp.ones((2, 4)))
    assert time.perf_counter() - t0 < 5


def test_without_jax_the_call_says_how_to_install_it(ops, tmp_path):
    code = (
        "import sys; sys.modules['jax'] = None\n"  # an environment without the jax extra
        "import opsmith as ok, opsmith.jax as oj\n"
        f"op = ok.cuda_kernel_op('{NS}_nojax::fill', ok.KernelSpec(kernel_source={SRC!r}, kernel_name='fill',\n"
        "    inputs=[ok.InputDecl('x'), ok.ScalarInput('a', float)], outputs=[ok.OutputDecl('y', ok.SameAs('x'))],\n"
        "    extras=[ok.Numel('x')], geometry=ok.Elementwise()))\n"
        "try:\n    oj.jax_op(op)\nexcept ok.ToolchainError as e:\n    print('refused:', e)\n"
    )
    env = dict(os.environ, OPSMITH_NATIVE="off")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert "refused: opsmith.jax needs JAX, which is not installed. Fix: pip install 'opsmith[jax]'" in proc.stdout, \
        proc.stdout + proc.stderr[-2000:]  # fmt: skip


def test_differentiating_an_op_without_a_backward_is_a_differentiation_error(ops):
    """As the PyTorch op's autograd refuses it (issue 49, item 5): JAX raised its own "Pure callbacks do not
    support JVP" here. A stop_gradient'ed input still differentiates around the op."""
    f = jax_op(ops["fill"])
    x = jax.random.normal(jax.random.key(2), (5,))
    for differentiate in (lambda: jax.grad(lambda v: f(v, a=2.0).sum())(x),
                          lambda: jax.jvp(lambda v: f(v, a=2.0), (x,), (x,))):  # fmt: skip
        with pytest.raises(ok.DifferentiationError, match=r"t_jax_contract::fill: JAX differentiates through it, "
                           r"but it declares no backward\. Fix: declare backward="):  # fmt: skip
            differentiate()
    assert jnp.array_equal(jax.grad(lambda v: (f(jax.lax.stop_gradient(v), a=2.0) + v).sum())(x), jnp.ones(5))
