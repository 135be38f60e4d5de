"""Stable-ABI native libraries (``native.build(..., stable=True)``) on CPU: the library needs nothing of
libtorch but its C shim; its CPU (dry-run) and Meta kernels agree with the Python path on generated
declarations and calls; its Meta kernel serves torch.compile with static shapes and refuses symbolic sizes with
what to do. With ``OPSMITH_TEST_OTHER_TORCH`` set to the Python of another torch (``scripts/other-torch``
makes one with torch 2.12), the library built here runs there too. The GPU side is in test_gpu_native.py."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from differential import compare, run_batch, summary
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tiers import examples

from examples.catalog.basic import register_all
from opsmith import native

HERE = Path(__file__).resolve().parent
NS = "stabcpu"
OTHER = os.environ.get("OPSMITH_TEST_OTHER_TORCH", "")
_BATCH = itertools.count()


def _pythons() -> list:
    other = pytest.param(OTHER, id="other-torch", marks=pytest.mark.skipif(
        not OTHER, reason="OPSMITH_TEST_OTHER_TORCH is not set (scripts/other-torch makes a torch 2.12 to point it at)"))  # fmt: skip
    return [pytest.param(sys.executable, id="this-torch"), other]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    cases = register_all(NS)
    ops = [c.op for _, c in sorted(cases.items())]
    path = tmp_path_factory.mktemp("stable") / "libstable.so"
    return {"cases": cases, "report": native.build(ops, path, stable=True)}


def test_the_library_needs_only_the_c_shim_of_libtorch(catalog):
    """What makes it load in another torch: no C++ symbol of c10, ATen or torch (their mangled names change
    between releases), and no run path pinning the libtorch it was built against."""
    lib = str(catalog["report"].path)
    undefined = subprocess.run(["nm", "-D", "--undefined-only", lib], capture_output=True, text=True, check=True)
    names = [line.split()[-1] for line in undefined.stdout.splitlines()]
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    cpp = [d for d in demangled if any(k in d for k in ("c10::", "at::", "torch::"))]
    assert cpp == [], cpp
    assert any(n.startswith("aoti_torch_") for n in names) and "torch_library_impl" in names
    dynamic = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
    assert "RPATH" not in dynamic and "RUNPATH" not in dynamic
    assert "TORCH_TARGET_VERSION" in catalog["report"].source and "ATen/ATen.h" not in catalog["report"].source


# No shrinking: each example builds a library; a failure prints every disagreeing call in full.
@pytest.mark.slow
@pytest.mark.parametrize("python", _pythons())
@settings(max_examples=examples(1, 2), deadline=None, derandomize=True, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(data=st.data())
def test_cpu_and_meta_kernels_agree_with_the_python_path(python, data):
    """Generated declarations and calls: the dry-run library's CPU kernel (everything but the launch) and its
    Meta kernel give the Python path's launches, outputs and refusals (as RuntimeError), in ``python``."""
    ns = f"stcpu{next(_BATCH)}"
    with tempfile.TemporaryDirectory() as tmp:
        gens, py, nat = run_batch(data, ns, 12, Path(tmp), stable=True, python=python)
    bad = compare(gens, py, nat, stable=True)
    assert not bad, f"{len(bad)} disagreements of {len(py)} calls:\n" + "\n\n".join(bad[:8])
    s = summary(gens, py)
    # init= values an output's dtype cannot hold and shared-memory sizes past the limits are refused, by design:
    # a batch launches fewer kernels than before those draws, but never none
    assert s["ops"] >= 6 and s["accepted"] >= 6 and s["launches"] >= 3, s


_COMPILE = r"""
import json, sys, torch
torch.ops.load_library(sys.argv[1])
relu = torch.ops.{ns}.relu
out = {{"torch": torch.__version__}}
f = torch.compile(lambda t: relu(t) * 2, fullgraph=True, dynamic=False)
x = torch.randn(300).cuda() if torch.cuda.is_available() else None
m = relu(torch.empty(5, 7, device="meta"))
out["meta"] = [list(m.shape), str(m.dtype), str(m.device)]
try:
    relu(torch.randn(4))
except RuntimeError as e:
    out["cpu"] = str(e)
try:
    torch.compile(lambda t: relu(t) * 2, fullgraph=True, dynamic=True)(torch.randn(6).to("meta"))
    out["dynamic"] = "no error"
except Exception as e:
    out["dynamic"] = type(e).__name__
print(json.dumps(out))
"""


