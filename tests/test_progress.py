"""Long work says what it does: ``OPSMITH_LOG`` levels (compiles and their times at info), a clear error for a
bad level, ``OPSMITH_DUMP_DIR`` writing each op's generated eager code, and ``step`` timing its block."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pythonpath

ROOT = Path(__file__).resolve().parents[1]
REGISTER = (
    "import torch, opsmith as ok\n"
    "SRC = 'extern \"C\" __global__ void k(const float* x, float* y, int n) {}'\n"
    "ok.cuda_kernel_op('t_prog::k', ok.KernelSpec(kernel_source=SRC, kernel_name='k',\n"
    "    inputs=[ok.InputDecl('x', dtype=torch.float32)], outputs=[ok.OutputDecl('y', ok.SameAs('x'))],\n"
    "    extras=[ok.Numel('x', name='n')], geometry=ok.Elementwise(block=(128,)),\n"
    "    autotune=ok.Autotune([ok.Config({'V': 1}), ok.Config({'V': 2})])))\n"
    "from examples.catalog.published import register_published\n"
    "op = register_published('t_prog')['softmax'].op\n"
    "op.variants.kernel(0, op.variants.spec_layout and tuple(torch.float32 if k == 'dtype' else True\n"
    "                                                     for k, _ in op.variants.spec_layout))\n"
)


def _run(env: dict) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=pythonpath(ROOT), COLUMNS="200", **env)
    return subprocess.run([sys.executable, "-c", REGISTER], capture_output=True, text=True, env=full, timeout=600)


def test_info_logs_each_compile_with_its_time(tmp_path):
    pytest.importorskip("triton")
    p = _run({"OPSMITH_LOG": "info", "OPSMITH_CACHE_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "opsmith.compile: t_prog::softmax: config 0" in p.stderr and "compiled in" in p.stderr, p.stderr[-3000:]
    quiet = _run({"OPSMITH_CACHE_DIR": str(tmp_path)})
    assert quiet.returncode == 0 and "opsmith.compile" not in quiet.stderr  # default: warnings only


def test_a_bad_level_names_the_fix():
    p = _run({"OPSMITH_LOG": "loud"})
    assert p.returncode != 0 and "OPSMITH_LOG='loud' is not a level. Fix: set it to warning, info or debug" in p.stderr


def test_dump_dir_holds_each_ops_generated_code(tmp_path):
    p = _run({"OPSMITH_DUMP_DIR": str(tmp_path / "dump")})
    assert p.returncode == 0, p.stderr[-3000:]
    text = (tmp_path / "dump" / "t_prog.k.py").read_text()
    assert text.startswith("# opsmith: the generated eager code of t_prog::k") and "def " in text


def test_step_logs_its_time(caplog):
    from opsmith.progress import step

    with caplog.at_level(logging.INFO, logger="opsmith"), step("packing the widgets"):
        pass
    assert any(r.getMessage().startswith("packing the widgets: ") for r in caplog.records)


def test_registration_logs_its_compile_and_torch_logs_reaches_it(tmp_path):
    """The compile at registration is logged (CUDA C++: NVRTC), with OPSMITH_LOG or PyTorch's own
    TORCH_LOGS=+opsmith (a module name, which PyTorch's switch accepts)."""
    for env in ({"OPSMITH_LOG": "info"}, {"TORCH_LOGS": "+opsmith"}):
        p = _run({**env, "OPSMITH_CACHE_DIR": str(tmp_path / next(iter(env)))})
        assert p.returncode == 0, p.stderr[-3000:]
        assert "t_prog::k: cuda kernel k for sm_" in p.stderr and "compiled in" in p.stderr, (env, p.stderr[-3000:])
