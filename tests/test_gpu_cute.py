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


def test_served_natively_on_the_current_stream_and_in_cuda_graphs(monkeypatch):
    """The served library (the DSL's export linked in) takes the calls: bit for bit the Python path's results,
    on a side stream, replayed from a CUDA graph, every call counted native."""
    from examples.cute.scale_op import scale
    from opsmith import native

    monkeypatch.setenv("OPSMITH_NATIVE", "auto")  # (the tests' default is off: conftest.py)
    op = ok.cute_op("t_gpu_cute_served::scale", scale, inputs=[ok.InputDecl("x"), ok.ScalarInput("alpha", float)],
                    outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")])  # fmt: skip
    x = torch.randn(10_000, device="cuda", dtype=torch.bfloat16)
    want = op(x, 1.75)  # the Python path, while the library builds
    assert native.wait(900) and op.serving == "native", (op.serving, op.serving_why)
    before = op.serving_counts().native
    torch.testing.assert_close(op(x, 1.75), want, atol=0, rtol=0)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.current_stream())
        y = op(x, 1.75)
    side.synchronize()
    torch.testing.assert_close(y, want, atol=0, rtol=0)
    g = torch.cuda.CUDAGraph()
    xs = torch.randn_like(x)
    with torch.cuda.graph(g):
        yg = op(xs, -2.0)
    xs.copy_(x)
    yg.fill_(float("nan"))  # poisoned: the replay must write every element
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(yg, (x.float() * -2.0).to(x.dtype), atol=0, rtol=0)
    c = op.serving_counts()
    assert c.native - before == 3 and not c.python, c


def test_built_library_runs_without_opsmith_or_the_dsl(tmp_path):
    """``opsmith build`` of the tuned op, loaded with torch.ops.load_library in a process that imports neither
    opsmith nor the DSL: the tuned config, bit for bit, on the current stream; a CPU tensor refused by name."""
    from opsmith import native

    op = scale_op("t_gpu_cute_built")
    x = torch.randn(5000, device="cuda")
    op(x, 2.0)  # tunes this key: the library holds the decision
    rep = native.build([op], tmp_path / "libcute.so")
    assert rep.kernels["t_gpu_cute_built::scale"] >= 1, rep.summary()
    code = f"""
import sys, torch
torch.ops.load_library({str(tmp_path / "libcute.so")!r})
x = torch.randn(5000, device="cuda")
y = torch.ops.t_gpu_cute_built.scale(x, -3.5)
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    s.wait_stream(torch.cuda.current_stream())
    z = torch.ops.t_gpu_cute_built.scale(x, 0.5)
s.synchronize()
print("equal:", torch.equal(y, x * -3.5), torch.equal(z, x * 0.5))
try:
    torch.ops.t_gpu_cute_built.scale(x.cpu(), 1.0)
except (ValueError, RuntimeError) as e:
    print("cpu:", str(e).splitlines()[0])
print("imported:", sorted(m for m in ("opsmith", "cutlass") if m in sys.modules))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "equal: True True" in r.stdout and "imported: []" in r.stdout, r.stdout
    assert "cpu: t_gpu_cute_built::scale: argument 'x': expected a CUDA tensor" in r.stdout, r.stdout
