"""Native op libraries on the GPU: every shipped example op and both RMSNorms give bit-identical outputs
(and gradients) to their JIT ops, in a process that only loads the library, through eager calls,
torch.compile(fullgraph=True, dynamic=True), torch.export and CUDA graphs; served in-process by
opsmith.native.use; refused clearly on a GPU the library has no image for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import assert_launches_on_current_stream, pythonpath

from examples.catalog.basic import register_all
from examples.catalog.shapes import register_shapes
from examples.catalog.tuned import register_tuned, triton_available
from opsmith import native
from opsmith.ops.rmsnorm import rmsnorm_ops

pytestmark = pytest.mark.gpu
HERE = Path(__file__).resolve().parent
NS = "natgpu"


def _run(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=pythonpath(str(HERE.parent)))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _poison_clone(args: tuple) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _jit(op, args: tuple) -> tuple:
    """(the JIT op's outputs, or the in-place inputs it wrote; positions of those inputs)."""
    mutated = [k for k, a in enumerate(op.record.inputs) if getattr(a, "mutates", False)]
    a = _poison_clone(args)
    out = op(*a)
    torch.cuda.synchronize()
    return (tuple(a[k] for k in mutated) if mutated else out), mutated


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The JIT ops run on fresh random inputs (every dtype their cases list, RMSNorm forward and backward in
    bf16 at (64, 4096) and float32 at (33, 1000)), then the library built from what they compiled."""
    torch.manual_seed(0)
    cases = {**register_all(NS), **register_tuned(NS), **register_shapes(NS)}
    data, ops = [], []
    for _, c in sorted(cases.items()):
        ops.append(c.op)
        for dt in c.dtypes or (torch.float32,):
            for shape in c.shapes[:2]:
                args = c.inputs(shape, dt, "cuda")
                want, mutated = _jit(c.op, args)
                data.append({"op": c.op.record.op_name, "args": list(args), "want": want, "mutated": mutated})
    for impl in ("cuda", "triton") if triton_available() else ("cuda",):
        fwd = rmsnorm_ops(impl)[0]
        ops.append(fwd)
        for shape, dt in (((64, 4096), torch.bfloat16), ((33, 1000), torch.float32)):
            x = torch.randn(shape, device="cuda", dtype=dt)
            w = (1 + 0.25 * torch.randn(shape[-1], device="cuda")).to(dt)
            gy = torch.randn(shape, device="cuda", dtype=dt)
            xl, wl = x.clone().requires_grad_(), w.clone().requires_grad_()
            y = fwd(xl, wl, 1e-6)
            grads = torch.autograd.grad(y, (xl, wl), gy)
            data.append({"op": fwd.record.op_name, "args": [x, w, 1e-6], "want": y.detach(), "mutated": [],
                         "grad_out": gy, "want_grads": tuple(grads)})  # fmt: skip
    d = tmp_path_factory.mktemp("native-gpu")
    report = native.build(ops, d / "libops.so")
    torch.save(data, d / "data.pt")
    return {"ops": ops, "data": data, "report": report, "dir": d}


def test_fresh_process_matches_the_jit_ops_bit_for_bit(built):
    proc = _run(str(HERE / "native_probe.py"), str(built["report"].path), "gpu", str(built["dir"] / "data.pt"))
    assert proc.returncode == 0, proc.stderr[-6000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["opsmith_imported"] is False
    assert got["failures"] == []
    assert got["ran"] == len(built["data"])


def test_stable_abi_library_matches_the_jit_ops_bit_for_bit(built):
    """The same ops as a stable-ABI library (native.build(stable=True)), in a process that only loads it:
    eager, torch.compile (static shapes), torch.export and CUDA graphs, bit for bit."""
    report = native.build(built["ops"], built["dir"] / "libstable.so", stable=True)
    assert "TORCH_TARGET_VERSION" in report.source
    proc = _run(str(HERE / "native_probe.py"), str(report.path), "stable-gpu", str(built["dir"] / "data.pt"))
    assert proc.returncode == 0, proc.stderr[-6000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["opsmith_imported"] is False
    assert got["failures"] == []
    assert got["ran"] == len(built["data"])


def test_use_serves_the_ops_natively_in_this_process(built):
    report = native.use(built["ops"])
    assert report.cached  # the module fixture built the same library
    for op in built["ops"]:
        assert op.impl_lib is None and op.native == report.path
    for c in built["data"]:
        op = next(o for o in built["ops"] if o.record.op_name == c["op"])
        a = _poison_clone(tuple(c["args"]))
        out = op(*a)
        got = tuple(a[k] for k in c["mutated"]) if c["mutated"] else out
        want = c["want"]
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                        strict=True):  # fmt: skip
            assert torch.equal(g, w), c["op"]
    relu = next(o for o in built["ops"] if o.record.op_name == f"{NS}::relu")
    assert_launches_on_current_stream(relu, torch.randn(1 << 20, device="cuda"))


def test_a_gpu_without_an_image_is_refused_with_what_is_needed(built, tmp_path):
    relu = next(o for o in built["ops"] if o.record.op_name == f"{NS}::relu")
    major, minor = torch.cuda.get_device_capability()
    other = "sm_80" if (major, minor) != (8, 0) else "sm_90"
    lib = native.build([relu], tmp_path / "other.so", archs=[other]).path
    code = (f"import torch; torch.ops.load_library({str(lib)!r}); "
            f"torch.ops.{NS}.relu(torch.randn(8, device='cuda'))")  # fmt: skip
    proc = _run("-c", code)
    assert proc.returncode != 0
    assert (f"{NS}::relu: this library holds no kernel image for cuda:0 (sm_{major}{minor}); it holds {other}. Fix: "
            "build the library on (or for) a GPU of that architecture.") in proc.stderr  # fmt: skip


def test_deploy_example_runs_without_python(tmp_path):
    """examples/deploy: build the op library, export and AOTInductor-package the model, compile the C++
    runner; the runner (no Python in its process) reproduces the eager output exactly."""
    root = HERE.parent
    if not triton_available():
        pytest.skip("the example's relu is a Triton op: needs triton")
    proc = _run(str(root / "examples" / "deploy" / "build.py"), str(tmp_path), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    run = subprocess.run([str(tmp_path / "runner"), str(tmp_path / "libdeploy_ops.so"), str(tmp_path / "model.pt2"),
                          str(tmp_path)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    assert "max |runner - eager| = 0" in run.stdout
