"""The CuTe DSL flavor on a GPU: every `opsmith check` (numerics over dtypes and hypothesis shapes,
opcheck, torch.compile static and dynamic, torch.export, CUDA graph replay, the current stream), unaligned
inputs (another specialization), tuning, and the compiled function served from the disk cache in a second
process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok

pytestmark = pytest.mark.gpu
cutlass = pytest.importorskip("cutlass", reason="CuTe DSL (pip install 'opsmith[cute]') is part of the test extra")

from examples.cute.scale_op import check_cases, scale_op  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_opsmith_check_passes():
    for case in check_cases("t_gpu_cute_check"):
        ok.assert_check_passes(case, device="cuda")


def test_unaligned_inputs_and_tuning():
    op = scale_op("t_gpu_cute")
    base = torch.randn(100_001, device="cuda", dtype=torch.bfloat16)
    for x in (base, base[1:], base[3:]):  # 16-byte aligned, then not: each its own compile
        y = op(x, -1.5)
        torch.testing.assert_close(y, (x.float() * -1.5).to(x.dtype), atol=0, rtol=0)
    assert op.tuner.decisions and all(0 <= c < 3 for c in op.tuner.decisions.values())


def test_second_process_loads_from_the_disk_cache(tmp_path):
    """The compiled host function is exported to the disk cache: a second process compiles nothing."""
    code = (
        "import time, torch, opsmith.flavors.cute as fc\n"
        "from examples.cute.scale_op import scale_op\n"
        "calls = []\n"
        "import cutlass.cute as cute\n"
        "real = cute.compile\n"
        "cute.compile = lambda *a, **k: (calls.append(1), real(*a, **k))[1]\n"
        "x = torch.randn(4096, device='cuda')\n"
        "torch.testing.assert_close(scale_op()(x, 2.0), x * 2.0)\n"
        "print('compiles', len(calls))\n"
        "print('direct', any(k._fast for k in scale_op().variants.kernels.values()))\n"
    )
    env = dict(os.environ, OPSMITH_CACHE_DIR=str(tmp_path), OPSMITH_AUTOTUNE="0", PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-3000:] + second.stderr[-3000:]
    assert "compiles 0" not in first.stdout and "compiles 0" in second.stdout, (first.stdout, second.stdout)
    assert "direct True" in first.stdout and "direct True" in second.stdout, (first.stdout, second.stdout)


def test_declared_backward_eager_and_compiled():
    """A CuTe DSL op differentiates through a declared backward (here another CuTe DSL op: d(x * a)/dx = a),
    eagerly and under torch.compile(fullgraph=True)."""
    from examples.cute.scale_op import scale

    fwd = scale_op("t_gpu_cute_bw_inner")
    op = ok.cute_op("t_gpu_cute_bw::scale", scale, inputs=[ok.InputDecl("x"), ok.ScalarInput("alpha", float)],
                    outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                    backward=ok.Backward(fwd, args=("grad_y", "alpha"), grads=("x",)))  # fmt: skip
    for fn in (op, torch.compile(lambda x, a: op(x, a), fullgraph=True)):
        x = torch.randn(3, 1000, device="cuda", requires_grad=True)
        g = torch.randn(3, 1000, device="cuda")
        fn(x, 0.75).backward(g)
        torch.testing.assert_close(x.grad, g * 0.75)


def test_direct_call_after_the_first_launch():
    """After its first launch a kernel writes each call's arguments into its own C buffers (checked byte for
    byte against the DSL's conversion of that call): later calls with other pointers, sizes, scalars and a
    side stream still compute the right thing, on that stream."""
    op = scale_op("t_gpu_cute_direct")
    op(torch.randn(1000, device="cuda"), 1.0)
    kernels = list(op.variants.kernels.values())
    assert kernels and all(k._fast for k in kernels), [k._fast for k in kernels]
    side = torch.cuda.Stream()
    for n, alpha in ((1000, 2.0), (77_777, -0.5), (3, 3.25)):
        x = torch.randn(n, device="cuda")
        with torch.cuda.stream(side):
            side.wait_stream(torch.cuda.current_stream())
            y = op(x, alpha)
        side.synchronize()
        torch.testing.assert_close(y, x * alpha, atol=0, rtol=0)
