"""Checks that never pass what they did not run (issue 38, item 4), on CPU: a row says ``pass`` only where the
op's kernel ran; where a CPU ``reference=`` serves CPU tensors in the kernel's place, or the kernel needs a GPU
that is not here, the compile and export rows trace on fake CUDA tensors (``traced``) and the rest skip saying
why; a Triton kernel in the interpreter really runs (a wrong one fails); ``check`` and the CLI given an op say
what to pass; the CLI fails when any case fails, first or last; ``build`` says why an op has no kernels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
NS = "t_check_honest"
# A relu with the wrong sign: y = -max(x, 0). Registered with the right reference, a check that compared the
# reference with itself would pass it.
WRONG = r"""
extern "C" __global__ void relu_wrong(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? -x[i] : 0.f;
}
"""


def _spec() -> ok.KernelSpec:
    return ok.KernelSpec(kernel_source=WRONG, kernel_name="relu_wrong", inputs=[ok.InputDecl("x")],
                         outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                         geometry=ok.Elementwise(block=(256,)))  # fmt: skip


def _inputs(shape, dtype, device):
    return (torch.randn(shape, device=device, dtype=dtype),)


WRONG_WITH_REFERENCE = ok.CheckCase(ok.cuda_kernel_op(f"{NS}::wrong_ref", _spec(), reference=torch.relu), _inputs,
                                    shapes=[(300,), (3, 70)])  # fmt: skip
CUDA_ONLY = ok.CheckCase(ok.cuda_kernel_op(f"{NS}::cuda_only", _spec()), _inputs, reference=torch.relu,
                         shapes=[(300,), (3, 70)])  # fmt: skip
FAST = {"device": "cpu", "examples": 5}


def _rows(report) -> dict:
    return {c: (r, d) for c, r, d in report.rows}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what a machine without a GPU reports")
def test_a_kernel_that_did_not_run_never_passes_on_cpu():
    for case, because in ((WRONG_WITH_REFERENCE, "runs its reference= in the kernel's place"),
                          (CUDA_ONLY, "runs on CUDA tensors only")):  # fmt: skip
        report = ok.check(case, **FAST)
        rows = _rows(report)
        assert not [c for c, (r, _) in rows.items() if r == "pass"], report.table()
        for c in ("opcheck", "numerics", "autograd", "sharding"):
            assert rows[c][0] == "skip" and because in rows[c][1], (c, rows[c])
        for c in ("compile-static", "compile-dynamic", "export"):
            assert rows[c][0] == "traced" and "fake CUDA tensors (nothing ran)" in rows[c][1], (c, rows[c])
        assert report.ok and "0 passed, 0 failed, 6 skipped, 3 traced on fake tensors (nothing ran)" in report.table()


def test_tracing_on_fake_tensors_can_fail():
    """A traced row is a real check: a graph break before the op fails both compile traces (fullgraph)."""

    def breaks(x):
        torch._dynamo.graph_break()
        return CUDA_ONLY.op(x)

    rows = _rows(ok.check(ok.CheckCase(breaks, _inputs, reference=torch.relu, shapes=[(8,)]),
                          only=["compile-static", "compile-dynamic", "export"], **FAST))  # fmt: skip
    for c in ("compile-static", "compile-dynamic"):
        assert rows[c][0] == "FAIL", rows[c]


_INTERPRETED = """
import sys, torch, triton, triton.language as tl, opsmith as ok
@triton.jit
def relu_kernel(x_ptr, n, y_ptr, SIGN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.where(x > 0, SIGN * x, 0.0), mask=offs < n)
def register(name, sign, **kw):
    return ok.triton_op(name, relu_kernel, inputs=[ok.InputDecl("x", dtype=torch.float32)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise(block=("BLOCK",)),
        constexprs={"SIGN": sign}, autotune=ok.Autotune([ok.Config({"BLOCK": 128})]), **kw)
inputs = lambda s, d, dev: (torch.randn(s, device=dev, dtype=d),)
for name, sign, kw in (("right", 1.0, {}), ("wrong", -1.0, {}), ("wrong_ref", -1.0, {"reference": torch.relu})):
    case = ok.CheckCase(register(f"t_check_honest_tt::{name}", sign, **kw), inputs, reference=torch.relu, shapes=[(300,)])
    rows = {c: r for c, r, d in ok.check(case, device="cpu", examples=3, compile_backend="aot_eager").rows}
    print(name, rows["numerics"], rows["compile-static"], rows["export"], rows["opcheck"])
"""


@pytest.mark.slow
def test_a_triton_kernel_in_the_interpreter_really_runs_and_with_a_reference_compiles_on_cpu():
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    env = {**ENV, "TRITON_INTERPRET": "1", "OPSMITH_NATIVE": "off"}
    r = subprocess.run([sys.executable, "-c", _INTERPRETED], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
    assert lines["right"] == "pass pass pass pass", r.stdout  # the interpreter ran the kernel: values compared
    assert lines["wrong"].startswith("FAIL"), r.stdout  # ... so a wrong kernel fails
    # With reference=, CPU tensors run the reference: nothing of the kernel passes, and compile traces (it
    # failed with "0 active drivers" when Inductor compiled the Triton kernel for CPU tensors).
    assert lines["wrong_ref"] == "skip traced traced skip", r.stdout


def test_check_given_an_op_says_what_to_pass():
    with pytest.raises(ok.SpecError, match=r"check\(\) takes a CheckCase, not an opsmith op\. Fix: wrap the op"):
        ok.check(CUDA_ONLY.op, device="cpu")


OP_TARGET = CUDA_ONLY.op
FAIL_FIRST = [WRONG_WITH_REFERENCE, CUDA_ONLY]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opsmith", *args], capture_output=True, text=True, cwd=str(HERE),
                          env={**ENV, "OPSMITH_NATIVE": "off"}, timeout=600)  # fmt: skip


def test_the_cli_given_an_op_says_what_to_pass():
    r = _cli("check", "test_check_honest:OP_TARGET", "--device", "cpu")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "'test_check_honest:OP_TARGET' is an op, not a CheckCase" in r.stderr and "Traceback" not in r.stderr
    assert "opsmith.CheckCase(op, inputs=" in r.stderr


_NO_KERNELS = """
import torch, triton, triton.language as tl, opsmith as ok
@triton.jit
def rowsum(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + tl.program_id(0) * N + offs), axis=0))
def ops():
    return [ok.triton_op("t_check_honest_b::rowsum", rowsum, inputs=[ok.InputDecl("x", dtype=torch.float32, ndim=2)],
        outputs=[ok.OutputDecl("y", ok.ReduceDims("x", (-1,)))], extras=[ok.DimSize("x", -1, name="N")],
        geometry=ok.Grid(grid=("size(x, 0)",)))]
