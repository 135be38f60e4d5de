"""The conformance harness on CPU ops: a correct op passes, and each kind of broken op fails the check that
should catch it (wrong fake shape, missing guard, wrong gradient, no backward). The GPU twins (opsmith ops,
wrong stream, CUDA graphs) are in test_gpu_check.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok
from opsmith.checking.case import noncontiguous

HERE = str(Path(__file__).parent)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}

NS = "t_check_cpu"
lib = torch.library.Library(NS, "FRAGMENT")
for name in ("good", "bad_fake", "no_guard", "bad_grad", "no_backward", "refuses_grad", "rows_dense", "no_f64"):
    lib.define(f"{name}(Tensor x, float alpha) -> Tensor")


def _scale(x, alpha):
    return x * alpha


def _fake(x, alpha):
    return torch.empty_like(x)


def _storage_as_contiguous(x, alpha):
    """Reads x's memory as if it were contiguous: the bug a missing .contiguous() guard makes."""
    flat = torch.as_strided(x, x.shape, torch.empty(x.shape).stride(), x.storage_offset())
    return flat * alpha


def _ignores_row_stride(x, alpha):
    """A one-input kernel given its row stride that reads rows as dense: the last axis is made contiguous (what
    the declaration asks for), the rows are not, and the kernel steps by the row length instead."""
    return _storage_as_contiguous(x if x.stride(-1) == 1 else x.contiguous(), alpha)


def _refuses_f64(x, alpha):
    """Refuses every float64 call with a clear error (a dtype set declared too narrowly for its case)."""
    if x.dtype == torch.float64:
        raise ok.InputError(f"{NS}::no_f64", "x", "dtype torch.float32", str(x.dtype))
    return x * alpha


for name, impl in (("good", _scale), ("bad_fake", _scale), ("no_guard", _storage_as_contiguous),
                   ("bad_grad", _scale), ("no_backward", _scale), ("refuses_grad", _scale),
                   ("rows_dense", _ignores_row_stride), ("no_f64", _refuses_f64)):  # fmt: skip
    lib.impl(name, impl, "CPU")
    if name == "bad_fake":
        torch.library.register_fake(f"{NS}::{name}", lambda x, alpha: x.new_empty(x.shape[0] + 1, *x.shape[1:]),
                                    lib=lib)  # fmt: skip
    else:
        torch.library.register_fake(f"{NS}::{name}", _fake, lib=lib)


def _setup(ctx, inputs, output):
    ctx.alpha = inputs[1]


def _grad(ctx, g):
    return g * ctx.alpha, None


def _wrong_grad(ctx, g):
    return g * ctx.alpha * 1.5, None


def _refuse(ctx, g):
    raise RuntimeError("refuses_grad is not differentiable")


for name, bw in (("good", _grad), ("bad_fake", _grad), ("no_guard", _grad), ("bad_grad", _wrong_grad),
                 ("refuses_grad", _refuse)):  # fmt: skip
    torch.library.register_autograd(f"{NS}::{name}", bw, setup_context=_setup, lib=lib)


def _case(name: str, **kw) -> ok.CheckCase:
    op = getattr(torch.ops.t_check_cpu, name)
    return ok.CheckCase(op, inputs=lambda shape, dtype, device: (torch.randn(shape, device=device, dtype=dtype), 1.75),
                        reference=lambda x, a: x * a, shapes=[(37,), (5, 19)],
                        dtypes=[torch.float32, torch.float64], **kw)  # fmt: skip


FAST = {"device": "cpu", "compile_backend": "aot_eager", "examples": 10}


def _rows(report):
    return {c: (r, d) for c, r, d in report.rows}


def test_a_correct_op_passes_every_check_that_runs_on_cpu():
    report = ok.assert_check_passes(_case("good"), **FAST)
    rows = _rows(report)
    assert {c for c, (r, _) in rows.items() if r == "pass"} == {
        "opcheck", "numerics", "compile-static", "compile-dynamic", "export", "autograd"}  # fmt: skip
    assert rows["cuda-graph"] == ("skip", "needs a CUDA device") and rows["stream"][0] == "skip"
    assert rows["sharding"] == ("skip", "not an opsmith op: no rule derived from a declaration to check")
    assert "gradcheck float64" in rows["autograd"][1]
    table = report.table()
    assert (
        table.splitlines()[0] == "opsmith check: t_check_cpu::good on cpu" and "6 passed, 0 failed, 3 skipped" in table
    )


