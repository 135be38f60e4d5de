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
    return {**cases, **issue49_cases(ns), **llama_cases(ns)}


def issue49_cases(ns: str) -> dict[str, ok.CheckCase]:
    """A styled kernel per capability of issue 49: a 64-bit seed, a per-call dtype constexpr, shared memory as
    a size expression, a backward over an optional input."""
    import styled_kernels as pk

    def dropout_inputs(s, dt, dev):
        return _randn(*s, dtype=dt, device=dev), 0.25, int(torch.randint(2**31, 2**50, ()))

    def rows_inputs(s, dt, dev):
        return _randn(*s, dtype=dt, device=dev), _randn(s[-1], dtype=dt, device=dev), 1e-6

    def dyt_inputs(s, dt, dev):
        return (
            _randn(*s, dtype=dt, device=dev),
            _randn(s[-1], dtype=dt, device=dev),
            _randn(s[-1], dtype=dt, device=dev),
            0.7,
        )

    return {
        "seeded_dropout": ok.CheckCase(pk.register_seeded_dropout(ns), dropout_inputs, pk.seeded_dropout_reference,
                                       shapes=((1000,), (3, 4099)), tol=0),
        "rms_norm_rows": ok.CheckCase(pk.register_rms_norm_rows(ns), rows_inputs, pk.rms_norm_rows_reference,
                                      shapes=((4, 256), (64, 1000)), tol={"atol": 1e-5, "rtol": 1e-4}),
        "softmax_rows": ok.CheckCase(pk.register_softmax_rows(ns), lambda s, dt, dev: (_randn(*s, device=dev),),
                                     lambda x: torch.softmax(x, -1), shapes=((4, 100), (3, 50_000)),
                                     dtypes=(torch.float32,), tol={"atol": 1e-6, "rtol": 1e-5}),
        "dyt": ok.CheckCase(pk.register_dyt(ns), dyt_inputs, pk.dyt_reference, shapes=((4, 256), (64, 1000)),
                            dtypes=(torch.float32, torch.bfloat16), tol={"atol": 1e-5, "rtol": 1e-4}),
    }  # fmt: skip


def _sm_count(t: torch.Tensor) -> int:
    """What opsmith's ``sm_count`` is where ``t`` lives (132 without a GPU, as ``geometry`` takes it)."""
    return torch.cuda.get_device_properties(t.device).multi_processor_count if t.is_cuda else 132


def llama_cases(ns: str) -> dict[str, ok.CheckCase]:
    """The Llama recipe's backward kernels from Liger-Kernel's package (``examples/llama/kernels.py``): the RMSNorm
    backward with its per-multiprocessor dW partials, SwiGLU's backward written over its inputs, RoPE in place."""
    from examples.llama.kernels import llama_kernels

    ops = llama_kernels(ns + "_llama")

    def rms_inputs(s, dt, dev):
        x = _randn(*s, dtype=torch.bfloat16, device=dev)
        rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
        return _randn(*s, dtype=torch.bfloat16, device=dev), x, _randn(s[-1], dtype=torch.bfloat16, device=dev), rstd

    def rms_backward(dy, x, w, rstd):
        """Liger's LLAMA casting: m = dy * w in x's dtype; dW partials per program of cdiv(rows, sm_count) rows."""
        n, rows = x.shape[-1], x.reshape(-1, x.shape[-1])
        m = (dy * w).float().reshape(rows.shape)
        xf, r = rows.float(), rstd.reshape(-1, 1)
        dx = r * m - r * (r * r / n) * (m * xf).sum(-1, keepdim=True) * xf
        part = (dy.reshape(rows.shape) * (xf * r).to(x.dtype)).float()
        sm = _sm_count(x)
        per = -(-rows.shape[0] // sm) if rows.shape[0] else 0
        dw = torch.zeros(sm, n, dtype=torch.float32, device=x.device)
        for p in range(sm if per else 0):
            dw[p] = part[p * per : (p + 1) * per].sum(0)
        return dx.to(x.dtype).reshape(x.shape), dw

    cases = {"llama_rms_norm_backward": ok.CheckCase(
        ops["rms_norm_backward"], rms_inputs, rms_backward, shapes=((6, 256), (2, 3, 1000)), dtypes=(torch.bfloat16,),
        lowp_tol={"atol": 3e-2, "rtol": 2e-2})}  # fmt: skip

    def swiglu_inputs(s, dt, dev):
        return tuple(_randn(*s, dtype=dt, device=dev) for _ in range(3))

    def swiglu_backward(dc, a, b):
        af = a.float()
        sig = torch.sigmoid(af)
        silu = af * sig
        da, db = dc.float() * (silu * (1 - sig) + sig) * b.float(), dc.float() * silu
        a.copy_(da.to(a.dtype))
        b.copy_(db.to(b.dtype))

    cases["llama_swiglu_backward"] = ok.CheckCase(ops["swiglu_backward"], swiglu_inputs, swiglu_backward,
                                                  shapes=((4, 256), (2, 3, 1000)), tol=1e-5)  # fmt: skip

    def rope_inputs(s, dt, dev):
        b, t, h, d = s
        half = _randn(1, t, d // 2, dtype=dt, device=dev)
        return (_randn(b, t, h, d, dtype=dt, device=dev), _randn(b, t, max(1, h // 2), d, dtype=dt, device=dev),
                torch.cat([half.cos(), half.cos()], -1), torch.cat([half.sin(), half.sin()], -1))  # fmt: skip

    def rope(backward):
        def rotate(q, k, cos, sin):
            h = q.shape[-1] // 2
            c, s_ = cos[..., None, :h], sin[..., None, :h] * (-1 if backward else 1)
            for t in (q, k):
                t1, t2 = t[..., :h].clone(), t[..., h:].clone()
                t[..., :h] = t1 * c - t2 * s_
                t[..., h:] = t2 * c + t1 * s_

        return rotate

    for name in ("rope", "rope_backward"):
        cases[f"llama_{name}"] = ok.CheckCase(ops[name], rope_inputs, rope(name == "rope_backward"),
                                              shapes=((2, 16, 4, 64), (1, 7, 3, 32)), tol=1e-5)  # fmt: skip
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