"""


def test_build_says_why_an_op_has_no_kernels(tmp_path):
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    (tmp_path / "nokernels.py").write_text(_NO_KERNELS)
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), ENV["PYTHONPATH"]]), "OPSMITH_NATIVE": "off"}
    r = subprocess.run([sys.executable, "-m", "opsmith", "build", "nokernels:ops", "-o", str(tmp_path / "n.so")],
                       capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "t_check_honest_b::rowsum: it holds no compiled kernel: its kernels are compiled per call" in r.stderr
    assert "0 kernels" not in r.stdout and not (tmp_path / "n.so").exists()


def test_a_triton_op_with_a_reference_compiles_and_passes_opcheck_on_cpu_tensors():
    """The Triton op's visible implementation is for CUDA tensors: CPU tensors keep the op whole, so Inductor
    calls its CPU kernel (the reference) instead of compiling the Triton kernel for a CPU ("0 active drivers")."""
    triton = pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    import triton.language as tl

    @triton.jit
    def twice_kernel(x_ptr, n, y_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    op = ok.triton_op(f"{NS}::twice_tt", twice_kernel, inputs=[ok.InputDecl("x", dtype=torch.float32)],
                      outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                      geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": 128})]),
                      reference=lambda x: 2 * x)  # fmt: skip
    x = torch.randn(300)
    torch._dynamo.reset()
    got = torch.compile(lambda t: op(t), fullgraph=True)(x)
    torch.testing.assert_close(got, 2 * x)
    torch.library.opcheck(op.overload, (x,))
