"""Fault handling that needs no GPU: 64-bit indexing declarations and the refusal of larger tensors while
tracing, and what a process forked after CUDA use does with opsmith's loaded kernels. The GPU halves are in
test_gpu_faults.py."""

import os

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok
from examples.catalog.basic import RELU
from opsmith.flavors import launch

NS = "t_faults_cpu"
BIG = 2**31 + 7

SCALE64 = r"""
extern "C" __global__ void scale64(const float* x, long long n, float* y) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.f * x[i];
}
"""


def _spec(**kw):
    return ok.KernelSpec(kernel_source=SCALE64, kernel_name="scale64", inputs=[ok.InputDecl("x")],
                         outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", "int64")],
                         geometry=ok.Elementwise(block=(256,)), **kw)  # fmt: skip


def test_index_dtype_must_be_a_width():
    with pytest.raises(ok.SpecError, match=r"index_dtype: 'int16' is not an index width.*Fix: use 'int32'"):
        ok.cuda_kernel_op(f"{NS}::bad_width", _spec(index_dtype="int16"))


def test_a_32_bit_kernel_refuses_2_pow_31_elements_while_tracing_and_a_64_bit_one_does_not():
    narrow = ok.cuda_kernel_op(f"{NS}::scale32", _spec())
    wide = ok.cuda_kernel_op(f"{NS}::scale64", _spec(index_dtype="int64"))
    assert narrow.record.index_dtype == "int32" and wide.record.index_dtype == "int64"
    assert "_E.large" in narrow.impl_source and "_E.large" not in wide.impl_source
    with FakeTensorMode():
        x = torch.empty(BIG, device="cuda")
        assert wide(x).shape == (BIG,)
        with pytest.raises(
            ok.InputError,
            match=r"scale32: argument 'x': expected at most 2147483647 elements "
            r"\(the kernel declares 32-bit indexing\), got 2147483655 elements.*index_dtype='int64'",
        ):
            narrow(x)
        assert narrow(torch.empty(2**31 - 1, device="cuda")).shape == (2**31 - 1,)


def test_the_record_keeps_the_index_width():
    op = ok.cuda_kernel_op(f"{NS}::scale64_rt", _spec(index_dtype="int64"))
    assert ok.KernelRecord.from_json(op.record.to_json()).index_dtype == "int64"


def test_a_forked_child_forgets_loaded_kernels_and_refuses_clearly():
    """The at-fork hook on a kernel with a (pretend) loaded function: in the child the function is gone and
    the slow path raises LaunchError naming the fix; the parent keeps its function."""
    op = ok.cuda_kernel_op(f"{NS}::relu", ok.KernelSpec(kernel_source=RELU, kernel_name="my_relu",
                           inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                           extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,))))  # fmt: skip
    k = op.kernel
    sentinel = object()
    k._functions[0] = sentinel
    launch._LOADED.add(k)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what the registered hook does, then the next launch's slow path
        try:
            launch._forget_after_fork()
            assert not k._functions
            k.function(0)
            os.write(w, b"no error")
        except ok.LaunchError as e:
            os.write(w, str(e).encode())
        finally:
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    msg = os.read(r, 4096).decode()
    assert status == 0
    assert "forked after CUDA was initialised" in msg and "'spawn'" in msg, msg
    assert k._functions[0] is sentinel and not launch._FORK["child"]
    del k._functions[0]
