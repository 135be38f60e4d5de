"""Run under TRITON_INTERPRET=1 by tests/test_triton_cpu.py: a kernel whose @triton.jit helper changes (its module
rewritten and reloaded) is a changed declaration in the interpreter too, as Triton's own hash makes it when
compiled: registering it again under the same name is refused naming the kernel, a new name runs the new helper."""

import importlib
import sys
import tempfile
from pathlib import Path

import torch

import opsmith as ok

HELPER = """import triton
import triton.language as tl  # the interpreter wants it visible to a jit function

@triton.jit
def times(x):
    return x * {k}
"""
KERNEL = """import triton
import triton.language as tl
import t_helper_mod

@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, t_helper_mod.times(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)
"""
d = Path(tempfile.mkdtemp())
sys.path.insert(0, str(d))
(d / "t_helper_mod.py").write_text(HELPER.format(k=2))
(d / "t_kernel_mod.py").write_text(KERNEL)
# Imported by name: the modules exist only in this temporary directory, so no static import names them.
t_helper_mod = importlib.import_module("t_helper_mod")
t_kernel_mod = importlib.import_module("t_kernel_mod")


def register(name):
    return ok.triton_op(name, t_kernel_mod.scale, inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Numel("x", name="n")], geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)),
                        autotune=ok.Autotune([ok.Config({"BLOCK": 64})]))  # fmt: skip


x = torch.randn(100)
torch.testing.assert_close(register("t_helper::scale")(x), x * 2)
(d / "t_helper_mod.py").write_text(HELPER.format(k=3))
importlib.reload(t_helper_mod)
importlib.reload(t_kernel_mod)
try:
    register("t_helper::scale")
except ok.RegistrationError as e:
    assert "already registered with a different declaration; what differs: source" in str(e), e
else:
    raise AssertionError("the changed helper was taken as the same declaration")
torch.testing.assert_close(register("t_helper::scale3")(x), x * 3)
print("helper change seen")
