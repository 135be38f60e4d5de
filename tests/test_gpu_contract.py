"""One op, one contract on the GPU (issue 38): on CUDA tensors the served library (after the switch), an explicit
``native.use`` library, a built library loaded with ``native.load`` and JAX refuse a bad call with the Python
path's class and text, and give the Python path's results; a library loaded without opsmith raises the builtin
class. The sharding row runs the kernels on simulated shards. Each path runs in a process of its own (a loaded
library stays loaded; the suite pins the Python path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU: torch.cuda.is_available() is False here", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]

_PRELUDE = r"""
import json, os, sys, torch
import opsmith as ok
from opsmith import native
SRC = r'''
extern "C" __global__ void scale(const float* x, float a, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
extern "C" __global__ void rows(const float* x, int n, float* y) {
    int r = blockIdx.y, c = threadIdx.x;
    if (c < n) y[r * n + c] = x[r * n + c] + 1.0f;
}
extern "C" __global__ void bump(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
'''
def register(ns):
    scale = ok.cuda_kernel_op(f"{ns}::scale", ok.KernelSpec(kernel_source=SRC, kernel_name="scale",
        inputs=[ok.InputDecl("x"), ok.ScalarInput("a", float)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(128,))))
    # one block per row along grid y: past 65,535 rows the launch is refused
    rows = ok.cuda_kernel_op(f"{ns}::rows", ok.KernelSpec(kernel_source=SRC, kernel_name="rows",
        inputs=[ok.InputDecl("x", shape=("R", "C"))], outputs=[ok.OutputDecl("y", shape=("R", "C"))],
        extras=[ok.Dim("C")], geometry=ok.Grid(grid=(1, "R"), block=(128,)), requires=[ok.AtMost("C", 128)]))
    bump = ok.cuda_kernel_op(f"{ns}::bump", ok.KernelSpec(kernel_source=SRC, kernel_name="bump",
        inputs=[ok.InputDecl("x", mutates=True)], outputs=[], extras=[ok.Numel("x")],
        geometry=ok.Elementwise(block=(128,))))
    return {"scale": scale, "rows": rows, "bump": bump}

def outcome(fn):
    try:
        out = fn()
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return "ok" if out is None else [round(float(v), 6) for v in out.flatten()[:4].tolist()]

def calls(ops):
    torch.manual_seed(0)
    x = torch.randn(1000, device="cuda")
    grad = torch.randn(8, device="cuda").requires_grad_()
    return {
        "scale": lambda: ops["scale"](x, 2.5),
        "dtype": lambda: ops["scale"](x.half(), 2.5),
        "device": lambda: ops["scale"](x.cpu(), 2.5),
        "rows": lambda: ops["rows"](torch.ones(3, 100, device="cuda")),
        "at-most": lambda: ops["rows"](torch.ones(3, 129, device="cuda")),
        "grid-y": lambda: ops["rows"](torch.ones(70_000, 4, device="cuda")),
        "inplace-grad": lambda: ops["bump"](grad.clone()),
        "no-backward": lambda: ops["scale"](grad, 2.0).sum().backward(),
    }
