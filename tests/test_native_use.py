"""``opsmith.native.use`` on CPU (issue 22, items 6 and 7): where the library is written and loaded from, and
a second ``use`` of the same ops after they gained a kernel. Each scenario runs in its own process (``use``
replaces the ops' Python implementations for good), with dry-run libraries so CPU calls reach the kernels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pythonpath, seeded_cache

ROOT = Path(__file__).resolve().parents[1]

_PRELUDE = """
import json, sys, warnings
from pathlib import Path
import torch
import opsmith as ok
from opsmith import native
SRC = 'template <typename T> __global__ void k(const T* x, int n, T* y) {}'
a = ok.cuda_kernel_op("t_use::a", ok.KernelSpec(kernel_source=SRC, kernel_name="k<{T_x}>",
    inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=(128,))))
x = torch.randn(300)
"""


def _run(code: str, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=pythonpath(ROOT), OPSMITH_CACHE_DIR=str(seeded_cache(cache)))
    env.pop("OPSMITH_DISABLE_DISK_CACHE", None)
    return subprocess.run([sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, env=env,
                          timeout=900)  # fmt: skip


@pytest.mark.slow
def test_7_a_second_use_after_a_new_kernel_loads_a_new_library(tmp_path):
    """The first library holds only float32; after the process compiles float16, ``use`` again on the same ops
    builds a library at a new content-addressed path and serves float16 from it (the old code rewrote one
    path, and dlopen handed back the old, deleted library)."""
    r = _run(
        """
first = native.use([a], dry_run=True, dtypes=[])
try:
    a(x.half())
except RuntimeError as e:
    print("before:", str(e).splitlines()[0][:60])
a.variants.kernel(0, (torch.float16,))
second = native.use([a], dry_run=True, dtypes=[])
out = a(x.half())
print("after:", out.dtype, json.loads(torch.ops.opsmith_dry_run.take())[-1]["grid"])
print("paths:", first.path != second.path, first.path.parent == second.path.parent, second.path.name)
print("again:", native.use([a], dry_run=True, dtypes=[]).path == second.path)
""",
        tmp_path / "cache",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "before: t_use::a: this library holds no kernel for config 0" in r.stdout
    assert "after: torch.float16 [3, 1, 1]" in r.stdout
    assert "paths: True True ops-" in r.stdout and "again: True" in r.stdout


@pytest.mark.slow
def test_6_a_library_directory_that_is_not_private_is_refused(tmp_path):
    """``<cache>/native-libs`` a symlink to another user's directory, or writable by others: nothing is written
    or loaded there; a fresh private directory serves instead, with a warning saying why."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cache / "native-libs").symlink_to(elsewhere)
    code = """
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    report = native.use([a], dry_run=True, dtypes=[])
print("warned:", [str(m.message).split(". Compiling")[0].rsplit(" ", 6)[-6:] for m in w
                  if "refusing the disk cache" in str(m.message)])
print("at:", report.path)
print("served:", a(x).shape)
"""
    r = _run(code, cache)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "'is', 'a', 'symbolic', 'link'" in r.stdout and "served: torch.Size([300])" in r.stdout
    assert list(elsewhere.iterdir()) == [] and str(elsewhere) not in r.stdout
    (cache / "native-libs").unlink()
    (cache / "native-libs").mkdir()
    os.chmod(cache / "native-libs", 0o770)  # group-writable: refused too
    r = _run(code, cache)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "'by', 'group', 'or', 'others', '(mode" in r.stdout and list((cache / "native-libs").iterdir()) == []
    os.chmod(cache / "native-libs", 0o700)
    r = _run(code, cache)
    assert r.returncode == 0 and "warned: []" in r.stdout
    assert f"at: {cache / 'native-libs'}" in r.stdout and len(list((cache / "native-libs").iterdir())) == 1


def test_build_refuses_a_missing_directory(tmp_path):
    import pytest

    import opsmith as ok
    from opsmith import native

    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    op = ok.cuda_kernel_op("t_use::plain", ok.KernelSpec(kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x")],
                           outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                           geometry=ok.Elementwise()))  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"opsmith build: path: the directory '.*/missing/dir' does not exist"):
        native.build([op], tmp_path / "missing" / "dir" / "x.so")
    assert not (tmp_path / "missing").exists()
