"""Published row kernels, round two, on the GPU (issue 40, items 3, 4 and 7): Liger-Kernel's own RMSNorm
forward kernel (from its package) and kernels in Liger's and unsloth's style take ``(B, T, H)`` activations,
row-sliced and transposed too, eagerly against PyTorch and bit for bit against Liger's own launch, under
``torch.compile(fullgraph=True)``, ``torch.export`` and ``opsmith check``; unsloth's GEMMA heuristic; an llm.c-style
CUDA kernel (outputs first) bound by the param_order its registration error proposes."""

import ast
import os
import re

import pytest
import torch

import opsmith as ok

pytestmark = pytest.mark.gpu
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from examples.catalog.rows import (  # noqa: E402
    layer_norm_reference,
    liger_rms_norm,
    register_rows,
    rms_backward_reference,
    rms_reference,
)

NS = "t_gpu_rows"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    os.environ["OPSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return register_rows(NS)


def _activations(h: int, dtype=torch.bfloat16) -> list[torch.Tensor]:
    return [torch.randn(2, 64, h, device="cuda", dtype=dtype),
            torch.randn(2, 64, h + 64, device="cuda", dtype=dtype)[..., :h],  # row stride h + 64: no copy
            torch.randn(64, 2, h, device="cuda", dtype=dtype).transpose(0, 1),  # does not flatten: copied
            torch.randn(3, 2, 5, h, device="cuda", dtype=dtype)]  # fmt: skip


@pytest.mark.parametrize("gemma", [False, True])
def test_row_kernels_take_any_rank_eagerly(ops, gemma):
    tag = "_gemma" if gemma else ""
    for x in _activations(1000, torch.float32):
        w, dy = torch.randn(1000, device="cuda"), torch.randn(x.shape, device="cuda")
        y, rstd = ops[f"forward{tag}"](x, w, 1e-6)
        want_y, want_rstd = rms_reference(x, w, 1e-6, gemma)
        torch.testing.assert_close(y, want_y, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(rstd, want_rstd, atol=1e-4, rtol=1e-4)
        dx = ops[f"backward{tag}"](dy, x, w, rstd)
        torch.testing.assert_close(dx, rms_backward_reference(dy, x, w, rstd, gemma), atol=1e-4, rtol=1e-4)


def test_row_kernels_compile_fullgraph_and_export(ops):
    fwd = ops["forward"]

    def f(x, w):
        y, rstd = fwd(x, w, 1e-6)
        return y * 2, rstd

    x, w = torch.randn(2, 64, 1000, device="cuda"), torch.randn(1000, device="cuda")
    compiled = torch.compile(f, fullgraph=True)
    for xx in (x, torch.randn(3, 7, 1000, device="cuda")):
        torch.testing.assert_close(compiled(xx, w), f(xx, w))

    class M(torch.nn.Module):
        def forward(self, x, w):
            return f(x, w)

    ep = torch.export.export(M(), (x, w))
    torch.testing.assert_close(ep.module()(x, w), f(x, w))


def test_row_kernel_passes_check(ops):
    case = ok.CheckCase(ops["forward"], inputs=lambda s, dt, dev: (torch.randn(s, dtype=dt, device=dev),
                                                                   torch.randn(s[-1], dtype=dt, device=dev), 1e-6),
                        reference=lambda x, w, eps: rms_reference(x, w, eps), shapes=((4, 256), (2, 3, 1000)),
                        tol=1e-4)  # fmt: skip
    report = ok.check(case, examples=4)
    print(report.table())
    assert report.ok, report.table()


def test_ligers_own_kernel_takes_b_t_h_and_matches_its_launch_bit_for_bit():
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
    from liger_kernel.ops.rms_norm import rms_norm_forward

    op = liger_rms_norm(NS)
    for x in _activations(1024):  # BLOCK_SIZE 1024: Liger launches 4 warps, as the declaration does
        w = (1 + 0.1 * torch.randn(1024, device="cuda")).to(torch.bfloat16)
        y, rstd = op(x, w, 1e-6, 0.0)
        want = rms_norm_forward(x.contiguous(), w, 1e-6, 0.0, "llama", True)
        assert torch.equal(y, want[0].view(x.shape)) and torch.equal(rstd, want[2].view(x.shape[:-1]))
    x, w = (
        torch.randn(3, 5, 4096, device="cuda", dtype=torch.bfloat16),
        torch.randn(4096, device="cuda", dtype=torch.bfloat16),
    )
    torch.testing.assert_close(op(x, w, 1e-6, 0.0)[0], rms_reference(x, w, 1e-6)[0], atol=3e-2, rtol=3e-2)
    compiled = torch.compile(lambda x, w: op(x, w, 1e-6, 0.0)[0], fullgraph=True)
    torch.testing.assert_close(compiled(x, w), op(x, w, 1e-6, 0.0)[0])


LLMC = r"""
// llm.c's style: outputs first, then inputs, then sizes
extern "C" __global__ void residual_forward_kernel(float* out, const float* inp1, const float* inp2, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = inp1[i] + inp2[i];
}
"""


def test_an_llmc_style_kernel_binds_by_the_param_order_its_error_proposes():
    def spec(**kw):
        return ok.KernelSpec(kernel_source=LLMC, kernel_name="residual_forward_kernel",
                             inputs=[ok.InputDecl("a"), ok.InputDecl("b")], outputs=[ok.OutputDecl("c", ok.SameAs("a"))],
                             extras=[ok.Numel("a", name="count")], geometry=ok.Elementwise(), **kw)  # fmt: skip

    with pytest.raises(ok.SpecError) as e:
        ok.cuda_kernel_op(f"{NS}::residual_unbound", spec())
    proposed = re.search(r"here: param_order=(\[[^\]]*\])", str(e.value)).group(1)
    assert proposed == "['c', 'a', 'b', 'count']", str(e.value)
    op = ok.cuda_kernel_op(f"{NS}::residual", spec(param_order=ast.literal_eval(proposed)))
    a, b = torch.randn(3, 1000, device="cuda"), torch.randn(3, 1000, device="cuda")
    torch.testing.assert_close(op(a, b), a + b)
    torch.testing.assert_close(torch.compile(lambda a, b: op(a, b) * 2, fullgraph=True)(a, b), (a + b) * 2)


def test_layer_norm_whose_heuristics_choose_block_and_warps(ops):
    """The layer-norm tutorial's host choices as heuristics (BLOCK_SIZE capped at 8,192, num_warps from it):
    eagerly against F.layer_norm at rows that fit the block and rows that loop, and compiled."""
    op = ops["layer_norm"]
    for n in (300, 1000, 4096, 10000, 20000):
        x = torch.randn(3, 17, n, device="cuda", dtype=torch.bfloat16)
        w, b = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.randn(n, device="cuda", dtype=torch.bfloat16)
        y, mean, rstd = op(x, w, b, 1e-5)
        want = layer_norm_reference(x, w, b, 1e-5)
        torch.testing.assert_close(y, want[0], atol=3e-2, rtol=3e-2)
        torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5), atol=3e-2, rtol=3e-2)
        torch.testing.assert_close((mean, rstd), want[1:], atol=1e-3, rtol=1e-3)
        compiled = torch.compile(lambda x, w, b: op(x, w, b, 1e-5)[0], fullgraph=True)
        torch.testing.assert_close(compiled(x, w, b), y)


