"""CuTe DSL ops in native libraries (issue 39, item 3), on CPU: the DSL's exported launch code is linked into an
ATen library, which serves the op by default and loads in a process without opsmith or the DSL. A dry-run
library records what the host function would get (config, its arguments in 8-byte slots), compared here with
what the Python path's dry run records for the same calls. Stable-ABI and XLA libraries still refuse the op.
Scenarios that load a library run in their own process (a loaded library stays loaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import seeded_cache

pytest.importorskip("cutlass", reason="CuTe DSL (pip install 'opsmith[cute]') is part of the test extra")

ROOT = Path(__file__).resolve().parents[1]

_PRELUDE = """
import json, struct, sys
import torch
import opsmith as ok
from opsmith import native
from examples.cute.scale_op import scale, scale_op
def plain(ns):
    return ok.cute_op(f"{ns}::scale", scale, inputs=[ok.InputDecl("x"), ok.ScalarInput("alpha", float)],
                      outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")])
def native_path():
    return json.loads(torch.ops.opsmith_dry_run.take())
def slots(r):  # a native record's arguments: x, alpha (float32), n (int32), y, each in an 8-byte slot
    b = bytes.fromhex(r["args"])
    return (struct.unpack_from("<Q", b, 0)[0], struct.unpack_from("<f", b, 8)[0], struct.unpack_from("<i", b, 16)[0],
            struct.unpack_from("<Q", b, 24)[0])
"""


def _run(code: str, tmp: Path, **extra: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # (where the DSL is)
    env = dict(os.environ, PYTHONPATH=path, OPSMITH_CACHE_DIR=str(seeded_cache(tmp / "cache")), **extra)
    env.pop("OPSMITH_DISABLE_DISK_CACHE", None)
    return subprocess.run([sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, env=env,
                          timeout=1200)  # fmt: skip


def test_only_aten_libraries_hold_a_cute_op():
    from examples.cute.scale_op import scale_op
    from opsmith.native.build import refusal

    op = scale_op("t_cute_native_refusal")
    assert refusal(op) is None
    for target, name in (("stable", "stable-ABI"), ("xla", "XLA")):
        why, fix = refusal(op, target)
        assert f"CuTe DSL host function, which a {name} library does not hold" in why and "ATen library" in fix


@pytest.mark.slow
def test_served_by_default_with_the_python_paths_arguments(tmp_path):
    """Registered in a dry-run process, the op switches to its served library: a call the library holds runs
    there with the arguments the Python path passes (same config, pointers, scalar, size); an unaligned input
    (another specialization) and a dtype it lacks go to the Python path, counted by why."""
    r = _run(
        """
op = plain("t_cute_served")
x = torch.randn(3000)
op(x, 2.0)
python_path = op.cpu_kernel.launches
assert native.wait(900), "the served library did not land"
print("serving:", op.serving)
y = op(x, 2.5)
records = native_path()
print("native records:", len(records))
r = records[0]
px, alpha, n, py = slots(r)
print("same call:", r["config"] == 0, px == x.data_ptr(), alpha == 2.5, n == 3000, py == y.data_ptr())
print("symbol:", r["symbol"].startswith("_mlir_opsmith_cute_"))
before = len(python_path)
op(x[1:], 2.0)
op(x.double(), 2.0)
print("python path took:", len(python_path) - before, [p["spec"] for p in python_path[before:]])
print("native took:", len(native_path()))
c = op.serving_counts()
print("counts:", c.native, sorted(c.python.items()))
""",
        tmp_path,
        OPSMITH_NATIVE="dry-run",
    )
    assert r.returncode == 0, r.stderr[-4000:]
    out = r.stdout
    assert "serving: native" in out and "native records: 1" in out, out
    assert "same call: True True True True True" in out and "symbol: True" in out, out
    assert "python path took: 2 [['torch.float32', 'False'], ['torch.float64', 'True']]" in out, out
    assert "native took: 0" in out, out
    assert "counts: 1 [('a compiled-in size the library lacks', 1), ('a dtype the library lacks', 1)]" in out, out


@pytest.mark.slow
def test_built_library_serves_without_opsmith_or_the_dsl(tmp_path):
    """``opsmith build`` of a tuned CuTe DSL op: the dry-run library, loaded in a process that imports neither
    opsmith nor the DSL, runs the default config for each dtype it holds and names what it lacks; the real
    library links (no undefined symbol of the DSL's export left) and loads there too."""
    r = _run(
        f"""
op = scale_op("t_cute_built")
rep = native.build([op], {str(tmp_path / "dry.so")!r}, archs=["sm_90a"], dry_run=True)
print("kernels:", rep.kernels, rep.skipped)
rep = native.build([op], {str(tmp_path / "real.so")!r}, archs=["sm_90a"])
print("built:", rep.ops)
""",
        tmp_path,
        OPSMITH_NATIVE="off",
        OPSMITH_DEFAULT_ARCH="sm_90a",
    )
    assert r.returncode == 0, r.stderr[-4000:]
    # Config 0 (registration compiles it) and the default, 1, for each dtype a build guesses (float32, float16,
    # bfloat16), 16-byte aligned.
    assert "kernels: {'t_cute_built::scale': 6} []" in r.stdout and "built: ['t_cute_built::scale']" in r.stdout, (
        r.stdout
    )
    nm = subprocess.run(["nm", "-D", "--undefined-only", str(tmp_path / "real.so")], capture_output=True, text=True)
    undefined = [s.split()[-1] for s in nm.stdout.splitlines() if s.strip()]
    assert not [s for s in undefined if s.startswith(("_mlir_", "_cuda"))], undefined
    code = f"""
import json, struct, sys
import torch
torch.ops.load_library({str(tmp_path / "dry.so")!r})
x = torch.randn(1000)
y = torch.ops.t_cute_built.scale(x, 3.0)
r, = json.loads(torch.ops.opsmith_dry_run.take())
b = bytes.fromhex(r["args"])
print("config:", r["config"], "x:", struct.unpack_from("<Q", b, 0)[0] == x.data_ptr(),
      "alpha:", struct.unpack_from("<f", b, 8)[0], "n:", struct.unpack_from("<i", b, 16)[0])
try:
    torch.ops.t_cute_built.scale(x.double(), 3.0)
except RuntimeError as e:
    print("double:", str(e).splitlines()[0])
print("imported:", sorted(m for m in ("opsmith", "cutlass") if m in sys.modules))
"""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    out = r.stdout
    assert "config: 1 x: True alpha: 3.0 n: 1000" in out, out  # Autotune(default=1): no decision made on CPU
    assert "double: t_cute_built::scale: this library holds no kernel for config 1 and specialization [7, 1]" in out, (
        out
    )
    assert "imported: []" in out, out
    code = f"import torch\ntorch.ops.load_library({str(tmp_path / 'real.so')!r})\nprint(torch.ops.t_cute_built.scale)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert r.returncode == 0 and "t_cute_built.scale" in r.stdout, r.stderr[-4000:]