def test_a_wrong_fake_shape_is_caught():
    rows = _rows(ok.check(_case("bad_fake"), **FAST))
    assert rows["opcheck"][0] == "FAIL" and "fake" in rows["opcheck"][1].lower()
    assert rows["numerics"][0] == "pass"  # eager is right; only the fake lies


def test_a_missing_contiguity_guard_is_caught_by_the_noncontiguous_samples():
    x = noncontiguous(torch.randn(4, 6))
    assert not x.is_contiguous() and torch.equal(x, x.contiguous())
    rows = _rows(ok.check(_case("no_guard"), **FAST))
    assert rows["numerics"][0] == "FAIL" and "strided" in rows["numerics"][1], rows["numerics"]


def test_a_single_input_whose_row_stride_is_ignored_is_caught_by_the_padded_rows():
    """Rows padded (``x[:, :n]`` of a wider tensor) are probed for an op with one tensor input too: the strided
    copy (last axis at stride 2) is made contiguous first and passes."""
    rows = _rows(ok.check(_case("rows_dense"), **FAST))
    assert rows["numerics"][0] == "FAIL" and "(5, 19) strided" in rows["numerics"][1], rows["numerics"]


def test_refusing_calls_the_case_declares_valid_fails_numerics():
    """The case's own contiguous shapes of every listed dtype are calls the op must take: an op refusing all of
    float64 (with a clear error, so each refusal alone looks like a declared limit) fails, naming the sample."""
    rows = _rows(ok.check(_case("no_f64"), only=["numerics"], **FAST))
    assert rows["numerics"][0] == "FAIL", rows["numerics"]
    assert "torch.float64 sample 0 ((37,), 1.75) is refused" in rows["numerics"][1], rows["numerics"]


def test_a_wrong_gradient_is_caught():
    rows = _rows(ok.check(_case("bad_grad"), **FAST))
    assert rows["autograd"][0] == "FAIL" and "gradient of input 0" in rows["autograd"][1]
    assert rows["numerics"][0] == "pass"


def test_an_op_without_backward_must_refuse_differentiation():
    rows = _rows(ok.check(_case("refuses_grad", differentiable=False), only=["autograd"], **FAST))
    assert rows["autograd"] == ("pass", "not differentiable; differentiating raises RuntimeError: "
                                "refuses_grad is not differentiable")  # fmt: skip


def test_an_op_whose_backward_is_silently_missing_fails():
    """A plain torch.library op with no autograd kernel: PyTorch only warns and the gradient is silently
    wrong. (opsmith ops raise DifferentiationError instead; test_gpu_check.py checks that.)"""
    rows = _rows(ok.check(_case("no_backward"), only=["autograd"], **FAST))
    assert rows["autograd"][0] == "FAIL" and "raised no error" in rows["autograd"][1]


def test_assert_check_passes_raises_with_the_table():
    with pytest.raises(AssertionError, match=r"(?s)opcheck\s+FAIL.*failed"):
        ok.assert_check_passes(_case("bad_fake"), only=["opcheck"], **FAST)


def test_unknown_check_names_are_refused():
    with pytest.raises(ValueError, match=r"unknown checks.*Fix: choose from"):
        ok.check(_case("good"), only=["opchek"], **FAST)


CLI_TARGET = [_case("good"), _case("bad_grad")]


def test_the_cli_prints_one_table_per_case_and_exits_nonzero_on_failure():
    r = subprocess.run([sys.executable, "-m", "opsmith", "check", "test_check_cpu:CLI_TARGET", "--device", "cpu",
                        "--backend", "aot_eager", "--examples", "5", "--only", "autograd,numerics"],
                       capture_output=True, text=True, cwd=HERE, env=ENV, timeout=300)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "opsmith check: t_check_cpu::good on cpu" in r.stdout and "t_check_cpu::bad_grad" in r.stdout
    assert "2 passed, 0 failed, 0 skipped" in r.stdout and "1 passed, 1 failed, 0 skipped" in r.stdout