def test_a_constexpr_set_per_call_eagerly_and_compiled(ops):
    """Issue 40, item 2: label_smoothing a tl.constexpr the call sets; each value its own kernel."""
    op = ops["smooth"]
    x = torch.softmax(torch.randn(64, 1000, device="cuda"), -1)
    compiled = torch.compile(lambda x, ls: op(x, ls), fullgraph=True)
    for ls in (0.0, 0.1, 0.2):
        want = x * (1 - ls) + ls / 1000 if ls else x
        torch.testing.assert_close(op(x, ls), want)
        torch.testing.assert_close(compiled(x, ls), want)


def test_an_int_template_argument_set_per_call():
    """CUDA C++: an int (and a bool) ScalarInput named like ``{SCALE}`` is the template argument, one kernel per value,
    eagerly, compiled, and from the op's native library (opsmith.native.use)."""
    from opsmith import native

    src = ("template <int SCALE> __global__ void scale_by(const float* x, float* y, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] * SCALE; }")  # fmt: skip
    op = ok.cuda_kernel_op(f"{NS}::scale_by", ok.KernelSpec(
        kernel_source=src, kernel_name="scale_by<{SCALE}>", inputs=[ok.InputDecl("x"), ok.ScalarInput("SCALE", int)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise()),
        native=False)  # fmt: skip
    x = torch.randn(10_000, device="cuda")
    compiled = torch.compile(lambda x, s: op(x, s), fullgraph=True)
    for s in (2, 3, -1):
        torch.testing.assert_close(op(x, s), x * s)
        torch.testing.assert_close(compiled(x, s), x * s)
    report = native.use([op])
    assert report.ops and all(torch.equal(op(x, s), x * s) for s in (2, 3, -1))
    neg = ("template <bool NEG> __global__ void maybe_neg(const float* x, float* y, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = NEG ? -x[i] : x[i]; }")  # fmt: skip
    op = ok.cuda_kernel_op(f"{NS}::maybe_neg", ok.KernelSpec(
        kernel_source=neg, kernel_name="maybe_neg<{NEG}>", inputs=[ok.InputDecl("x"), ok.ScalarInput("NEG", bool)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise()))  # fmt: skip
    assert torch.equal(op(x, True), -x) and torch.equal(op(x, False), x)


def test_a_heuristic_over_a_scalar_eagerly_and_compiled(ops):
    """Issue 40, item 4: WRAP = shift % n_cols != 0 over the int scalar shift, eagerly and under torch.compile."""
    op = ops["roll"]
    x = torch.randn(64, 1000, device="cuda")
    compiled = torch.compile(lambda x, s: op(x, s), fullgraph=True)
    for s in (0, 3, 1000, -7, 2500):
        want = torch.roll(x, s, -1)
        assert torch.equal(op(x, s), want) and torch.equal(compiled(x, s), want)
