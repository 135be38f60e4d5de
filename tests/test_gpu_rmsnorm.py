"""GPU suite for autograd and the RMSNorm lab: both kernels forward and backward against an fp32 reference
over row lengths 1..65,536, every floating dtype, one row, zero rows and non-contiguous inputs; gradcheck in
float64; opcheck; a Llama-style block under torch.compile(fullgraph=True) with zero graph breaks; the errors
for a missing backward, double backward and a mis-shaped weight."""

import importlib.util
import warnings

import pytest
import torch
import torch.nn.functional as F

import opsmith as ok
from opsmith.ops.rmsnorm import LlamaRMSNorm, RMSNorm, reference_rms_norm, rms_norm, rmsnorm_ops

pytestmark = pytest.mark.gpu
# The CuTe DSL kernels need CuTe DSL (the test extra installs it; on the GPU machine `scripts/gpu-suite cute`
# carries it in and runs these with -k cute).
CUTE = pytest.param("cute", marks=pytest.mark.skipif(importlib.util.find_spec("cutlass") is None,
                                                     reason="CuTe DSL not importable: pip install 'opsmith[cute]'"))  # fmt: skip
IMPLS = ["triton", "cuda", CUTE]
# bf16 keeps 8 mantissa bits: one rounding of y is ~4e-3 relative; dx sums n products, so its error grows
# with sqrt(n) from there. fp16 has 11 bits. Tolerances are a few roundings of the output dtype.
TOL = {torch.float32: (1e-5, 1e-4), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 2e-2),
       torch.float64: (1e-10, 1e-9)}  # fmt: skip


def _grads(fn, x, w, dy):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    y = fn(x, w)
    gx, gw = torch.autograd.grad(y, (x, w), dy)
    return y, gx, gw


def _compare(impl, x, w, dy, eps=1e-6):
    torch.empty(64 << 20, device="cuda").fill_(float("nan"))  # poison memory outputs may be carved from
    got = _grads(lambda a, b: rms_norm(a, b, eps, impl), x, w, dy)
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    want = _grads(lambda a, b: reference_rms_norm(a, b, eps), x.to(acc), w.to(acc), dy.to(acc))
    atol, rtol = TOL[x.dtype]
    n = x.shape[-1]
    for name, g, r in zip(("y", "dx", "dweight"), got, want, strict=True):
        assert g.dtype == x.dtype and g.shape == r.shape
        # dweight sums over rows: its error grows with the row count; scale by sqrt(rows)
        scale = max(1.0, (x.numel() / max(n, 1)) ** 0.5) if name == "dweight" else 1.0
        torch.testing.assert_close(g.to(acc), r, atol=atol * scale, rtol=rtol * scale,
                                   msg=lambda m, nm=name: f"{impl} {tuple(x.shape)} {x.dtype} {nm}: {m}")  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_forward_backward_against_reference(impl, dtype):
    torch.manual_seed(0)
    for shape in [(4, 1), (3, 7), (1, 4096), (5, 1000), (2, 4097), (8, 5000), (2, 65536), (64, 4096), (0, 128),
                  (3, 20000), (2, 131072)]:  # fmt: skip
        x = torch.randn(shape, device="cuda", dtype=dtype) * 3
        w = torch.randn(shape[-1], device="cuda", dtype=dtype)
        dy = torch.randn(shape, device="cuda", dtype=dtype)
        _compare(impl, x, w, dy)


@pytest.mark.parametrize("impl", IMPLS)
def test_non_contiguous_and_batched_inputs(impl):
    torch.manual_seed(1)
    x = torch.randn(96, 3, 40, device="cuda").transpose(0, 2)  # (40, 3, 96), strided
    w = torch.randn(96, device="cuda")
    dy = torch.randn(40, 3, 96, device="cuda")
    assert not x.is_contiguous()
    _compare(impl, x, w, dy)
    # A weight that is a strided view is made contiguous too.
    w2 = torch.randn(2, 96, device="cuda")[:, :].t()[:, 0]
    _compare(impl, x, w2, dy)


@pytest.mark.parametrize("impl", IMPLS)
def test_gradcheck_float64(impl):
    torch.manual_seed(2)
    for shape in [(3, 9), (2, 130)]:
        x = torch.randn(shape, device="cuda", dtype=torch.float64, requires_grad=True)
        w = torch.randn(shape[-1], device="cuda", dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda a, b: rms_norm(a, b, 1e-6, impl), (x, w), eps=1e-6, atol=1e-7, rtol=1e-6)
    _compare(impl, torch.randn(4, 3000, device="cuda", dtype=torch.float64),
             torch.randn(3000, device="cuda", dtype=torch.float64), torch.randn(4, 3000, device="cuda", dtype=torch.float64))  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
