"""opsmith.jax's XLA handlers on CPU: built with -DOPSMITH_DRY_RUN for JAX's CPU platform, they run everything
but the launch (guards, output binding, variant and tuning lookup, grid, argument packing) and record the
launch, which must be the ATen library's for the same call; jit, grad (the backward program, in-place partial
sums aliased) and vmap through them; the CUDA lowering holds the custom call; refusals name the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok
from opsmith import native

jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
jnp = pytest.importorskip("jax.numpy")

from opsmith.jax import BatchingError, jax_op  # noqa: E402

# Dry-run handlers record launches; their outputs are poison, which these tests do not read.
pytestmark = pytest.mark.filterwarnings("ignore::opsmith.jax.DryRunWarning")
from opsmith.ops.rmsnorm import rmsnorm_ops  # noqa: E402

NS = "t_jax_xla"
HERE = Path(__file__).resolve().parent
SRC = r"""
extern "C" __global__ void scale(const float* x, float a, int n, float* y) {}
extern "C" __global__ void minmax(const float* x, int c, float* mn, float* mx) {}
extern "C" __global__ void bump(float* x, const float* y, int n) {}
"""


@pytest.fixture(autouse=True)
def _on_jax_cpu():
    """Dry-run handlers serve JAX's CPU platform: computations go there on a machine with a GPU too."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def _spec(**kw) -> ok.KernelSpec:
    return ok.KernelSpec(kernel_source=SRC, **kw)


