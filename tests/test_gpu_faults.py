"""Faults on the GPU: a process forked after CUDA use gets a clear error, never a hang; tensors of more than
2^31 elements are right with 64-bit kernels (CUDA C++ and Triton) and refused before launch by 32-bit ones."""

import json
import os
import signal
import time

import pytest
import torch

import opsmith as ok
from examples.catalog.basic import register_all
from examples.catalog.tuned import register_tuned

pytestmark = pytest.mark.gpu
NS = "t_gpu_faults"
BIG = 2**31 + 4099  # elements: a float16 tensor of 4.3 GB

SCALE64 = r"""
#include <cuda_fp16.h>
extern "C" __global__ void scale2_64(const __half* x, long long n, __half* y) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hmul(x[i], __float2half(2.0f));
}
"""


def _child_calls(calls) -> list[str]:
    """Fork, make each call in the child and report what happened; a child still running after 120 s is
    killed and the test fails (a hang)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        out = []
        for call in calls:
            try:
                call()
                out.append("worked")
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return json.loads(data)


def test_fork_after_cuda_use_gives_a_clear_error_not_a_hang():
    relu = register_all(NS)["relu"].op
    axpy = register_tuned(NS)["axpy_inplace"].op
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    relu(x)
    axpy(x, y, 0.5)  # loads, tunes and caches its choice in the parent
    torch.cuda.synchronize()
    got = _child_calls([lambda: relu(x), lambda: axpy(x, y, 0.5)])
    # relu fails in PyTorch's allocation, the in-place op in opsmith's launcher: both name the cause and fix.
    assert got[0].startswith("LaunchError: t_gpu_faults::relu: called in a process forked after CUDA"), got
    assert got[1].startswith("LaunchError: t_gpu_faults::axpy_inplace: called in a process forked after CUDA"), got
    assert all("'spawn'" in g for g in got), got
    assert torch.equal(relu(x), torch.relu(x))  # the parent is unaffected


def test_more_than_2_pow_31_elements_cuda_cpp():
    spec = {"kernel_source": SCALE64, "kernel_name": "scale2_64", "inputs": [ok.InputDecl("x")],
            "outputs": [ok.OutputDecl("y", ok.SameAs("x"))], "extras": [ok.Numel("x", "int64")],
            "geometry": ok.Elementwise(block=(256,))}  # fmt: skip
    wide = ok.cuda_kernel_op(f"{NS}::scale64", ok.KernelSpec(**spec, index_dtype="int64"))
    narrow = ok.cuda_kernel_op(f"{NS}::scale32", ok.KernelSpec(**spec))
    x = torch.randn(BIG, device="cuda", dtype=torch.float16)
    y = wide(x)
    assert torch.equal(y, x * 2) and torch.equal(y[-4099:], x[-4099:] * 2)
    del y
    with pytest.raises(ok.InputError, match=r"expected at most 2147483647 elements.*got 2147487747 elements"):
        narrow(x)


def test_more_than_2_pow_31_elements_triton():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def scale2(x_ptr, n, y_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    decl = {"inputs": [ok.InputDecl("x")], "outputs": [ok.OutputDecl("y", ok.SameAs("x"))],
            "extras": [ok.Numel("x", "int64")], "geometry": ok.Elementwise(block=("BLOCK",)),
            "autotune": ok.Autotune([ok.Config({"BLOCK": 1024}, num_warps=4)])}  # fmt: skip
    wide = ok.triton_op(f"{NS}::scale64_tt", scale2, **decl, index_dtype="int64")
    narrow = ok.triton_op(f"{NS}::scale32_tt", scale2, **decl)
    x = torch.randn(BIG, device="cuda", dtype=torch.float16)
    y = wide(x)
    assert torch.equal(y, x * 2)
    del y
    with pytest.raises(ok.InputError, match="32-bit indexing"):
        narrow(x)
