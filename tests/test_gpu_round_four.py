"""Issue 60's forms on the GPU, compiled for real (tests/test_round_four_cpu.py checks them on CPU): the standard
headers NVRTC lacks and llm.c's style of fused classifier; a Present flag a heuristic also sets; an absent label as
a dummy pointer (Triton, CUDA C++, and Liger-Kernel's JSD from its package); size expressions in input shapes;
a block that must be a power of two; floats-only Triton inputs. Against PyTorch, outputs poisoned where the op
lets a caller pass them; eager (the default native path), then torch.compile(fullgraph=True)."""

import os
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
pytest.importorskip("triton", reason="the round-four kernels are Triton's and CUDA C++'s")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from round_four_ops import cuda_ops, glu_reference, jsd_reference, triton_ops  # noqa: E402

NS = "t_gpu_r4"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    os.environ["OPSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return {**triton_ops(NS), **cuda_ops(NS)}


def _cuda(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def test_the_standard_headers_and_llm_c_style_classifier_compute_what_torch_does(ops):
    x = _cuda(1000)
    x[3] = float("nan")
    y = ops["every_header"](x)
    # fmax(NaN, -FLT_MAX) is -FLT_MAX (fmax takes the number), which std::isnan then passes through
    torch.testing.assert_close(y, torch.nan_to_num(x, nan=-torch.finfo(torch.float32).max))
    logits, targets = _cuda(37, 1000), torch.randint(0, 1000, (37,), device="cuda")
    losses, dlogits, probs = ops["fused_classifier"](logits, targets, 0.5)
    torch.testing.assert_close(losses, torch.nn.functional.cross_entropy(logits, targets, reduction="none"))
    p = logits.softmax(-1)
    torch.testing.assert_close(probs, p)
    torch.testing.assert_close(dlogits, (p - torch.nn.functional.one_hot(targets, 1000)) * 0.5)


def test_llm_c_style_optional_buffers_are_written_only_where_given(ops):
    """The classifier's extra outputs as optional in-place buffers (today's form; issue 60, item 5 declares them as
    outputs): a NULL pointer where the caller passes None, the buffer written where it passes one."""
    logits, targets = _cuda(19, 777), torch.randint(0, 777, (19,), device="cuda")
    p = logits.softmax(-1)
    want_d = (p - torch.nn.functional.one_hot(targets, 777)) * 2.0
    want_loss = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    for with_d in (False, True):
        for with_p in (False, True):
            d = torch.full_like(logits, float("nan")) if with_d else None
            pr = torch.full_like(logits, float("nan")) if with_p else None
            torch.testing.assert_close(ops["fused_classifier_buffers"](logits, targets, d, pr, 2.0), want_loss)
            if with_d:
                torch.testing.assert_close(d, want_d)
            if with_p:
                torch.testing.assert_close(pr, p)


@pytest.mark.parametrize("name", ["add_readback", "add_derived"])
def test_a_present_flag_beside_a_heuristic(ops, name):
    x, b = _cuda(1000), _cuda(1000)
    for run in (ops[name], torch.compile(ops[name], fullgraph=True)):
        torch.testing.assert_close(run(x, b), x + b)
        torch.testing.assert_close(run(x, None), x)


def test_an_absent_label_is_a_dummy_pointer_triton_cuda_cpp_and_liger(ops):
    label = torch.randint(0, 2, (64,), device="cuda")
    scale = torch.where(label == 1, 2.0, 1.0)[:, None]
    x = _cuda(64, 300)
    for name in ("shifted_rows", "rows_cpp"):
        torch.testing.assert_close(ops[name](x, label), x * scale)
        torch.testing.assert_close(ops[name](x, None), x)
    torch.testing.assert_close(torch.compile(ops["shifted_rows"], fullgraph=True)(x, None), x)
    if "liger_jsd" not in ops:
        pytest.skip("liger-kernel is not installed: Liger's JSD not run")
    X, Y = _cuda(16, 4000).log_softmax(-1), _cuda(16, 4000).log_softmax(-1)
    label = torch.randint(0, 4000, (16,), device="cuda")
    label[::3] = -100
    for lab, n in ((label, int((label != -100).sum())), (None, 16)):
        loss, dX = ops["liger_jsd"](X, Y, lab, n)
        want_loss, want_dx = jsd_reference(X, Y, lab, n)
        torch.testing.assert_close(loss, want_loss, atol=1e-6, rtol=1e-4)
        torch.testing.assert_close(dX, want_dx, atol=1e-6, rtol=1e-4)


def test_size_expressions_in_input_shapes(ops):
    x = _cuda(33, 2 * 500)
    for name in ("glu", "glu_rows"):
        y = ops[name](x if name == "glu" else x[:, :128].contiguous())
        src = x if name == "glu" else x[:, :128]
        torch.testing.assert_close(y, glu_reference(src), atol=1e-5, rtol=1e-5)
    with pytest.raises(ok.InputError, match=r"expected shape \(M, 2 \* N\) where N = 3 from 'x', got shape \(4, 7\)"):
        ops["glu"](_cuda(4, 7))
    torch.testing.assert_close(torch.compile(ops["glu"], fullgraph=True)(x), glu_reference(x), atol=1e-5, rtol=1e-5)
    x3, w = _cuda(2, 3, 8), _cuda(6, 8)
    torch.testing.assert_close(ops["add_flat"](x3, w), x3 + w.view(2, 3, 8))


def test_a_block_that_is_not_a_power_of_two_names_the_fix_and_floats_only(ops):
    x = _cuda(3, 40)
    with pytest.raises(
        ok.CompileError, match=r"(?s)row_sums_exact: kernel 'row_sums' failed to compile.*bucket='pow2'"
    ):
        ops["row_sums_exact"](x)
    torch.testing.assert_close(ops["row_sums_pow2"](x), x.sum(-1))
    with pytest.raises(ok.InputError, match=r"argument 'x': expected one of the dtypes .*got torch.int32"):
        ops["row_sums_pow2"](torch.ones(3, 40, dtype=torch.int32, device="cuda"))