@pytest.fixture(scope="module")
def ops() -> dict:
    scale = ok.cuda_kernel_op(f"{NS}::scale", _spec(
        kernel_name="scale", inputs=[ok.InputDecl("x", torch.float32), ok.ScalarInput("a", float)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    minmax = ok.cuda_kernel_op(f"{NS}::minmax", _spec(
        kernel_name="minmax", inputs=[ok.InputDecl("x", torch.float32)],
        outputs=[ok.OutputDecl("mn", ok.ReduceDims("x", (-1,), keepdim=True)), ok.OutputDecl("mx", ok.ReduceDims("x", (-1,)))],
        extras=[ok.DimSize("x", -1)], geometry=ok.Reduction((-1,), block_size=128)))  # fmt: skip
    bump = ok.cuda_kernel_op(f"{NS}::bump", _spec(
        kernel_name="bump", inputs=[ok.InputDecl("x", torch.float32, mutates=True), ok.InputDecl("y", torch.float32)],
        outputs=[], extras=[ok.Numel("x")], geometry=ok.Grid(grid=("cdiv(numel(x), 256)",), block=(256,))))  # fmt: skip
    fwd, bwd = rmsnorm_ops("cuda", NS)
    return {"scale": scale, "minmax": minmax, "bump": bump, "rmsnorm": fwd, "rmsnorm_backward": bwd}


# (op, arguments: a tensor as its shape, a scalar as its value): calls whose launches both libraries record.
CALLS = [("scale", [(5, 77), 0.5]), ("scale", [(1,), -3.0]), ("minmax", [(6, 300)]), ("bump", [(1000,), (1000,)]),
         ("rmsnorm", [(4, 1000), (1000,), 1e-6]), ("rmsnorm", [(2, 3, 4096), (4096,), 1e-5]),
         ("rmsnorm_backward", [(4, 1000), (4, 1000), (1000,), 1e-6, (8, 1000)])]  # fmt: skip


def _masked(launches: list[dict], pointers: list[int]) -> list[dict]:
    """The launches with pointer parameters' 8-byte slots blanked (each library's buffers are its own)."""
    out = []
    for launch in launches:
        hexed = launch["args"]
        for p in pointers:
            hexed = hexed[: 16 * p] + "p" * 16 + hexed[16 * (p + 1) :]
        out.append({**launch, "args": hexed})
    return out


def _pointers(op) -> list[int]:
    return [k for k, p in enumerate(op.plan.launch.params) if p.ctype == "ptr"]


_ATEN_SIDE = """
import json, sys, torch
torch.ops.load_library(sys.argv[1])
out = []
for qualified, args in json.loads(sys.argv[2]):
    ns, name = qualified.split("::")
    op = getattr(getattr(torch.ops, ns), name).default
    op(*[torch.randn(a) if isinstance(a, list) else a for a in args])
    out.append(json.loads(torch.ops.opsmith_dry_run.take()))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_xla_handlers_launch_what_the_aten_library_launches(ops, tmp_path):
    lib = tmp_path / "libaten_dry.so"
    native.build([ops[k] for k in ("scale", "minmax", "bump", "rmsnorm")], lib, dry_run=True)
    calls = [(ops[name].record.op_name, args) for name, args in CALLS]
    proc = subprocess.run([sys.executable, "-c", _ATEN_SIDE, str(lib), json.dumps(calls)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    aten = json.loads(proc.stdout.strip().splitlines()[-1])
    for (name, args), want in zip(CALLS, aten, strict=True):
        op = jax_op(ops[name], dry_run=True)
        arrays = [
            jax.random.normal(jax.random.key(k), a, jnp.float32) for k, a in enumerate(args) if isinstance(a, tuple)
        ]
        scalars = {d.name: a for d, a in zip(ops[name].record.inputs, args, strict=True) if not isinstance(a, tuple)}
        jax.block_until_ready(jax.jit(lambda *a, op=op, s=scalars: op(*a, **s))(*arrays))
        got = json.loads(op.handlers().take_dry_run())
        assert want and _masked(got, _pointers(ops[name])) == _masked(want, _pointers(ops[name])), (name, args)


@pytest.mark.slow
def test_grad_runs_the_backward_program_with_the_partial_sums_aliased(ops):
    f = jax_op(ops["rmsnorm"], dry_run=True)
    x, w = jax.random.normal(jax.random.key(0), (4, 1000)), jnp.ones((1000,))
    dx, dw = jax.jit(jax.grad(lambda x, w: f(x, w, 1e-6).sum(), argnums=(0, 1)))(x, w)
    assert dx.shape == x.shape and dw.shape == w.shape and dw.dtype == w.dtype
    steps = f._backward.ops
    bwd = json.loads(steps[f"{NS}::rmsnorm_cuda_backward"].handlers().take_dry_run())
    dweight = json.loads(steps[f"{NS}::rmsnorm_cuda_dweight"].handlers().take_dry_run())
    assert len(bwd) == 1 and len(dweight) == 1
    # The dweight kernel reads the partial sums the backward kernel wrote: XLA aliased them to its result.
    partial_out = bytes.fromhex(bwd[0]["args"][16 * 4 : 16 * 5])
    partial_in = bytes.fromhex(dweight[0]["args"][0:16])
    assert partial_out == partial_in


def test_in_place_input_returns_its_new_value_and_keeps_the_callers(ops):
    f = jax_op(ops["bump"], dry_run=True)
    x, y = jnp.arange(8.0), jnp.ones(8)
    got = jax.jit(f.__call__)(x, y)
    assert got.shape == x.shape and jnp.array_equal(x, jnp.arange(8.0))
    text = jax.jit(f.__call__).trace(x, y).lower().as_text()
    assert "output_operand_aliases" in text


def test_cuda_lowering_holds_the_custom_call_with_the_scalar_as_f64(ops):
    f = jax_op(ops["rmsnorm"], platform="cuda")  # lowered for the GPU on a machine that may have none
    x, w = jax.ShapeDtypeStruct((8, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((4096,), jnp.bfloat16)
    text = jax.jit(lambda x, w: f(x, w, 1e-6)).trace(x, w).lower(lowering_platforms=("cuda",)).as_text()
    calls = [line for line in text.splitlines() if "stablehlo.custom_call" in line]
    assert len(calls) == 1 and f"@opsmith_xla_{len(NS)}{NS}_rmsnorm_cuda_" in calls[0]
    assert "eps = 9.9999999999999995E-7 : f64" in calls[0] and "tensor<8x4096xbf16>" in calls[0]


@pytest.mark.slow
def test_the_backward_programs_buffers_are_allocated_not_zeroed(ops):
    """The program's buffers (RMSNorm's partial sums and dweight) are XLA allocations, as PyTorch's
    ``torch.empty``: no memset kernel per backward (jnp.zeros lowered to a broadcast XLA fills on the GPU)."""
    f = jax_op(ops["rmsnorm"], platform="cuda")
    x, w = jax.ShapeDtypeStruct((8, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((4096,), jnp.bfloat16)

    def both(x, w, dy):
        y, pull = jax.vjp(lambda x, w: f(x, w, 1e-6), x, w)
        return (y, *pull(dy))

    text = jax.jit(both).trace(x, w, x).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("@AllocateBuffer") == 2 and "stablehlo.broadcast" not in text


@pytest.mark.slow
def test_vmap_joins_the_rows_group_and_refuses_the_rest(ops):
    f = jax_op(ops["rmsnorm"], dry_run=True)
    xs, w = jnp.ones((3, 5, 64)), jnp.ones((64,))
    assert jax.vmap(lambda x: f(x, w, 1e-6))(xs).shape == (3, 5, 64)
    launches = json.loads(f.handlers().take_dry_run())
    assert launches[-1]["grid"] == [15, 1, 1]  # one launch over the 3 x 5 rows
    with pytest.raises(BatchingError, match=r"input 'weight' is mapped.*Fix: declare weight as \('\*B', \.\.\.\)"):
        jax.vmap(lambda x, w: f(x, w, 1e-6))(xs, jnp.ones((3, 64)))
    with pytest.raises(BatchingError, match=r"input 'partial' is written in place.*Fix: map the call with jax.lax.map"):
        jax.vmap(jax.grad(lambda x: f(x, w, 1e-6).sum()))(xs)
    m = jax_op(ops["minmax"], dry_run=True)
    with pytest.raises(BatchingError, match="input 'x' is mapped, but its declared shape"):
        jax.vmap(m.__call__)(jnp.ones((2, 4, 8)))


def test_a_result_shape_other_than_the_declaration_is_refused_by_the_handler(ops):
    f = jax_op(ops["scale"], dry_run=True)
    target = f.handlers().targets[f"{NS}::scale"]
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((4,), jnp.float32))
    with pytest.raises(Exception, match=r"output 'y': the declaration gives shape \(5,\) .*XLA allocated shape \(4,\)"):
        jax.block_until_ready(call(jnp.ones(5), a=1.0))
    # The right input, a result of another dtype: the handler's own binding check refuses it.
    with pytest.raises(Exception, match=r"output 'y': the declaration gives shape \(5,\) and dtype torch.float32, "
                       r"XLA allocated shape \(5,\) and dtype torch.float16"):  # fmt: skip
        jax.block_until_ready(jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((5,), jnp.float16))(jnp.ones(5), a=1.0))
    with pytest.raises(Exception, match=r"argument 'x': expected dtype torch.float32, got torch.float16"):
        jax.block_until_ready(
            jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((5,), jnp.float16))(jnp.ones(5, jnp.float16), a=1.0)
        )


def test_the_entry_points_take_the_same_arguments():
    from opsmith.jax import cuda_kernel_op

    f = cuda_kernel_op(f"{NS}::entry_scale", _spec(
        kernel_name="scale", inputs=[ok.InputDecl("x", torch.float32), ok.ScalarInput("a", float)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    assert f.op.record.op_name == f"{NS}::entry_scale" and hasattr(torch.ops, NS)
    f = jax_op(f.op, platform="cuda")
    text = jax.jit(lambda x: f(x, 2.0)).trace(jax.ShapeDtypeStruct((3, 5), jnp.float32)).lower(
        lowering_platforms=("cuda",)).as_text()  # fmt: skip
    assert f"opsmith_xla_{len(NS)}{NS}_entry_scale_" in text and "tensor<3x5xf32>" in text