CLI_FIRST_FAILS = [_case("bad_grad"), _case("good")]


def test_the_cli_fails_when_the_first_case_fails_and_the_last_passes():
    """The exit status is every case's, not the last one's (a failing op followed by a passing one exits 1)."""
    r = subprocess.run([sys.executable, "-m", "opsmith", "check", "test_check_cpu:CLI_FIRST_FAILS", "--device", "cpu",
                        "--backend", "aot_eager", "--examples", "3", "--only", "autograd"],
                       capture_output=True, text=True, cwd=HERE, env=ENV, timeout=300)  # fmt: skip
    assert "0 passed, 1 failed" in r.stdout and "1 passed, 0 failed" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 1


def test_the_cli_explains_a_bad_target():
    r = subprocess.run([sys.executable, "-m", "opsmith", "check", "test_check_cpu:_rows", "--device", "cpu"],
                       capture_output=True, text=True, cwd=HERE, env=ENV, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "CheckCase" in r.stderr


def test_sanitizer_summaries_are_parsed_and_a_missing_tool_is_reported(monkeypatch, tmp_path):
    from opsmith.checking import sanitize as sz

    counts = [int(next(g for g in m[-1] if g)) for m in (sz._SUMMARY.findall(t) for t in (
        "========= ERROR SUMMARY: 3 errors", "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"))]  # fmt: skip
    assert counts == [3, 0]
    monkeypatch.setenv("OPSMITH_COMPUTE_SANITIZER", str(tmp_path / "cs"))
    assert sz.find_compute_sanitizer() == str(tmp_path / "cs")
    monkeypatch.delenv("OPSMITH_COMPUTE_SANITIZER")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setattr(sz.Path, "exists", lambda self: False)
    report = sz.sanitize("planted_oob:CASE", tools=["memcheck"])
    assert not report.ok and report.rows == [("memcheck", None, "compute-sanitizer not found: install the CUDA "
                                              "toolkit or set OPSMITH_COMPUTE_SANITIZER")]  # fmt: skip
    with pytest.raises(ValueError, match="unknown tools"):
        sz.sanitize("planted_oob:CASE", tools=["leakcheck"])


lib.define("wrong_when_traced(Tensor x, float alpha) -> Tensor")
lib.impl("wrong_when_traced", _scale, "CPU")
torch.library.register_fake(f"{NS}::wrong_when_traced", _fake, lib=lib)


def _traced_differently(mode, func, types, args, kwargs):
    """Under functionalization (torch.compile's and torch.export's tracing) the op decomposes into other math:
    eager is right, every traced program is wrong."""
    x, alpha = args
    with mode:
        return x * (alpha + 1.0)


torch.library.register_torch_dispatch(
    f"{NS}::wrong_when_traced",
    __import__("torch._subclasses.functional_tensor", fromlist=["FunctionalTensorMode"]).FunctionalTensorMode,
    _traced_differently,
    lib=lib,
)


def test_compile_and_export_checks_run_the_traced_program_and_can_fail():
    """compile-static and compile-dynamic compare the compiled program with the reference (an op right in
    eager but wrong when traced fails both); export checks the exported program's recorded output shapes
    against the op's (a lying fake fails it). A check that ran nothing would pass."""
    rows = _rows(ok.check(_case("wrong_when_traced"), only=["numerics", "compile-static", "compile-dynamic"], **FAST))
    assert rows["numerics"][0] == "pass", rows
    for c in ("compile-static", "compile-dynamic"):
        assert rows[c][0] == "FAIL" and "Tensor-likes are not close" in rows[c][1], (c, rows[c])
    export = _rows(ok.check(_case("bad_fake"), only=["export"], **FAST))["export"]
    assert export[0] == "FAIL" and "records output 0 with shape (40,)" in export[1], export
    assert _rows(ok.check(_case("good"), only=["export"], **FAST))["export"][0] == "pass"


def test_a_row_autograd_refuses_in_a_forked_child_runs_in_this_process(monkeypatch):
    """torch refuses autograd in a forked child once its engine's device threads run in the parent (it says so
    only in the child): that row, and the rows after it, run in this process instead of failing."""
    from opsmith.checking import child

    if torch.cuda.is_initialized():
        pytest.skip("CUDA is initialized in this process (a GPU test ran in it first): rows never fork here")
    monkeypatch.setattr(child, "_AUTOGRAD_FORK_BROKEN", False)
    parent = os.getpid()

    def row():
        if os.getpid() != parent:
            raise RuntimeError(child._AUTOGRAD_REFUSES_FORK + ". See https://github.com/pytorch/pytorch/wiki")
        return "pass", "ran in the parent", 0

    def safe_row():
        try:
            return row()
        except RuntimeError as e:
            return "FAIL", f"RuntimeError: {e}", 0

    assert child.can_fork()
    assert child.in_child(safe_row) == ("pass", "ran in the parent", 0)
    assert not child.can_fork()  # the next rows are not forked at all


def test_a_row_that_never_returns_times_out_as_a_fail_row(monkeypatch):
    """Issue 60, item 7: a forked row still running after OPSMITH_CHECK_ROW_TIMEOUT is killed and reported as
    timed out (a row once hung for 12 minutes, then was blamed on the kernel)."""
    import time

    from opsmith.checking import child

    if not child.can_fork():
        pytest.skip("rows do not fork on this machine (CUDA is available or initialized)")
    monkeypatch.setenv("OPSMITH_CHECK_ROW_TIMEOUT", "2")
    t0 = time.monotonic()
    result, detail, _ = child.in_child(lambda: time.sleep(3600) or ("pass", "", 0))
    assert result == "FAIL" and detail.startswith("timed out: the row ran past 2 s (OPSMITH_CHECK_ROW_TIMEOUT)"), detail
    assert time.monotonic() - t0 < 30


def test_a_row_forked_after_openmp_ran_does_not_deadlock():
    """A child forked after the parent used OpenMP's thread pool deadlocked in libgomp at its first parallel op
    (issue 60: 12 minutes, no timeout). The child runs torch on one thread; run in a process of its own, so that a
    deadlock is this test's timeout and not the suite's."""
    code = """
import torch
from opsmith.checking import child
torch.set_num_threads(2)
big = torch.randn(2000, 2000)
(big @ big).sum()  # OpenMP's pool is up in the parent now
print(child.in_child(lambda: ("pass", str(float((big @ big).sum() > -1e30)), 0)) if child.can_fork() else "no fork")
"""
    env = dict(ENV, OPSMITH_CHECK_ROW_TIMEOUT="60")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() in ("('pass', '1.0', 0)", "no fork"), r.stdout


def test_the_cases_own_exceptions_are_its_errors_not_the_ops_failures():
    """Issue 60, item 7: an ``inputs()`` that cannot build a grown shape, or a reference that fails on one, is the
    case's ERROR row naming the shape and the fix, never the op's FAIL (the op is correct here)."""

    def small_only(shape, dtype, device):  # a builder written for the example shapes alone
        if shape[-1] > 40:
            raise ValueError(f"no table for length {shape[-1]}")
        return torch.randn(shape, device=device, dtype=dtype), 1.75

    report = ok.check(ok.CheckCase(torch.ops.t_check_cpu.good, inputs=small_only, reference=lambda x, a: x * a,
                                   shapes=[(37,)], dtypes=[torch.float32]), **FAST)  # fmt: skip
    rows = _rows(report)
    assert rows["numerics"][0] == "ERROR", rows
    assert rows["numerics"][1].startswith("the case's inputs() raised on shape ("), rows["numerics"]
    assert "ValueError: no table for length" in rows["numerics"][1] and "FAIL" not in {r for r, _ in rows.values()}
    assert not report.ok and "errors of the case" in report.table()

    def no_empty(x, a):  # a reference that fails on the empty sample
        if x.numel() == 0:
            raise RuntimeError("empty")
        return x * a

    report = ok.check(ok.CheckCase(torch.ops.t_check_cpu.good, inputs=_case("good").inputs, reference=no_empty,
                                   shapes=[(37,)], dtypes=[torch.float32]), **FAST)  # fmt: skip
    bad = {c: d for c, r, d in report.rows if r != "pass" and r != "skip"}
    assert bad and all(d.startswith("the reference raised on inputs of shapes [(0,)]") for d in bad.values()), bad
    assert all(r == "ERROR" for c, r, _ in report.rows if c in bad), report.table()


def test_deprecation_warnings_raised_while_the_rows_run_are_counted_below_the_table(monkeypatch):
    """Issue 60, item 7: torch's and Triton's own deprecation warnings (27 lines above a round-four table on an
    H200) are hidden and counted; any other warning still shows; OPSMITH_CHECK_WARNINGS=1 shows them all."""
    import warnings

    def noisy(x, a):
        warnings.warn("torch.foo is deprecated", FutureWarning, stacklevel=1)
        warnings.warn("bar is deprecated", DeprecationWarning, stacklevel=1)
        return x * a

    case = ok.CheckCase(torch.ops.t_check_cpu.good, inputs=_case("good").inputs, reference=noisy,
                        shapes=[(37,)], dtypes=[torch.float32])  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = ok.check(case, only=["numerics"], isolate=False, **FAST)
    assert report.ok and caught == [], [str(w.message) for w in caught]
    assert (
        report.hidden_warnings >= 2 and "deprecation warnings from the APIs the rows call were hidden" in report.table()
    )
    monkeypatch.setenv("OPSMITH_CHECK_WARNINGS", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = ok.check(case, only=["numerics"], isolate=False, **FAST)
    assert report.hidden_warnings == 0 and {w.category for w in caught} >= {FutureWarning, DeprecationWarning}


def _cli_check(target: str, *args: str, timeout: int = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opsmith", "check", target, "--device", "cpu", "--examples", "2",
                           *args], capture_output=True, text=True, cwd=HERE, env={**ENV, **env}, timeout=timeout)  # fmt: skip


def test_the_cli_runs_risky_rows_in_spawned_children():
    """Issue 60, item 7: ``opsmith check MODULE:NAME`` runs the rows that launch the kernel in a spawned Python that
    imports the module again (a forked one would keep the parent's argv, thread pools and CUDA state): a crash
    there is the row's FAIL naming the cause, and the parent goes on to the next row (a hang: the next test)."""
    r = _cli_check("check_spawn_cases:WHERE", "--only", "numerics,export")
    assert "ran in " in r.stdout and "opsmith/checking/child.py" in r.stdout, r.stdout + r.stderr
    r = _cli_check("check_spawn_cases:BOOM", "--only", "numerics,export")
    assert r.returncode == 1 and "signal 6 (SIGABRT)" in r.stdout and "without a mask" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
def test_a_spawned_row_that_never_returns_times_out():
    r = _cli_check("check_spawn_cases:HANG", "--only", "numerics", OPSMITH_CHECK_ROW_TIMEOUT="20")
    assert r.returncode == 1 and "timed out: the row ran past 20 s" in r.stdout, r.stdout + r.stderr


def test_a_case_built_in_the_calling_process_forks_its_rows_and_one_named_by_target_spawns(monkeypatch):
    """The Python API has no target to find a case by unless it is given (``origin=``): its rows fork where a fork is
    safe, so a notebook's case still runs isolated."""
    from check_spawn_cases import WHERE

    from opsmith.checking import child

    if not child.can_fork():
        pytest.skip("rows do not fork on this machine (CUDA is available or initialized)")
    forked = _rows(ok.check(WHERE, device="cpu", only=["numerics"], examples=2))["numerics"]
    assert forked[0] == "FAIL" and "opsmith/checking/child.py" not in forked[1], forked
    spawned = _rows(ok.check(WHERE, device="cpu", only=["numerics"], examples=2,
                             origin=("check_spawn_cases:WHERE", 0)))["numerics"]  # fmt: skip
    assert spawned[0] == "FAIL" and "opsmith/checking/child.py" in spawned[1], spawned
