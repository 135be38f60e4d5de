"""The edges of the ``opsmith`` command a user touches first (issue 22, items 12 and 13): every mistake in a
command exits 2 with a message that says the fix, never a traceback; ``opsmith check`` on a machine without a
GPU skips what needs one and does not mistake a refused input for a refused gradient."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath

import opsmith as ok

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
NO_GPU = not torch.cuda.is_available()


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=pythonpath(str(HERE), str(ROOT)), **(env or {}))
    return subprocess.run([sys.executable, "-m", "opsmith", *args], capture_output=True, text=True, env=e,
                          timeout=600, cwd=ROOT)  # fmt: skip


def _refused(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    for w in words:
        assert w in r.stderr, (w, r.stderr[-3000:])
    assert "Fix:" in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["build", "native_matrix:ops", "-o", "x.so", "--dtypes", "floot32"],
            ["--dtypes: 'floot32' is not a torch dtype"],
        ),
        (["build", "native_matrix:ops", "-o", "/missing/dir/x.so"], ["the directory '/missing/dir' does not exist"]),
        (["build", "native_matrix:ops", "-o", "x.so", "--arch", "90"], ["--arch: '90' is not an architecture name"]),
        (["build", "native_matrix:ops", "-o", "x.so", "--arch", "sm_999"], ["'sm_999' is not an architecture NVRTC"]),
        (["check", "test_check_cpu:CLI_TARGET", "--only", "nosuch"], ["--only: unknown checks ['nosuch']"]),
        (["check", "test_check_cpu:CLI_TARGET", "--device", "tpu"], ["--device"]),
        (["tuning", "export", "/missing/dir/d.json"], ["the directory '/missing/dir' does not exist"]),
        (["tuning", "export", "d.json", "--op", "nosuch::op"], ["--op: no tuning decisions for ['nosuch::op']"]),
        (["tuning", "import", "/missing/d.json"], ["not a decisions file"]),
        (["check", "nosuch_module:X"], ["cannot load 'nosuch_module:X'"]),
    ],
)
def test_a_mistake_in_a_command_exits_2_with_the_fix(args, words, tmp_path):
    r = _cli(*args, env={"OPSMITH_CACHE_DIR": str(tmp_path / "cache")})
    _refused(r, *words)
    assert not Path("/missing").exists() and not (ROOT / "x.so").exists()


@pytest.mark.skipif(not NO_GPU, reason="checks the refusal of --device cuda where there is no GPU")
def test_device_cuda_without_a_gpu_is_a_usage_error():
    _refused(_cli("check", "test_check_cpu:CLI_TARGET", "--device", "cuda"), "this machine has no CUDA device")


@pytest.mark.skipif(not NO_GPU, reason="checks OPSMITH_DEFAULT_ARCH where no GPU decides the architecture")
def test_a_bad_default_arch_is_blamed_on_the_variable_not_the_kernel():
    code = ("import opsmith as ok\nsrc = 'extern \"C\" __global__ void k(const float* x, int n, float* y) {}'\n"
            "try:\n    ok.cuda_kernel_op('t_cli::k', ok.KernelSpec(kernel_source=src, kernel_name='k', "
            "inputs=[ok.InputDecl('x')], outputs=[ok.OutputDecl('y', ok.SameAs('x'))], extras=[ok.Numel('x')], "
            "geometry=ok.Elementwise()))\nexcept ok.ToolchainError as e:\n    print(e)")  # fmt: skip
    for bad in ("sm_999", "90"):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, PYTHONPATH=pythonpath(ROOT), OPSMITH_DEFAULT_ARCH=bad))  # fmt: skip
        assert r.stdout.startswith(f"OPSMITH_DEFAULT_ARCH: {bad!r} is not an architecture"), r.stdout + r.stderr
        assert "Fix: set it to one of those" in r.stdout and "failed to compile" not in r.stdout


def test_version():
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"opsmith {ok.__version__}"


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["check", "--help"], ["build", "--help"]])
def test_help_and_version_import_no_torch(args):
    """``import opsmith`` and the command's help resolve names lazily: torch (~1.5 s) is imported by a command's
    work, not by its help."""
    code = ("import sys\nfrom opsmith.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert e.code == 0, e.code\nprint('torch imported' if 'torch' in sys.modules else 'no torch')\n")  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "no torch", p.stdout


def test_public_names_resolve_lazily_and_completely():
    import opsmith

    assert set(opsmith.__all__) <= set(dir(opsmith))
    assert all(getattr(opsmith, n) is not None for n in opsmith.__all__)
    assert opsmith.check is ok.check and callable(opsmith.check)  # the function, not a submodule
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        opsmith.nope  # noqa: B018


@pytest.mark.skipif(not NO_GPU, reason="what a machine without a GPU reports")
def test_check_on_a_machine_without_a_gpu_skips_what_needs_one():
    """Before: every row that runs the op was a FAIL (the op refuses CPU tensors), and autograd passed because
    an InputError was raised. Now the rows that need the kernel skip, and compile and export trace on fake CUDA
    tensors (nothing ran, nothing passes)."""
    from examples.catalog.basic import register_all

    case = register_all("t_cli_check")["relu"]
    report = ok.check(case, device="cpu")
    assert report.ok, report.table()
    rows = {c: (r, d) for c, r, d in report.rows}
    assert {c for c, (r, _) in rows.items() if r == "traced"} == {"compile-static", "compile-dynamic", "export"}
    assert all(r == "skip" and ("CUDA tensors only" in d or "needs a CUDA device" in d)
               for c, (r, d) in rows.items() if r != "traced"), report.table()  # fmt: skip
    r = _cli("check", "examples.catalog:shipped_cases", "--only", "numerics,autograd")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "FAIL" not in r.stdout and "the op runs on CUDA tensors only and the device is cpu (no GPU here)" in r.stdout


def test_autograd_row_needs_a_differentiation_error_not_a_refused_input(monkeypatch):
    """An opsmith op without a backward passes the autograd row only by refusing the gradient itself."""
    from opsmith.checking.harness import _check_autograd
    from opsmith.checking.samples import ShapeSolver

    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    op = ok.cuda_kernel_op("t_cli::nograd", ok.KernelSpec(kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x")],
                           outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                           geometry=ok.Elementwise()))  # fmt: skip
    case = ok.CheckCase(op, inputs=lambda s, d, dev: (torch.randn(s, dtype=d, device=dev),), reference=torch.clone,
                        shapes=[(8,)])  # fmt: skip
    with pytest.raises(ok.InputError):  # on CPU tensors the op refuses the input, before any gradient
        _check_autograd(case, torch.device("cpu"), ShapeSolver(case, torch.device("cpu")))
    # On meta tensors the fake runs and the gradient reaches the refusal node: the row passes.
    assert "DifferentiationError" in _check_autograd(
        case, torch.device("meta"), ShapeSolver(case, torch.device("meta"))
    )
