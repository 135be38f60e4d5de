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
from round_four_ops import (  # noqa: E402
    cuda_ops,
    cuda_optional_classifier,
    glu_reference,
    jsd_reference,
    optional_classifier,
    triton_ops,
)

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


def _classifier_want(logits, targets, dloss):
    p = logits.float().softmax(-1)
    return (torch.nn.functional.cross_entropy(logits, targets, reduction="none"), p,
            (p - torch.nn.functional.one_hot(targets, logits.shape[-1])) * dloss)  # fmt: skip


@pytest.mark.parametrize("flavor", ["triton", "cuda"])
def test_optional_outputs_are_written_only_where_asked_for(flavor, tmp_path, monkeypatch):
    """Item 5: dlogits and probs declared as optional outputs, on the native library serving the op, the Python
    path (``op.eager``) and torch.compile(fullgraph=True, inductor): every combination against PyTorch, None where
    left out (asked for by name; the two ops list the outputs in different orders)."""
    from opsmith import native

    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OPSMITH_NATIVE", "auto")  # served by its native library (the tests' default is off)
    op = optional_classifier(f"{NS}_{flavor}") if flavor == "triton" else cuda_optional_classifier(f"{NS}_{flavor}")
    names = [o.name for o in op.record.outputs]
    logits, targets = _cuda(23, 1000), torch.randint(0, 1000, (23,), device="cuda")
    want = dict(zip(("losses", "probs", "dlogits"), _classifier_want(logits, targets, 0.5), strict=True))
    op(logits, targets, 0.5, return_probs=True, return_dlogits=True)  # compiles what the library will hold
    assert native.wait(900) and op.serving == "native", (op.serving, op.serving_why)
    combos = [{"return_probs": p, "return_dlogits": d} for p in (False, True) for d in (False, True)]
    paths = {"native": op, "python": op.eager}
    paths |= {f"compiled {k}": torch.compile(lambda x, t, kw=kw: op(x, t, 0.5, **kw), fullgraph=True)
              for k, kw in enumerate(combos)}  # fmt: skip
    for path, fn in paths.items():
        for k, kw in enumerate(combos):
            if path.startswith("compiled") and path != f"compiled {k}":
                continue
            got = dict(zip(names, fn(logits, targets) if path.startswith("compiled") else fn(logits, targets, 0.5, **kw),
                           strict=True))  # fmt: skip
            torch.testing.assert_close(got["losses"], want["losses"])
            for name in ("probs", "dlogits"):
                assert (got[name] is None) == (not kw[f"return_{name}"]), (path, kw, name)
                if got[name] is not None:
                    torch.testing.assert_close(got[name], want[name], atol=1e-5, rtol=1e-5)
    assert op.serving_counts().native > 0


def test_opsmith_check_passes_with_optional_outputs_on_the_gpu():
    """Every row of opsmith check, CUDA graphs and streams included, on the Triton classifier with both forms."""
    op = optional_classifier(f"{NS}_check", backward=True)

    def ref(logits, targets, dloss, return_probs=False, return_dlogits=False):
        loss, p, d = _classifier_want(logits, targets, dloss)
        return loss, p if return_probs else None, d if return_dlogits else None

    case = ok.CheckCase(op, inputs=lambda s, dt, dev: (torch.randn(s, dtype=dt, device=dev),
                                                      torch.randint(0, s[-1], s[:-1], device=dev), 0.5),
                        reference=ref, shapes=[(4, 33), (64, 1000)], dtypes=[torch.float32])  # fmt: skip
    report = ok.check(case, examples=5)
    print(report.table())
    assert report.ok, report.table()
    passed = {r for r, res, _ in report.rows if res == "pass"}
    assert {"opcheck", "numerics", "compile-static", "export", "cuda-graph", "stream", "autograd"} <= passed, (
        report.table()
    )
