"""benchmarks/step_profile.py, the Llama benchmarks' step profile: where the GPU sat idle (from kernel spans), and
the tensors Inductor could not reinplace (from its log, in torch 2.11's wording and in the installed torch's); and
bench_llama.py's report of them."""

from __future__ import annotations

import logging

import pytest
import torch

from benchmarks.step_profile import MIN_GAP_US, idle_gaps, watch_reinplacing


def test_idle_time_is_charged_to_the_kernels_it_lies_between():
    # two steps of: gemm, 30 us idle, a Liger kernel, 2 us (a launch, not a wait), an optimizer kernel overlapping a
    # collective on its own stream, then 100 us idle before the next step's gemm
    spans = []
    for step in range(2):
        t = step * 1000.0
        spans += [(t, t + 400, "nvjet_sm90_tst_256x128"), (t + 430, t + 500, "_rms_norm_backward_kernel"),
                  (t + 502, t + 600, "multi_tensor_apply_kernel"), (t + 450, t + 880, "ncclDevKernel_AllGather")]  # fmt: skip
    g = idle_gaps(spans, steps=2)
    # per step: a 30 us wait (gemm -> liger), a 2 us launch gap, and between the steps a 400 us wait (the optimizer
    # ended at 600, the next gemm starts at 1000); the collective (until 880) is not compute
    assert MIN_GAP_US > 2
    assert g["wait_ms"] == pytest.approx((30 + 400 / 2) / 1e3)
    assert g["launch_ms"] == pytest.approx(2 * 2 / 2 / 1e3)
    assert g["idle_ms"] == pytest.approx(g["wait_ms"] + g["launch_ms"])
    assert g["span_ms"] == pytest.approx(1600 / 2 / 1e3)
    assert g["launches"] == 3
    assert g["by_group"][0] == ["optimizer -> gemm", pytest.approx(0.2), 0.5]
    assert g["by_group"][1] == ["gemm -> liger", pytest.approx(0.03), 1]
    assert [k for k, _, _ in g["by_name"]] == ["multi_tensor_apply_kernel -> nvjet_sm90_tst_256x128",
                                               "nvjet_sm90_tst_256x128 -> _rms_norm_backward_kernel"]  # fmt: skip


def test_a_kernel_inside_a_longer_one_does_not_open_a_gap():
    spans = [(0.0, 100.0, "a_kernel"), (10.0, 20.0, "b_kernel"), (150.0, 160.0, "c_kernel")]
    g = idle_gaps(spans, steps=1)
    assert g["wait_ms"] == pytest.approx(0.05)
    assert g["by_name"][0][0] == "a_kernel -> c_kernel"  # after the longer kernel's end, not the inner one's


# torch 2.11's wording of a node's reinplacing (torch/_inductor/fx_passes/reinplace.py, log_inplace_results)
OLD_LOG = ("For node %s, attempted to reinplace %s. We were unable to reinplace %s; %s (if non-empty) are possible "
           "missed reinplacing opportunities that may be bad for memory usage and performance. Total size of missed "
           "opportunities with static shapes is : %s bytes.")  # fmt: skip
NEW_LOG = ("Reinplace for %s (wrapped by %s): candidates=%s, successfully reinplaced=%s, remain clones=%s, missed "
           "opportunities=%s, missed static bytes=%s.")  # fmt: skip


def test_missed_reinplacing_is_read_from_either_wording():
    found = watch_reinplacing()
    log = logging.getLogger("torch._inductor.fx_passes.reinplace")
    log.info(OLD_LOG, "auto_functionalized_v2_3", ["grad_w"], ["grad_w"], ["grad_w"], 131072000)
    log.info(OLD_LOG, "triton_kernel_wrapper_functional_proxy_7", ["a_ptr", "b_ptr"], [], [], 0)
    log.info(NEW_LOG, "rec::mm_into", "auto_functionalized_v2_9", range(2), [0], [1], ["out", "b"], 64)
    assert found["logged"] == 3
    assert found["tensors"] == 3
    assert found["bytes"] == 131072000 + 64
    assert found["nodes"] == {"auto_functionalized_v2_3": {"args": ["grad_w"], "bytes": 131072000},
                              "rec::mm_into": {"args": ["out", "b"], "bytes": 64}}  # fmt: skip


