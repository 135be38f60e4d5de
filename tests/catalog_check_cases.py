"""``CheckCase``s for every published and styled kernel the catalog and the tests declare (Triton's tutorials in
our style, Liger-Kernel's own kernels from the package, llm.c-style CUDA C++, the attention), and for
deliberately wrong declarations of some of them: what ``test_gpu_check_table.py`` runs ``opsmith check`` over.

``catalog_cases(ns)``: {name: case} for correct declarations. ``wrong_cases(ns)``: {name: (case, cause)}, each a
declaration the kernel does not honour (silenced, so opsmith keeps it) and the words the FAIL must name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import opsmith as ok

sys.path.insert(0, str(Path(__file__).parent))

__all__ = ["catalog_cases", "wrong_cases"]


def _randn(*shape, dtype=torch.float32, device="cuda"):
    return torch.randn(*shape, dtype=dtype, device=device)


def catalog_cases(ns: str) -> dict[str, ok.CheckCase]:
    from styled_kernels import (
        gelu_reference,
        norm_reference,
        register_gelu,
        register_liger_swiglu,
        register_norm,
        register_swiglu,
        swiglu_reference,
    )

    from examples.catalog.attention import attention_reference, register_attention
    from examples.catalog.optional import liger_case, liger_cross_entropy
    from examples.catalog.published import register_published
    from examples.catalog.rows import layer_norm_reference, liger_rms_norm, register_rows, rms_reference

    cases = {f"published_{k}": c for k, c in register_published(ns).items()}
    rows = register_rows(ns)

    def xw(s, dt, dev):
        return _randn(*s, dtype=dt, device=dev), _randn(s[-1], dtype=dt, device=dev), 1e-6

    cases["rows_forward"] = ok.CheckCase(rows["forward"], xw, lambda x, w, eps: rms_reference(x, w, eps),
                                         shapes=((4, 256), (2, 3, 1000)), tol=1e-4)  # fmt: skip
    cases["rows_layer_norm"] = ok.CheckCase(
        rows["layer_norm"], lambda s, dt, dev: (*xw(s, dt, dev)[:2], _randn(s[-1], dtype=dt, device=dev), 1e-5),
        layer_norm_reference, shapes=((4, 256), (2, 3, 1000)), tol=1e-4)  # fmt: skip
    cases["rows_roll"] = ok.CheckCase(rows["roll"], lambda s, dt, dev: (_randn(*s, dtype=dt, device=dev), 7),
                                      lambda x, s: torch.roll(x, s, -1), shapes=((6, 100), (3, 1000)))  # fmt: skip
    cases["liger_rms_norm"] = ok.CheckCase(
        liger_rms_norm(ns), lambda s, dt, dev: (*xw(s, dt, dev), 0.0), lambda x, w, eps, off: rms_reference(x, w, eps),
        shapes=((4, 256), (2, 3, 1000)), tol=1e-4)  # fmt: skip
    cases["liger_cross_entropy"] = liger_case(liger_cross_entropy(ns))
    cases["attention"] = ok.CheckCase(
        register_attention(ns),
        lambda s, dt, dev: (*(_randn(*s, dtype=dt, device=dev) for _ in range(3)), 0.125),
        attention_reference, shapes=((2, 3, 128, 64), (1, 2, 100, 32)), dtypes=(torch.float16,),
        lowp_tol={"atol": 2e-2, "rtol": 2e-2})  # fmt: skip
    cases["llmc_gelu"] = ok.CheckCase(register_gelu(ns), lambda s, dt, dev: (_randn(*s, dtype=dt, device=dev),),
                                      gelu_reference, shapes=((1000,), (3, 257)), tol=1e-5)  # fmt: skip

    def norm_inputs(s, dt, dev):
        return torch.zeros(1, device=dev), _randn(*s, dtype=dt, device=dev)

    def norm_ref(out, data):
        norm_reference(out, data)

    cases["llmc_norm"] = ok.CheckCase(register_norm(ns), norm_inputs, norm_ref, shapes=((1000,), (3, 4097)),
                                      tol={"atol": 1e-2, "rtol": 1e-4})  # fmt: skip

    def ab(s, dt, dev):
        return _randn(*s, dtype=dt, device=dev), _randn(*s, dtype=dt, device=dev), 1.0

    for name, reg in (("liger_style_swiglu", register_swiglu), ("liger_swiglu", register_liger_swiglu)):
        cases[name] = ok.CheckCase(reg(ns), ab, swiglu_reference, shapes=((4, 256), (3, 1000)), tol=1e-5)
    return cases


def wrong_cases(ns: str) -> dict[str, tuple[ok.CheckCase, str]]:
    """Declarations the kernels do not honour, kept as written with ``silence=``: Liger's RMSNorm with its
    unread ``W_row_stride`` declared as W's stride; the attention with a stride per tensor."""
    from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel

    from examples.catalog.attention import attention_reference, register_attention
    from examples.catalog.rows import rms_reference

    rms = ok.triton_op(
        f"{ns}::liger_rms_norm_w_stride", _rms_norm_forward_kernel,
        inputs=[ok.InputDecl("X", shape=("*R", "N")), ok.InputDecl("W", shape=("N",), dtype="X"),
                ok.ScalarInput("eps", float), ok.ScalarInput("offset", float)],
        outputs=[ok.OutputDecl("Y", ok.SameAs("X")), ok.OutputDecl("RSTD", shape=("*R",), dtype=torch.float32)],
        extras=[ok.Stride("Y", -2, name="Y_row_stride"), ok.Stride("X", -2, name="X_row_stride"),
                ok.Stride("W", -1, name="W_row_stride"), ok.Stride("RSTD", -1, name="RSTD_row_stride"),
                ok.Dim("N", name="n_cols"), ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"casting_mode": 0, "elementwise_affine": True},
        silence=("W_row_stride",))  # fmt: skip
    attn = register_attention(ns, shared=False, silence=("stride_qz", "stride_qh", "stride_kz", "stride_kh",
                                                         "stride_vz", "stride_vh", "Z"))  # fmt: skip
    return {
        "liger_rms_norm_w_stride": (ok.CheckCase(
            rms, lambda s, dt, dev: (_randn(*s, dtype=dt, device=dev), _randn(s[-1], dtype=dt, device=dev), 1e-6, 0.0),
            lambda x, w, eps, off: rms_reference(x, w, eps), shapes=((4, 256), (2, 3, 1000)), tol=1e-4),
            "passes when W is contiguous"),
        "attention_per_tensor": (ok.CheckCase(
            attn, lambda s, dt, dev: (*(_randn(*s, dtype=dt, device=dev) for _ in range(3)), 0.125),
            attention_reference, shapes=((2, 3, 128, 64),), dtypes=(torch.float16,),
            lowp_tol={"atol": 2e-2, "rtol": 2e-2}), "Stride(('Q', 'Out'), axis)"),
    }  # fmt: skip
