"""Native serving by default on the GPU (issue 26, item 1): ops registered with ``OPSMITH_NATIVE=auto`` switch
to their native library after ``opsmith.native.wait()``, with the same results bit for bit as before the
switch (forward and gradients), a dtype first met after the switch served correctly, and torch.compile
working over a served op. Runs in its own process (the suite pins the Python path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pythonpath

ROOT = Path(__file__).resolve().parents[1]

_CODE = r"""
import os
import torch
import opsmith as ok
from opsmith import native
from opsmith.ops.rmsnorm import rmsnorm_ops
SRC = '''template <typename T> __global__ void scale(const T* x, int n, T* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = T(float(x[i]) * 1.5f + 0.25f);
}'''
def register(ns):
    scale = ok.cuda_kernel_op(f"{ns}::scale", ok.KernelSpec(kernel_source=SRC, kernel_name="scale<{T_x}>",
        inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
        geometry=ok.Elementwise(block=(128,))))
    return scale, {impl: rmsnorm_ops(impl, ns)[0] for impl in ("cuda", "triton")}
scale, ops = register("t_gpu_serving")
os.environ["OPSMITH_NATIVE"] = "off"
scale_py, ops_py = register("t_gpu_serving_py")  # the Python path, to compare with
x = torch.randn(4099, device="cuda")
h = torch.randn(33, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
dy = torch.randn_like(h)

def grads(op):
    a, b = h.clone().requires_grad_(), w.clone().requires_grad_()
    y = op(a, b, 1e-6)
    y.backward(dy)
    return y.detach(), a.grad, b.grad

before = {"scale": scale_py(x)} | {k: grads(op) for k, op in ops_py.items()}
print("python path:", scale_py.serving, ops_py["cuda"].serving)
# The RMSNorm ops are tuned: the served ops take the Python copies' decisions, so both run the same configs
# (two tunings may pick different ones, whose roundings differ).
from opsmith.torchlib.registration import registered_ops
reg = registered_ops()
for name, op in reg.items():
    if name.startswith("t_gpu_serving::") and op.tuner is not None:
        op.tuner.decisions.update(reg[name.replace("t_gpu_serving::", "t_gpu_serving_py::")].tuner.decisions)
assert native.wait(600)
print("after:", scale.serving, ops["cuda"].serving, ops["triton"].serving, scale.serving_why.split()[0][:8])
torch.testing.assert_close(scale(x), before["scale"], rtol=0, atol=0)
for k, op in ops.items():
    for got, want in zip(grads(op), before[k]):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
print("bit-identical: True")
x64 = torch.randn(1000, device="cuda", dtype=torch.float64)
torch.testing.assert_close(scale(x64), x64 * 1.5 + 0.25)  # float64: in no library yet
assert native.wait(600)
torch.testing.assert_close(scale(x64), x64 * 1.5 + 0.25)
print("float64 after the rebuild:", scale.serving)
f = torch.compile(lambda t: scale(t) * 2, fullgraph=True)
torch.testing.assert_close(f(x), before["scale"] * 2, rtol=0, atol=0)
print("compiled: True")
# The switch between a warm-up and a CUDA graph capture: the library's module cannot load inside the capture,
# so that call goes to the Python path, whose warm-up loaded its module; the replays compute the op.
os.environ["OPSMITH_NATIVE"] = "auto"
late, _ = register("t_gpu_serving_late")
late(x)  # the warm-up, on the Python path
assert native.wait(600) and late.serving == "native", late.serving_why
static_x = torch.randn(4099, device="cuda")
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_y = late(static_x)
for _ in range(2):
    graph.replay()
    torch.testing.assert_close(static_y, scale_py(static_x), rtol=0, atol=0)
    static_x.copy_(torch.randn_like(static_x))
torch.testing.assert_close(late(x), before["scale"], rtol=0, atol=0)
print("captured after the switch: True")
"""


@pytest.mark.gpu
def test_ops_switch_to_their_native_library_with_the_same_bits(tmp_path):
    env = dict(os.environ, PYTHONPATH=pythonpath(ROOT), OPSMITH_CACHE_DIR=str(tmp_path), OPSMITH_NATIVE="auto")
    r = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    assert "python path: python python" in r.stdout and "after: native native native served-" in r.stdout
    assert "bit-identical: True" in r.stdout and "float64 after the rebuild: native" in r.stdout
    assert "compiled: True" in r.stdout and "captured after the switch: True" in r.stdout
    assert "Overriding a previously registered kernel" not in r.stderr
