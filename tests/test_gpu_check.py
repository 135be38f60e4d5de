"""`opsmith check` on the GPU: every shipped op passes; a broken op of each kind fails the check meant to
catch it (wrong stream, wrong fake shape, missing guard, wrong gradient); the sanitizer catches a planted
out-of-bounds kernel and finds a correct one clean."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok
from examples.catalog import shipped_cases
from examples.catalog.basic import FLAT, RELU, REPEAT2, register_all
from opsmith.checking.sanitize import find_compute_sanitizer, sanitize

pytestmark = pytest.mark.gpu
NS = "t_gpu_check"
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def cases():
    """The example ops; the RMSNorm ops are checked through the CLI below (the same checks)."""
    return {c.label: c for c in shipped_cases(NS) if not c.label.startswith("opsmith::rmsnorm")}


def test_every_shipped_op_passes(cases):
    assert len(cases) >= 15
    failed = []
    for _label, case in cases.items():
        report = ok.check(case, examples=10)
        print(report.table(), end="\n\n")
        if not report.ok:
            failed.append(report.table())
        assert not any(r == "skip" for c, r, _ in report.rows if c not in ("autograd", "sharding")), report.table()
        sharding = next(row for row in report.rows if row[0] == "sharding")
        # skipped only where no rule is derived (a Grid, Custom or in-place op) or none is offered for its shapes
        assert sharding[1] != "skip" or sharding[2].startswith(("no derived rule", "its sharding is given",
                                                                 "the derived rule offers no sharded")), sharding  # fmt: skip
    assert not failed, "\n\n".join(failed)


def _one(shape, dtype, device):
    return (torch.randn(shape, device=device, dtype=dtype),)


def _rows(report):
    return {c: (r, d) for c, r, d in report.rows}


def test_an_op_launching_on_its_own_stream_fails_the_stream_check():
    side = torch.cuda.Stream()

    def eager(x):
        y = torch.empty_like(x)
        with torch.cuda.stream(side):  # the bug: not the caller's stream, and no event back to it
            bad.kernel.launch_args(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, x.numel(), y))
        return y

    bad = ok.cuda_kernel_op(f"{NS}::wrong_stream", ok.KernelSpec(
        kernel_source=RELU, kernel_name="my_relu", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")]), eager_fn=eager)  # fmt: skip
    rows = _rows(ok.check(ok.CheckCase(bad, _one, torch.relu, FLAT), only=["stream"]))
    assert rows["stream"][0] == "FAIL" and "non-default stream" in rows["stream"][1], rows


def test_a_wrong_fake_shape_fails_opcheck():
    def eager(x):
        x = x.contiguous()
        y = x.new_empty(2 * x.numel())
        if x.numel():
            bad.kernel.launch_args(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, x.numel(), y))
        return y

    def meta(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.numel())  # the bug: the kernel writes twice as many

    bad = ok.cuda_kernel_op(f"{NS}::wrong_fake", ok.KernelSpec(kernel_source=REPEAT2, kernel_name="repeat2",
                            inputs=[ok.InputDecl("x")]), meta_fn=meta, eager_fn=eager)  # fmt: skip
    rows = _rows(ok.check(ok.CheckCase(bad, _one, lambda x: x.reshape(-1).repeat(2), FLAT), only=["opcheck"]))
    assert rows["opcheck"][0] == "FAIL", rows


def test_a_missing_contiguity_guard_fails_numerics():
    def eager(x):  # the bug: no x.contiguous(), so a strided x is read as if it were dense
        y = torch.empty(2 * x.numel(), device=x.device)
        if x.numel():
            bad.kernel.launch_args(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, x.numel(), y))
        return y

    def meta(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(2 * x.numel())

    bad = ok.cuda_kernel_op(f"{NS}::no_guard", ok.KernelSpec(kernel_source=REPEAT2, kernel_name="repeat2",
                            inputs=[ok.InputDecl("x")]), meta_fn=meta, eager_fn=eager)  # fmt: skip
    rows = _rows(ok.check(ok.CheckCase(bad, _one, lambda x: x.reshape(-1).repeat(2), FLAT), only=["numerics"]))
    assert rows["numerics"][0] == "FAIL" and "strided" in rows["numerics"][1], rows


def test_a_wrong_gradient_fails_autograd():
    relu = ok.cuda_kernel_op(f"{NS}::relu_fwd", ok.KernelSpec(
        kernel_source=RELU, kernel_name="my_relu", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,))),
        backward=ok.Backward(lambda grad_y, x: grad_y * (x >= -0.5), args=("grad_y", "x"), grads=("x",)))  # fmt: skip
    rows = _rows(ok.check(ok.CheckCase(relu, _one, torch.relu, FLAT), only=["autograd"]))
    assert rows["autograd"][0] == "FAIL" and "gradient of input 0" in rows["autograd"][1], rows


def test_an_op_without_backward_refuses_differentiation_clearly():
    case = register_all(NS + "_nb")["relu"]
    rows = _rows(ok.check(case, only=["autograd"]))
    assert rows["autograd"][0] == "pass", rows
    assert "raises DifferentiationError" in rows["autograd"][1] and "declares no backward" in rows["autograd"][1], rows


def test_the_cli_checks_the_shipped_rmsnorm_ops():
    r = subprocess.run([sys.executable, "-m", "opsmith", "check", "opsmith.ops.rmsnorm:check_cases", "--examples", "5"],
                       capture_output=True, text=True, timeout=900)  # fmt: skip
    print(r.stdout[-6000:], r.stderr[-3000:])
    assert r.returncode == 0 and r.stdout.count("9 passed, 0 failed, 0 skipped") == 2


needs_sanitizer = pytest.mark.skipif(find_compute_sanitizer() is None, reason="compute-sanitizer not found")


@needs_sanitizer
def test_the_sanitizer_catches_a_planted_out_of_bounds_kernel(monkeypatch):
    monkeypatch.chdir(HERE)
    report = sanitize("planted_oob:CASE", tools=["memcheck"])
    print(report.table())
    ((tool, n, detail),) = report.rows
    assert tool == "memcheck" and n is not None and n > 0 and "Invalid __global__" in detail, report.table()


@needs_sanitizer
def test_the_sanitizer_finds_a_correct_op_clean_under_every_tool(monkeypatch):
    monkeypatch.chdir(HERE)
    report = sanitize("planted_oob:RELU")
    print(report.table())
    assert report.counts() == {"memcheck": 0, "racecheck": 0, "initcheck": 0, "synccheck": 0}, report.table()


HALF_WRITER = r"""
extern "C" __global__ void half_relu(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 2) y[i] = x[i] > 0.f ? x[i] : 0.f;  // the bug: the upper half of y is never written
}
"""


@pytest.mark.parametrize("shape", [(7, 1000), (64, 4096), (3, 257)])
def test_an_op_that_leaves_outputs_unwritten_fails_numerics(shape):
    """The outputs land in a pool poisoned with 0xFF (NaN as float32), so the unwritten half cannot pass as
    zeros or as stale copies of the reference (a fresh torch.empty of these shapes came back unpoisoned on an
    H100 when the poison was a freed block of the caching allocator)."""
    bad = ok.cuda_kernel_op(f"{NS}::half_writer_{shape[0]}", ok.KernelSpec(
        kernel_source=HALF_WRITER, kernel_name="half_relu", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    rows = _rows(ok.check(ok.CheckCase(bad, lambda s, d, dev: (torch.rand(s, device=dev, dtype=d) - 0.5,),
                                       torch.relu, [shape]), only=["numerics"], examples=3))  # fmt: skip
    assert rows["numerics"][0] == "FAIL" and "nan" in rows["numerics"][1].lower(), rows


def test_the_poisoned_pool_hands_out_poisoned_memory():
    from opsmith.checking.case import poisoned

    for n in (7 * 1000, 64 * 4096, 1 << 22):
        with poisoned(torch.device("cuda"), 4 * n) as ok_:
            t = torch.empty(n, device="cuda")
        assert ok_ and torch.isnan(t).all(), n