def test_the_installed_torch_logs_what_the_watch_reads():
    """A real compile: Inductor reports on the op's write (reinplaced, so nothing is missed) in a wording the watch
    reads; a torch that rewords its log fails here instead of reporting 0 missed tensors."""

    @torch.library.custom_op("step_profile_cpu::bump", mutates_args=("x",))
    def bump(x: torch.Tensor) -> None:
        x.add_(1)

    @bump.register_fake
    def _(x: torch.Tensor) -> None:
        return None

    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        bump(y)
        return y

    found = watch_reinplacing()
    x = torch.randn(8)
    torch._dynamo.reset()
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            got = torch.compile(f)(x)
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(got, x.sin() + 1)
    assert found["logged"] == 1
    assert found["tensors"] == 0


def _result(variant, tokens, kernels, wait, groups, not_reinplaced=0, logged=True):
    step = 8192 / tokens * 1e3
    gaps = {"span_ms": kernels + 2.0, "idle_ms": 2.0, "launch_ms": 1.9, "wait_ms": 0.1, "launches": 1200.0,
            "by_group": [["liger -> copy", 0.08, 0.7]], "by_name": [["_triton_rope -> Memset (Device)", 0.05, 0.3]]}  # fmt: skip
    r = {"variant": variant, "tokens_per_s": tokens, "peak_gib": 12.5, "losses": [10.0, 9.9], "step_ms": [step, step],
         "profile": {"groups": groups, "kernels_ms": kernels, "host_wait_ms": wait, "copies": 300.0,
                     "copy_kernels": [], "gaps": gaps}}  # fmt: skip
    if variant.endswith("-compile"):
        r["explain"] = {"graphs": 1, "breaks": 0, "reasons": []}
        r["not_reinplaced"] = not_reinplaced if logged else None
        r["not_reinplaced_ops"] = {"ce_kernel": {"args": ["loss_ptr"] * not_reinplaced, "bytes": 2048 * not_reinplaced}}
    return r


def test_the_llama_report_splits_the_compiled_gap_and_marks_an_unseen_reinplacing_count(capsys):
    """bench_llama.py's report on given results: the opsmith compiled step's difference from Hugging Face
    compiled's by kernel group, the idle split, and "?" (never 0) where Inductor logged no reinplacing decision."""
    from benchmarks.bench_llama import config, report

    results = [
        _result("hf", 60000.0, 130.0, 4.0, {"gemm": 50.0, "aten other": 80.0}),
        _result("hf-compile", 87000.0, 90.0, 3.0, {"gemm": 52.0, "inductor": 11.0, "aten other": 27.0}),
        _result(
            "opsmith-compile",
            85000.0,
            92.0,
            3.0,
            {"gemm": 53.5, "inductor": 3.5, "liger": 8.5, "aten other": 26.5},
            not_reinplaced=15,
        ),
        _result(
            "opsmith-auto-compile", 86000.0, 92.0, 2.5, {"gemm": 53.5, "liger": 8.5, "aten other": 30.0}, logged=False
        ),
    ]
    report(results, config(small=False), 20, "test device")
    out = capsys.readouterr().out
    gap = next(line for line in out.splitlines() if line.strip().startswith("opsmith-compile - hf-compile"))
    assert "gemm +1.50" in gap and "liger +8.50" in gap and "inductor -7.50" in gap
    assert "launch gaps (<4 us)" in out and "waits (>=4 us)" in out
    assert "not reinplaced at ce_kernel: 15 (0.0 MiB)" in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("SUMMARY") and "opsmith-compile 15" in summary and "opsmith-auto-compile ?" in summary
