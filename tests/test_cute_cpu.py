"""The CuTe DSL flavor on CPU: registration through the one path (schema, record, binding by name, fake),
compilation by ``cute.compile`` (it runs without a driver), and the refusals with their fixes."""

import pytest
import torch

import opsmith as ok

cutlass = pytest.importorskip("cutlass", reason="CuTe DSL (pip install 'opsmith[cute]') is part of the test extra")
import cuda.bindings.driver as cuda  # noqa: E402
import cutlass.cute as cute  # noqa: E402

from examples.cute.scale_op import scale, scale_op  # noqa: E402

NS = "t_cute_cpu"


def test_registration_derives_schema_record_and_fake():
    op = scale_op(NS)
    assert op.schema == f"{NS}::scale(Tensor x, float alpha) -> Tensor"
    assert op.record.flavor == "cute" and op.record.launch is None and len(op.record.configs) == 3
    # Bound by name, in the host function's order: x, alpha, n (the extra), y (the output).
    assert [(p.name, p.role) for p in op.record.params] == [("x", "input"), ("alpha", "input"), ("n", "extra"),
                                                           ("y", "output")]  # fmt: skip
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y = op(torch.empty(7, 3, device="cuda", dtype=torch.bfloat16), 2.0)
    assert y.shape == (7, 3) and y.dtype == torch.bfloat16


def test_compiles_per_specialization_and_refuses_cpu_tensors():
    op = scale_op(NS)
    k1 = op.variants.kernel(0, (torch.float16, True))
    assert op.variants.kernel(0, (torch.float16, True)) is k1  # compiled once
    assert op.variants.kernel(0, (torch.float16, False)) is not k1  # an unaligned input is another compile
    with pytest.raises(ok.InputError, match="expected a CUDA tensor"):
        op(torch.randn(4), 2.0)


def test_not_derivable_for_dtensor():
    """(Native libraries: test_cute_native.py.)"""
    op = scale_op(NS)
    assert "host function launches its own kernels" in op.sharding_plan.refusal


def test_compile_error_carries_the_dsl_message_and_source_line():
    @cute.jit
    def broken(x: cute.Pointer, n: cutlass.Int32, y: cute.Pointer, stream: cuda.CUstream):
        y_view = cute.make_tensor(y, cute.make_layout(n))  # noqa: F841
        undefined_name_here + 1  # noqa: F821

    with pytest.raises(ok.CompileError) as e:
        ok.cute_op(f"{NS}::broken", broken, inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                   extras=[ok.Numel("x", name="n")])  # fmt: skip
    assert "undefined_name_here" in str(e.value) and "test_cute_cpu.py" in str(e.value)