def test_only_needed_gradients_are_computed(impl):
    x = torch.randn(16, 256, device="cuda", requires_grad=True)
    w = torch.randn(256, device="cuda")  # no grad wanted
    rms_norm(x, w, 1e-6, impl).sum().backward()
    assert x.grad is not None and w.grad is None
    x2 = torch.randn(16, 256, device="cuda")
    w2 = torch.randn(256, device="cuda", requires_grad=True)
    rms_norm(x2, w2, 1e-6, impl).sum().backward()
    torch.testing.assert_close(w2.grad, (reference_rms_norm(x2, None, 1e-6)).sum(0), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("impl", IMPLS)
def test_opcheck_forward_and_backward_ops(impl):
    fwd, bwd = rmsnorm_ops(impl)
    samples = [
        (torch.randn(8, 64, device="cuda", requires_grad=True), torch.randn(64, device="cuda", requires_grad=True), 1e-6),
        (torch.randn(3, 5, 33, device="cuda", dtype=torch.bfloat16), torch.randn(33, device="cuda", dtype=torch.bfloat16), 1e-5),
        (torch.randn(0, 16, device="cuda"), torch.randn(16, device="cuda"), 1e-6),
        (torch.randn(40, 12, device="cuda").t(), torch.randn(40, device="cuda", requires_grad=True), 1e-6),
    ]  # fmt: skip
    for args in samples:
        torch.library.opcheck(fwd.overload, args)
    x = torch.randn(8, 64, device="cuda")
    partial = torch.empty(8, 64, device="cuda")
    torch.library.opcheck(bwd.overload, (torch.randn_like(x), x, torch.randn(64, device="cuda"), 1e-6, partial),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
def test_dweight_pass_sums_partials_in_a_fixed_order(impl):
    """The second backward kernel: column sums of the partial rows cast to the weight's dtype. Row counts
    above one Triton tile (64) and one CUDA warp's share, columns that are not a multiple of 32, float64."""
    from opsmith.torchlib.registration import registered_ops

    rmsnorm_ops(impl)
    op = registered_ops()[f"opsmith::rmsnorm_{impl}_dweight"]
    for prows, n, dt in ((264, 4096, torch.bfloat16), (7, 33, torch.float16), (130, 100, torch.float32),
                         (65, 65, torch.float64), (1, 1, torch.bfloat16)):  # fmt: skip
        acc = torch.float64 if dt == torch.float64 else torch.float32
        partial = torch.randn(prows, n, device="cuda", dtype=acc)
        dw = torch.full((n,), float("nan"), device="cuda", dtype=dt)
        op(partial, dw)
        want = partial.double().sum(0)
        # one rounding to dt (relative 2^-8 bf16, 2^-11 fp16) on top of float32 summation
        atol, rtol = {torch.bfloat16: (1e-3, 8e-3), torch.float16: (1e-3, 1e-3), torch.float32: (1e-4, 1e-5),
                      torch.float64: (1e-9, 1e-12)}[dt]  # fmt: skip
        torch.testing.assert_close(dw.double(), want, atol=atol, rtol=rtol)
        again = torch.empty_like(dw)
        op(partial, again)
        assert torch.equal(again, dw)  # deterministic: the same bits on every run
    torch.library.opcheck(op.overload, (torch.randn(9, 40, device="cuda"), torch.empty(40, device="cuda")),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))  # fmt: skip


class _Block(torch.nn.Module):
    """A small Llama-style block: pre-norm attention-free MLP with two RMSNorms."""

    def __init__(self, d: int, impl: str) -> None:
        super().__init__()
        self.norm1, self.norm2 = LlamaRMSNorm(d, impl=impl), RMSNorm(d, eps=1e-6, impl=impl)
        self.up, self.gate, self.down = torch.nn.Linear(d, 2 * d), torch.nn.Linear(d, 2 * d), torch.nn.Linear(2 * d, d)

    def forward(self, x):
        h = x + self.down(F.silu(self.gate(self.norm1(x))) * self.up(self.norm1(x)))
        return self.norm2(h)


@pytest.mark.parametrize("impl", IMPLS)
def test_llama_block_compiles_fullgraph_with_zero_graph_breaks(impl):
    torch.manual_seed(3)
    block = _Block(256, impl).cuda()
    ref = _Block(256, "torch").cuda()
    ref.load_state_dict(block.state_dict())
    x = torch.randn(4, 16, 256, device="cuda", requires_grad=True)
    explain = torch._dynamo.explain(block)(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1, explain.break_reasons
    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    y = compiled(x)
    y_ref = ref(x)
    torch.testing.assert_close(y, y_ref, atol=1e-4, rtol=1e-4)
    (g,) = torch.autograd.grad(y.square().sum(), (x,))
    (g_ref,) = torch.autograd.grad(y_ref.square().sum(), (x,))
    torch.testing.assert_close(g, g_ref, atol=1e-3, rtol=1e-3)
    grads = torch.autograd.grad(compiled(x).sum(), list(block.parameters()))
    ref_grads = torch.autograd.grad(ref(x).sum(), list(ref.parameters()))
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-3, rtol=1e-3)
    # A second shape reuses the dynamic graph.
    y2 = compiled(torch.randn(2, 7, 256, device="cuda"))
    assert y2.shape == (2, 7, 256)


@pytest.mark.parametrize("impl", IMPLS)
def test_bf16_module_with_fp32_weight(impl):
    """Under mixed precision the weight stays fp32 and the activations are bf16: the weight is cast."""
    norm = RMSNorm(512, impl=impl).cuda()
    x = torch.randn(8, 512, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = norm(x)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert norm.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), reference_rms_norm(x.float(), norm.weight, torch.finfo(torch.bfloat16).eps),
                               atol=3e-2, rtol=2e-2)  # fmt: skip