"""

_PATHS = {
    "python": "os.environ['OPSMITH_NATIVE'] = 'off'\nops = register('t_gpu_contract_py')\n",
    "served": "ops = register('t_gpu_contract_served')\nassert native.wait(600)\n"
              "assert all(op.serving == 'native' for op in ops.values()), [op.serving_why for op in ops.values()]\n",
    "use": "os.environ['OPSMITH_NATIVE'] = 'off'\nops = register('t_gpu_contract_use')\nnative.use(list(ops.values()))\n",
}  # fmt: skip


def _run(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath(ROOT)}
    env.pop("OPSMITH_NATIVE", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _walk(path: str) -> dict:
    return _run(_PRELUDE + _PATHS[path] + "print(json.dumps({k: outcome(f) for k, f in calls(ops).items()}))")


@pytest.fixture(scope="module")
def python_path() -> dict:
    return _walk("python")


def _same(got: dict, want: dict, ns_from: str, ns_to: str) -> None:
    for k, v in want.items():
        assert got[k] == (v.replace(ns_from, ns_to) if isinstance(v, str) else v), (k, got[k], v)


def test_the_python_path_refuses_each_bad_call_before_launch(python_path):
    assert python_path["dtype"].startswith("InputError: t_gpu_contract_py::scale: argument 'x': expected dtype")
    assert python_path["grid-y"].startswith("InputError: t_gpu_contract_py::rows: argument 'x': expected a launch")
    assert python_path["inplace-grad"].startswith("DifferentiationError:")
    assert python_path["no-backward"].startswith("DifferentiationError:")
    assert python_path["scale"] != "ok" and python_path["rows"] == [2.0] * 4


@pytest.mark.parametrize("path", ["served", "use"])
def test_the_native_paths_give_the_same_classes_texts_and_results(python_path, path):
    _same(_walk(path), python_path, "t_gpu_contract_py", f"t_gpu_contract_{path}")


def test_a_built_library_loaded_with_and_without_opsmith(python_path, tmp_path):
    lib = tmp_path / "libcontract.so"
    _run(_PRELUDE + "os.environ['OPSMITH_NATIVE'] = 'off'\nops = register('t_gpu_contract_lib')\n"
         f"native.build(list(ops.values()), {str(lib)!r})\nprint('{{}}')")  # fmt: skip
    loader = (
        "import json, torch\n{load}\n"
        "ns = torch.ops.t_gpu_contract_lib\n"
        "ops = {{'scale': ns.scale, 'rows': ns.rows, 'bump': ns.bump}}\n"
    )
    tail = _PRELUDE.split("def outcome")[1]
    for load, expect_builtin in ((f"from opsmith import native; native.load({str(lib)!r})", False),
                                 (f"torch.ops.load_library({str(lib)!r})", True)):  # fmt: skip
        got = _run(loader.format(load=load) + "def outcome" + tail + "print(json.dumps({k: outcome(f) for k, f in "
                   "calls(ops).items()}))")  # fmt: skip
        want = {k: v.replace("t_gpu_contract_py", "t_gpu_contract_lib") if isinstance(v, str) else v
                for k, v in python_path.items()}  # fmt: skip
        if expect_builtin:
            builtin = {"InputError": "ValueError", "DifferentiationError": "RuntimeError"}
            want = {k: f"{builtin[v.split(':')[0]]}:{v.split(':', 1)[1]}" if isinstance(v, str) and ":" in v else v
                    for k, v in want.items()}  # fmt: skip
        assert got == want, (load, got, want)


def test_jax_refuses_at_trace_time_and_matches_pytorch_on_the_gpu():
    pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
    got = _run(
        _PRELUDE
        + """
import jax, jax.numpy as jnp
from opsmith.jax import jax_op
os.environ['OPSMITH_NATIVE'] = 'off'
ops = register('t_gpu_contract_jax')
f, g = jax_op(ops["scale"]), jax_op(ops["rows"])
x = jax.random.normal(jax.random.key(0), (1000,))
same = bool(jnp.array_equal(jax.jit(lambda x: f(x, 2.5))(x), jnp.asarray(ops["scale"](torch.from_dlpack(x), 2.5).cpu().numpy())))
try:
    jax.jit(g).trace(jax.ShapeDtypeStruct((70_000, 4), jnp.float32)); refused = "no"
except ok.InputError as e:
    refused = str(e).splitlines()[0]
print(json.dumps({"same": same, "refused": refused}))
"""
    )
    assert got["same"] is True
    assert got["refused"].startswith("t_gpu_contract_jax::rows: argument 'x': expected a launch of 1 to 65535 blocks")


def test_the_sharding_row_on_the_gpu_kernels():
    got = _run(r"""
import json, torch, opsmith as ok
SRC = r'''
extern "C" __global__ void gather(const float* table, const long long* idx, int n, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { long long j = idx[i]; out[i] = j < n ? table[j] : 0.0f; }   // n bounds the table read too
}'''
def gather(name, **kw):
    return ok.cuda_kernel_op(f"t_gpu_contract_shard::{name}", ok.KernelSpec(kernel_source=SRC, kernel_name="gather",
        inputs=[ok.InputDecl("table"), ok.InputDecl("idx")], outputs=[ok.OutputDecl("out", ok.SameAs("idx"), dtype_from="table")],
        extras=[ok.Numel("idx")], geometry=ok.Elementwise(block=(128,))), **kw)
inputs = lambda s, d, dev: (torch.randn(s[0], device=dev), torch.randint(0, max(s[0], 1), (s[0],), device=dev))
rows = {}
for name, kw in (("held", {}), ("derive", {"sharding": "derive"})):
    case = ok.CheckCase(gather(name, **kw), inputs, reference=lambda t, i: t[i], shapes=[(16,)])
    rows[name] = [(c, r, d) for c, r, d in ok.check(case, only=["numerics", "sharding"], examples=3).rows]
print(json.dumps(rows))
""")
    held, derive = dict((c, (r, d)) for c, r, d in got["held"]), dict((c, (r, d)) for c, r, d in got["derive"])
    assert held["numerics"][0] == "pass" and held["sharding"][0] == "pass", held
    assert "would be wrong: 2 shards" in held["sharding"][1], held
    assert (
        derive["sharding"][0] == "FAIL"
        and "placement inputs ['R', 'S(0)'] -> outputs ['S(0)']" in derive["sharding"][1]
    )