def test_refusals_name_the_fix():
    @cute.jit
    def no_stream(x: cute.Pointer, n: cutlass.Int32, y: cute.Pointer):
        pass

    with pytest.raises(ok.SpecError, match=r"stream: cuda\.CUstream"):
        ok.cute_op(f"{NS}::no_stream", no_stream, inputs=[ok.InputDecl("x")],
                   outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")])  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"not cutlass\.Constexpr"):
        ok.cute_op(f"{NS}::bad_cfg", scale, inputs=[ok.InputDecl("x"), ok.ScalarInput("alpha", float)],
                   outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                   autotune=ok.Autotune([ok.Config({"WARPS": 4})]))  # fmt: skip
    with pytest.raises(ok.SpecError, match="num_warps"):
        ok.cute_op(f"{NS}::bad_warps", scale, inputs=[ok.InputDecl("x"), ok.ScalarInput("alpha", float)],
                   outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                   autotune=ok.Autotune([ok.Config({"BLOCK": 128}, num_warps=4)]))  # fmt: skip


def test_the_core_does_not_import_cute_dsl():
    """CuTe DSL is optional: importing opsmith and registering CUDA C++ ops never imports it."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, opsmith as ok\n"
        "ok.cuda_kernel_op('nocute::relu', ok.KernelSpec(kernel_source='extern \"C\" __global__ void k(const float* x, "
        "int n, float* y) {}', kernel_name='k', inputs=[ok.InputDecl('x')], outputs=[ok.OutputDecl('y', "
        "ok.SameAs('x'))], extras=[ok.Numel('x')], geometry=ok.Elementwise()))\n"
        "assert 'cutlass' not in sys.modules, 'cutlass imported'\n"
        "print('no cutlass')\n"
    )
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root)
    assert r.returncode == 0 and "no cutlass" in r.stdout, r.stderr[-2000:]


def _spec(op, dtype, n, acc=None):
    """The specialization key of a call with every tensor of ``dtype`` (the partial buffer ``acc``), 16-byte
    aligned, and rows of ``n`` compiled in."""
    names = [a.name for a in op.record.tensor_inputs]
    return tuple({"dtype": lambda k: acc if names[k] == "partial" else dtype, "align": lambda k: True,
                  "static": lambda k: n}[kind](k) for kind, k in op.variants.spec_layout)  # fmt: skip


@pytest.mark.slow
def test_rmsnorm_compiles_every_path():
    """The CuTe DSL RMSNorm compiles without a GPU for every path its host functions choose: rows in one CTA
    (short ones several to a CTA), clusters of 2, 3 (ragged slices) and 8, 4-byte and 2-byte vectors (odd
    lengths: plain staging copies, cp.async takes 4 to 16 bytes), float64 accumulation, every config; a row
    too long for shared memory is refused with the fix, and a weight of another dtype too."""
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd, bwd = rmsnorm_ops("cute", "t_cute_cpu_rms")
    cases = [(64, torch.bfloat16), (1000, torch.float16), (4098, torch.bfloat16), (5001, torch.bfloat16),
             (16384, torch.bfloat16), (20000, torch.float32), (65536, torch.bfloat16), (3000, torch.float64)]  # fmt: skip
    for n, dt in cases:
        acc = torch.float64 if dt == torch.float64 else torch.float32
        for c in range(len(fwd.record.configs)):
            fwd.variants.kernel(c, _spec(fwd, dt, n))
        for c in range(len(bwd.record.configs)):
            bwd.variants.kernel(c, _spec(bwd, dt, n, acc))
    with pytest.raises(ok.CompileError, match="impl='cuda' or impl='triton'"):
        bwd.variants.kernel(0, _spec(bwd, torch.float32, 1 << 19, torch.float32))
    spec = list(_spec(fwd, torch.float32, 256))
    spec[1] = torch.float16  # the weight's dtype
    with pytest.raises(ok.CompileError, match="weight must have the dtype of x"):
        fwd.variants.kernel(0, tuple(spec))


def test_direct_call_only_on_its_device_and_failures_are_launch_errors(monkeypatch):
    """The direct call (C argument buffers written per call) runs only where the call's device is the one it
    was set up on and the current one; elsewhere the DSL's own call runs under that device. A failure of the
    compiled executor arrives as LaunchError naming the op."""
    import contextlib
    import ctypes
    import threading

    import opsmith.flavors.cute as fc

    calls = []

    class Executor:
        def __init__(self, fail=False):
            self.fail = fail

        def run_compiled_program(self, args):
            if self.fail:
                raise RuntimeError("cudaErrorLaunchFailure")
            calls.append(("direct", bufs[0].value, stream.value))

    k = fc.CuteKernel.__new__(fc.CuteKernel)
    bufs, stream = [ctypes.c_void_p(0)], ctypes.c_void_p(0)
    k.op_name, k.types, k.stream_at, k._lock = "t::op", ["ptr:Float32"], 1, threading.Lock()
    k._convert = [None]
    k.fn = lambda *a: calls.append(("dsl", *a)) or 0
    k._fast = (1, bufs, stream, [], Executor())
    monkeypatch.setattr(fc, "_raw_stream", lambda d: 100 + d)
    monkeypatch.setattr(fc, "_STREAMS", {})
    monkeypatch.setattr(fc, "_stream_handle", lambda raw: f"stream{raw}")
    monkeypatch.setattr(fc.torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(fc, "_current_device", lambda: 1)
    k.launch(1, 4096)
    assert calls[-1] == ("direct", 4096, 101)
    monkeypatch.setattr(fc, "_current_device", lambda: 0)
    k.launch(1, 8192)  # the call's device is not the current one: the DSL's call, under device 1
    assert calls[-1] == ("dsl", 8192, "stream101")
    k.launch(0, 16)  # another device than the direct call's
    assert calls[-1] == ("dsl", 16, "stream100")
    monkeypatch.setattr(fc, "_current_device", lambda: 1)
    k._fast = (1, bufs, stream, [], Executor(fail=True))
    with pytest.raises(ok.LaunchError, match="t::op: the CuTe DSL host function failed: cudaErrorLaunchFailure"):
        k.launch(1, 32)


def test_a_cute_op_with_a_cpu_reference_runs_on_cpu_under_its_checks():
    """reference= serves CPU tensors after the op's checks up to the launch, which for a host-launched kernel
    (no grid of opsmith's to compute) are the guards and the specialization; registering such an op built those
    checks and failed on the grid the CuTe DSL host function decides itself."""
    op = ok.cute_op(f"{NS}::scale_ref", scale, inputs=[ok.InputDecl("x"), ok.ScalarInput("alpha", float)],
                    outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                    autotune=ok.Autotune([ok.Config({"BLOCK": b}) for b in (128, 256)]),
                    reference=lambda x, a: x * a)  # fmt: skip
    x = torch.randn(10)
    torch.testing.assert_close(op(x, 2.0), 2 * x)
    with pytest.raises(ok.InputError, match=r"scale_ref: argument 'alpha': expected a value in"):
        op(x, 1e39)