def test_missing_backward_raises_and_double_backward_is_refused():
    relu = ok.cuda_kernel_op("t_gpurms::relu", ok.KernelSpec(
        kernel_source='extern "C" __global__ void r(const float* x, int n, float* y) {'
                      ' int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = fmaxf(x[i], 0.f); }',
        kernel_name="r", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    x = torch.randn(64, device="cuda", requires_grad=True)
    with warnings.catch_warnings():  # whatever the filters: the refusal is an exception, not a warning
        warnings.simplefilter("ignore")
        with pytest.raises(ok.DifferentiationError, match="t_gpurms::relu: a gradient reached it"):
            (relu(x).sum() + x.sum()).backward()
    assert x.grad is None
    with torch.no_grad():
        assert relu(x).shape == x.shape  # no graph, no error
    for impl in ["triton", "cuda"] + (["cute"] if importlib.util.find_spec("cutlass") else []):
        x = torch.randn(4, 32, device="cuda", dtype=torch.float64, requires_grad=True)
        w = torch.randn(32, device="cuda", dtype=torch.float64)
        with pytest.raises(ok.DifferentiationError, match="double backward"):
            torch.autograd.grad(rms_norm(x, w, 1e-6, impl).sum(), (x,), create_graph=True)


@pytest.mark.parametrize("impl", IMPLS)
def test_misshaped_weight_and_wrong_dtype_are_refused(impl):
    fwd, _ = rmsnorm_ops(impl)
    x = torch.randn(4, 64, device="cuda")
    with pytest.raises(
        ok.InputError, match=r"argument 'weight': expected shape \(C,\) where C = 64 from 'x', got shape \(32,\)"
    ):
        fwd(x, torch.randn(32, device="cuda"), 1e-6)
    if impl in ("cuda", "cute"):  # the C++ and CuTe DSL kernels take one element type for x and weight
        with pytest.raises(ok.CompileError, match="weight must have the dtype of x"):
            fwd(x, torch.randn(64, device="cuda", dtype=torch.float16), 1e-6)
    else:  # Triton specializes on each pointer's type and promotes
        y = fwd(x, torch.randn(64, device="cuda", dtype=torch.float16), 1e-6)
        assert y.dtype == torch.float32


@pytest.mark.parametrize("impl", IMPLS)
def test_more_than_2_31_elements(impl):
    """524,291 x 4,096 bf16 (just over 2^31 elements; 8 x 131,072 tokens of long-context training is this
    size): forward and backward run (the kernels index rows with 64 bits) and match the reference on rows on
    both sides of element 2^31 and at the ends; dweight (a sum over all rows) against a chunked fp32 sum."""
    rows, n = 524_291, 4096
    assert rows * n > 2**31
    torch.manual_seed(0)
    x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
    w = (1 + 0.25 * torch.randn(n, device="cuda")).to(torch.bfloat16).requires_grad_()
    xg = x.requires_grad_()
    y = rms_norm(xg, w, 1e-6, impl)
    dy = torch.randn_like(x)
    y.backward(dy)
    edge = 2**31 // n  # the row holding element 2^31
    pick = torch.tensor([0, 1, edge - 2, edge - 1, edge, edge + 1, rows - 2, rows - 1], device="cuda")
    xs, dys = x.detach()[pick].float(), dy[pick].float()
    ws = w.detach().float().requires_grad_()
    xr = xs.clone().requires_grad_()
    ref = reference_rms_norm(xr, ws, 1e-6)
    ref.backward(dys)
    atol, rtol = TOL[torch.bfloat16]
    torch.testing.assert_close(y.detach()[pick].float(), ref.detach(), atol=atol, rtol=rtol)
    torch.testing.assert_close(xg.grad[pick].float(), xr.grad, atol=atol, rtol=rtol)
    dw = torch.zeros(n, device="cuda")
    for start in range(0, rows, 65536):  # dweight = sum over rows of dy * x * rstd, in fp32 chunks
        xc = x.detach()[start : start + 65536].float()
        rstd = torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + 1e-6)
        dw += (dy[start : start + 65536].float() * xc * rstd).sum(0)
    scale = rows**0.5
    torch.testing.assert_close(w.grad.float(), dw, atol=atol * scale, rtol=rtol * scale)


def test_every_cuda_backward_config_matches_the_reference(monkeypatch):
    """Each backward config, the shared-memory staged and the cluster ones included, forced in turn against the
    reference: rows that fit the stage (16,384 bf16), rows that do not (65,536: clusters, else the streaming
    fallback), more rows than persistent clusters (each cluster loops, its stages and mbarrier phases
    alternate), fewer rows than clusters, ragged cluster slices (20,000), rows past what a cluster stages
    (131,072 bf16 for most configs, 65,536 float32), odd row lengths (no vector path) and float32."""
    monkeypatch.setenv("OPSMITH_AUTOTUNE", "0")
    monkeypatch.setenv("OPSMITH_DISABLE_DISK_CACHE", "1")  # no decision read from an earlier test's tuning
    _, bwd = rmsnorm_ops("cuda")
    tuner = bwd.tuner
    saved = tuner.default
    torch.manual_seed(0)
    try:
        for c in range(len(bwd.record.configs)):
            tuner.default = c
            tuner.decisions.clear()
            for shape, dt in (((64, 16384), torch.bfloat16), ((16, 4096), torch.float32), ((8, 5000), torch.bfloat16),
                              ((4, 65536), torch.bfloat16), ((300, 1024), torch.float16), ((100, 65536), torch.bfloat16),
                              ((9, 20000), torch.bfloat16), ((3, 131072), torch.bfloat16), ((2, 65536), torch.float32),
                              ((5, 65537), torch.bfloat16), ((1, 40000), torch.float16)):  # fmt: skip
                x = torch.randn(shape, device="cuda").to(dt)
                w = (1 + 0.25 * torch.randn(shape[-1], device="cuda")).to(dt)
                _compare("cuda", x, w, torch.randn_like(x))
    finally:
        tuner.default = saved
        tuner.decisions.clear()


def test_every_cute_config_matches_the_reference(monkeypatch):
    """Each CuTe DSL forward and backward config forced in turn: rows in one CTA (1,024 fp16, 4,096 fp32),
    split over clusters of 2 (16,384), 3 (20,000: ragged slices) and 8 (65,536 and 131,072 bf16; 131,072
    float32 takes the backward's single-stage path), an odd row (no vectors) and more rows than persistent
    clusters (each cluster loops, its stages and mbarrier phases alternate)."""
    pytest.importorskip("cutlass", reason="CuTe DSL not importable: pip install 'opsmith[cute]'")
    monkeypatch.setenv("OPSMITH_AUTOTUNE", "0")
    monkeypatch.setenv("OPSMITH_DISABLE_DISK_CACHE", "1")
    fwd, bwd = rmsnorm_ops("cute")
    saved = fwd.tuner.default, bwd.tuner.default
    torch.manual_seed(0)
    try:
        for c in range(max(len(fwd.record.configs), len(bwd.record.configs))):
            for op in (fwd, bwd):
                op.tuner.default = c % len(op.record.configs)
                op.tuner.decisions.clear()
            for shape, dt in (((300, 1024), torch.float16), ((16, 4096), torch.float32), ((8, 5001), torch.bfloat16),
                              ((600, 16384), torch.bfloat16), ((8, 20000), torch.bfloat16),
                              ((40, 65536), torch.bfloat16), ((3, 131072), torch.bfloat16),
                              ((2, 131072), torch.float32)):  # fmt: skip
                x = torch.randn(shape, device="cuda").to(dt)
                w = (1 + 0.25 * torch.randn(shape[-1], device="cuda")).to(dt)
                _compare("cute", x, w, torch.randn_like(x))
    finally:
        for op, d in zip((fwd, bwd), saved, strict=True):
            op.tuner.default = d
            op.tuner.decisions.clear()
