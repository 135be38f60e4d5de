"""Every user string that reaches generated code survives each generator (issue 49, item 3): a precondition's
``why=`` holding '%', '{', '}', quotes, a backslash, a newline and non-ASCII text generates the ATen, stable-ABI
and XLA (JAX) library sources, the ATen one compiles, and a call the precondition refuses gets the text back
unchanged. A '%' failed the generator with "%o format: an integer is required" and kept the op on the Python path
for the life of the process."""

import subprocess
import sys

import pytest
import torch

import opsmith as ok
from opsmith.native.build import build_source, compile_library

NS = "t_native_strings"
EVIL = 'rows of 4 % of "the" {tile} \\ n\nübergröße 100%o %s %d {0} ?? ??= */ //'
SRC = 'extern "C" __global__ void rows4(const float* x, long long n, float* y) {}'


@pytest.fixture(scope="module")
def op():
    return ok.cuda_kernel_op(f"{NS}::rows4", ok.KernelSpec(
        kernel_source=SRC, kernel_name="rows4", inputs=[ok.InputDecl("x", shape=("N",))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Dim("N", "int64")], geometry=ok.Elementwise(),
        requires=[ok.Divisible("N", 4, why=EVIL)]))  # fmt: skip


@pytest.mark.parametrize("target", ["aten", "stable", "xla"])
def test_every_generator_takes_the_text(op, target):
    text, _, natives, skipped = build_source([op], ["sm_90"], target=target)
    assert not skipped and natives, skipped
    assert "100%o %s %d {0}" in text  # as a C++ literal: printable ASCII as it is


@pytest.mark.slow
def test_the_compiled_library_refuses_with_the_text_unchanged(op, tmp_path):
    text, images, _, _ = build_source([op], ["sm_90"])
    compile_library(text, images, tmp_path / "s.so")
    code = (f"import torch; torch.ops.load_library({str(tmp_path / 's.so')!r})\n"
            f"try:\n    torch.ops.{NS}.rows4(torch.empty(6, device='meta'))\n"
            "except ValueError as e:\n    print(repr(str(e)))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with pytest.raises(ok.InputError) as python_path:
        op(torch.empty(6, device="meta"))
    assert EVIL in eval(proc.stdout.strip()) and EVIL in str(python_path.value)