@pytest.mark.parametrize("python", _pythons())
def test_meta_kernel_serves_static_shapes_and_refuses_symbolic_ones(catalog, python):
    """Meta: concrete sizes give the output; symbolic ones (dynamic=True) fail, since the stable Tensor has no
    SymInt sizes; a CPU tensor gets the Python path's text."""
    code = _COMPILE.format(ns=NS)
    proc = subprocess.run([python, "-c", code, str(catalog["report"].path)], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["meta"] == [[5, 7], "torch.float32", "meta"]
    assert got["cpu"] == (f"{NS}::relu: argument 'x': expected a CUDA tensor, got a tensor on cpu. "
                          "Fix: pass x.cuda().")  # fmt: skip
    assert got["dynamic"] != "no error"
    if python != sys.executable:
        assert got["torch"] != torch.__version__


@pytest.mark.slow
def test_a_stable_library_says_which_backwards_it_leaves_behind(tmp_path):
    """Not silent: no Autograd kernel is registered, and the report names each op whose declared backward the
    library does not carry (docs/native.md)."""
    from opsmith.ops.rmsnorm import rmsnorm_ops

    fwd = rmsnorm_ops("cuda")[0]
    report = native.build([fwd], tmp_path / "librms.so", stable=True)
    registrations = report.source.split("STABLE_TORCH_LIBRARY_FRAGMENT", 1)[1]
    assert "STABLE_TORCH_LIBRARY_IMPL(opsmith, CUDA, m)" in registrations
    assert ", Autograd" not in registrations and "AutogradCUDA" not in registrations
    assert report.without_autograd == ["opsmith::rmsnorm_cuda"]
    assert "no Autograd kernels, so opsmith::rmsnorm_cuda do not differentiate" in report.summary()
    aten = native.build([fwd], tmp_path / "libaten.so", object_only=True)
    assert aten.without_autograd == []


_ALIGN_CHILD = """
import json, sys, torch
torch.ops.load_library(sys.argv[1])
x = torch.randn(1028).narrow(0, 1, 1024)  # 4 bytes past an aligned allocation
y = torch.ops.stabcpu_align.copy16(x)
(launch,) = json.loads(torch.ops.opsmith_dry_run.take())
print(json.dumps({"view": x.data_ptr(), "passed": int.from_bytes(bytes.fromhex(launch["args"][:16]), "little")}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("stable", [False, True], ids=["aten", "stable"])
def test_an_align_make_input_reaches_the_kernel_as_an_aligned_copy_on_every_path(stable, tmp_path):
    """InputDecl(align=16) with contiguous="make": a misaligned view is copied before the launch, by the Python
    path and by both native targets (the stable one passed the view itself when its copy was left out)."""
    import opsmith as ok
    from opsmith.torchlib.eager import make_dry_run

    src = 'extern "C" __global__ void copy16(const float* x, int n, float* y) {}'
    op = ok.cuda_kernel_op("stabcpu_align::copy16", ok.KernelSpec(
        kernel_source=src, kernel_name="copy16", inputs=[ok.InputDecl("x", align=16)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    x = torch.randn(1028).narrow(0, 1, 1024)
    dry, _ = make_dry_run(op)
    dry(x)
    passed = int.from_bytes(bytes.fromhex(dry.launches[-1]["args"][:16]), "little")
    assert passed % 16 == 0 and passed != x.data_ptr()  # the Python path's copy
    lib = tmp_path / "libalign.so"
    native.build([op], lib, dry_run=True, stable=stable)
    proc = subprocess.run([sys.executable, "-c", _ALIGN_CHILD, str(lib)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["view"] % 16 == 4 and got["passed"] % 16 == 0 and got["passed"] != got["view"], got
