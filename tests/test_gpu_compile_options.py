"""Compiler options on the GPU: a register limit given to NVRTC (CUDA C++) or to the driver's PTX JIT
(``ptx_op``) holds in the loaded kernel (``CU_FUNC_ATTRIBUTE_NUM_REGS``), results stay right, fast math
stays close, and a native library loads the PTX with the same JIT options and computes the same bits."""

import pytest
import torch

import opsmith as ok
from opsmith import native
from opsmith.flavors.cuda_cpp import CudaSource

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from test_compile_options import HUNGRY  # noqa: E402  (the register-hungry kernel of the CPU tests)

NS = "t_gpu_copts"
DECL = dict(inputs=[ok.InputDecl("x", dtype=torch.float32)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
            extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise(block=(128,)))  # fmt: skip
ORDER = ["x", "y", "n"]  # PTX keeps no parameter names: the kernel's order


def _regs(op: ok.Op) -> int:
    from cuda.bindings import driver

    fn = op.variants.first.function(torch.cuda.current_device())
    err, n = driver.cuFuncGetAttribute(driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)
    assert not err
    return n


@pytest.fixture(scope="module")
def ops():
    def cuda(name, options):
        return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(kernel_source=HUNGRY, kernel_name="hungry",
                                                                options=options, **DECL))  # fmt: skip

    major, minor = torch.cuda.get_device_capability()
    ptx = CudaSource("t::ptx", HUNGRY, "hungry", target="ptx").build(f"sm_{major}{minor}").data
    return {"plain": cuda("plain", []), "limited": cuda("limited", ["-maxrregcount=24"]),
            "fast": cuda("fast", ["-use_fast_math"]),
            "ptx": ok.ptx_op(f"{NS}::ptx", ptx, "hungry", param_order=ORDER, **DECL),
            "ptx_limited": ok.ptx_op(f"{NS}::ptx_limited", ptx, "hungry", options=["-maxrregcount=24", "-lineinfo"],
                                     param_order=ORDER, **DECL)}  # fmt: skip


def test_register_limits_hold_for_nvrtc_and_the_ptx_jit(ops):
    x = torch.rand(1 << 16, device="cuda") - 0.5
    want = ops["plain"](x)
    assert _regs(ops["plain"]) > 24 and _regs(ops["ptx"]) > 24
    assert _regs(ops["limited"]) <= 24 and _regs(ops["ptx_limited"]) <= 24
    for k in ("limited", "ptx", "ptx_limited"):
        torch.testing.assert_close(ops[k](x), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ops["fast"](x), want, rtol=2e-3, atol=2e-3)  # approximate expf: close, not equal


def test_native_library_loads_ptx_with_the_jit_options(ops, tmp_path):
    chosen = [ops[k] for k in ("limited", "ptx_limited", "fast")]
    x = torch.rand(1 << 16, device="cuda") - 0.5
    want = [op(x) for op in chosen]
    report = native.build(chosen, tmp_path / "libopts.so")
    native.use(chosen, report.path)
    for op, w in zip(chosen, want, strict=True):
        assert op.native == report.path
        assert torch.equal(op(x), w)  # the same kernels (the PTX compiled by the JIT with the same options)
