"""A CPU reference (``reference=``) makes an op run on CPU, through the same op and its declaration: a small
model with opsmith ops runs on CPU tensors (forward and the declared backward), the declaration's guards refuse
on CPU what they refuse on a GPU, a reference that returns the wrong shape is an error naming both, and
``opsmith check`` compares against the op's reference when the case gives none."""

import pytest
import torch

import opsmith as ok

NS = "t_ref"
SRC = r"""
extern "C" __global__ void scale_rows(const float* x, const float* w, float* y, int rows, int cols) {}
extern "C" __global__ void axpy(float* x, const float* y, float alpha, int n) {}
"""
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=i < n), 0), mask=i < n)


def scale_rows_ref(x, w):
    return x * w[:, None]


def axpy_ref(x, y, alpha):
    x.add_(alpha * y)  # in place, as the kernel; the op returns nothing


@pytest.fixture(scope="module")
def ops():
    scale = ok.cuda_kernel_op(f"{NS}::scale_rows", ok.KernelSpec(
        kernel_source=SRC, kernel_name="scale_rows",
        inputs=[ok.InputDecl("x", shape=("R", "C"), dtype=torch.float32), ok.InputDecl("w", shape=("R",))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("R", name="rows"), ok.Dim("C", name="cols")],
        geometry=ok.Grid(grid=("R",), block=(128,))),
        reference=scale_rows_ref,
        backward=ok.Backward(lambda grad_y, w: grad_y * w[:, None], args=("grad_y", "w"), grads=("x",)))  # fmt: skip
    relu = ok.triton_op(f"{NS}::relu", relu_kernel, inputs=[ok.InputDecl("x")],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                        geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": 128})]),
                        reference=torch.relu,
                        backward=ok.Backward(lambda grad_y, x: grad_y * (x > 0), args=("grad_y", "x"), grads=("x",)))  # fmt: skip
    axpy = ok.cuda_kernel_op(f"{NS}::axpy", ok.KernelSpec(
        kernel_source=SRC, kernel_name="axpy",
        inputs=[ok.InputDecl("x", dtype=torch.float32, mutates=True), ok.InputDecl("y", shape=ok.SameAs("x")),
                ok.ScalarInput("alpha", float)],
        outputs=[], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise(block=(256,))),
        reference=axpy_ref)  # fmt: skip
    wrong = ok.cuda_kernel_op(f"{NS}::wrong", ok.KernelSpec(
        kernel_source=SRC, kernel_name="scale_rows",
        inputs=[ok.InputDecl("x", shape=("R", "C"), dtype=torch.float32), ok.InputDecl("w", shape=("R",))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("R", name="rows"), ok.Dim("C", name="cols")],
        geometry=ok.Grid(grid=("R",), block=(128,))), reference=lambda x, w: x.t().contiguous())  # fmt: skip
    wrong_dtype = ok.cuda_kernel_op(f"{NS}::wrong_dtype", ok.KernelSpec(
        kernel_source=SRC, kernel_name="scale_rows",
        inputs=[ok.InputDecl("x", shape=("R", "C"), dtype=torch.float32), ok.InputDecl("w", shape=("R",))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("R", name="rows"), ok.Dim("C", name="cols")],
        geometry=ok.Grid(grid=("R",), block=(128,))), reference=lambda x, w: (x * w[:, None]).double())  # fmt: skip
    return {"scale": scale, "relu": relu, "axpy": axpy, "wrong": wrong, "wrong_dtype": wrong_dtype}


def test_a_model_with_opsmith_ops_runs_on_cpu(ops):
    x = torch.randn(6, 10, requires_grad=True)
    w = torch.rand(6) + 0.5
    y = ops["relu"](ops["scale"](x, w))
    torch.testing.assert_close(y, torch.relu(x * w[:, None]))
    y.sum().backward()  # the declared backward runs on CPU too
    torch.testing.assert_close(x.grad, (x * w[:, None] > 0).float() * w[:, None])
    a, b = torch.randn(50), torch.randn(50)
    want = a + 0.5 * b
    assert ops["axpy"](a, b, 0.5) is None
    torch.testing.assert_close(a, want)


def test_the_declaration_guards_cpu_calls(ops):
    with pytest.raises(ok.InputError, match=r"t_ref::scale_rows: argument 'x': expected dtype torch.float32"):
        ops["scale"](torch.randn(6, 10, dtype=torch.float64), torch.rand(6))
    with pytest.raises(ok.InputError, match=r"argument 'w'"):
        ops["scale"](torch.randn(6, 10), torch.rand(5))


def test_a_reference_must_return_what_the_op_declares(ops):
    with pytest.raises(ok.SpecError, match=r"t_ref::wrong: reference: the CPU reference returned \[\(\(10, 6\)"):
        ops["wrong"](torch.randn(6, 10), torch.rand(6))
    # The right shape in another dtype is as wrong: a model's next op would get float64.
    with pytest.raises(ok.SpecError, match=r"returned \[\(\(6, 10\), torch.float64\)\]; the op declares "
                       r"\[\(\(6, 10\), torch.float32\)\]"):  # fmt: skip
        ops["wrong_dtype"](torch.randn(6, 10), torch.rand(6))


def test_check_compares_with_the_ops_reference(ops):
    case = ok.CheckCase(ops["relu"], inputs=lambda s, d, dev: (torch.randn(s, dtype=d, device=dev),), shapes=[(33,)])
    assert case.reference is torch.relu
    if not torch.cuda.is_available():  # on CPU the op runs that very reference: nothing of the kernel is compared
        report = ok.check(case, device="cpu", examples=3, only=["numerics"])
        assert report.rows == [("numerics", "skip", "on cpu the op runs its reference= in the kernel's place (no GPU "
                                "here): nothing of the kernel ran, so nothing of it is checked here")], report.table()  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"reference: neither the case nor the op has a reference"):
        ok.CheckCase(torch.neg, inputs=lambda s, d, dev: ())
