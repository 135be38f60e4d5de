"""Native serving by default (issue 26, item 1), on CPU: ``OPSMITH_NATIVE=dry-run`` makes the served libraries
and the Python path record their launches instead of making them, on CPU tensors, so the switch, the calls
first met after it and the cache can be checked here. Scenarios that build run in their own process (a
loaded library stays loaded); those that build nothing run in this one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import pythonpath, seeded_cache

import opsmith as ok

ROOT = Path(__file__).resolve().parents[1]

_PRELUDE = """
import json, threading, time
import torch
import opsmith as ok
from opsmith import native
SRC = 'template <typename T> __global__ void k(const T* x, int n, T* y) {}'
a = ok.cuda_kernel_op("t_serving::a", ok.KernelSpec(kernel_source=SRC, kernel_name="k<{T_x}>",
    inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=(128,))))
x = torch.randn(3000)
python_path = a.cpu_kernel.launches  # what the Python path launched
def native_path():
    return json.loads(torch.ops.opsmith_dry_run.take()) if hasattr(torch.ops.opsmith_dry_run, "take") else []
def fields(r):
    return (r["config"], r["symbol"], tuple(r["grid"]), tuple(r["block"]), r["shared_mem"], r["args"][16:24])
"""


# As a CuTe DSL op is served (its host functions linked into the library): later kernels need a rebuild, which
# holds every kernel and decision the process has. The rebuild machinery is tested through it on CPU.
_LINKED = """
import sys
sys.modules["opsmith.native.build"].learns = lambda op, serve: False  # (opsmith.native.build is a function too)
"""


def _run(code: str, cache: Path, **extra: str) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PYTHONPATH=pythonpath(ROOT),
        OPSMITH_CACHE_DIR=str(seeded_cache(cache)),
        OPSMITH_NATIVE="dry-run",
        **extra,
    )
    env.pop("OPSMITH_DISABLE_DISK_CACHE", None)
    return subprocess.run([sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, env=env,
                          timeout=900)  # fmt: skip


@pytest.mark.slow
def test_threads_calling_while_the_op_switches_each_run_whole_on_one_path(tmp_path):
    """Four threads call the op from registration until well after the switch: no call fails, every call is
    recorded by exactly one path, both paths launch the same kernel with the same grid and size argument, and
    after the switch only the library serves."""
    r = _run(
        """
errors, calls, stop = [], [0] * 4, threading.Event()
def worker(k):
    while not stop.is_set():
        try:
            a(x)
            calls[k] += 1
        except Exception as e:
            errors.append(repr(e))
threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in threads: t.start()
assert native.wait(600)
served_at = sum(calls)
time.sleep(0.5)
stop.set()
for t in threads: t.join()
records = native_path()
print("serving:", a.serving, "errors:", errors[:3])
print("calls == records:", sum(calls) == len(python_path) + len(records))
print("both paths served:", len(python_path) > 0, len(records) > 0)
print("one kind of launch:", len({fields(r) for r in python_path + records}))
before = len(python_path)
for _ in range(50): a(x)
print("after the switch, Python launches:", len(python_path) - before, "native:", len(native_path()))
""",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "serving: native errors: []" in out and "calls == records: True" in out, out
    assert "both paths served: True True" in out and "one kind of launch: 1" in out, out
    assert "after the switch, Python launches: 0 native: 50" in out, out
    assert "Overriding a previously registered kernel" not in r.stderr


@pytest.mark.slow
def test_a_dtype_first_seen_after_the_switch_is_handed_to_the_library_without_a_rebuild(tmp_path):
    """float64 is in no library (the build guesses float32, float16 and bfloat16): its first call goes to the
    Python path, which compiles it and hands the kernel to the library (issue 62: learned decisions are data), so
    the next float64 call is native and no library is rebuilt. A second process takes the same library from the
    cache and learns float64 again; a corrupted cache entry is a miss there, compiled again, never a crash."""
    code = """
assert native.wait(600)
a(x.double())
print("float64 first:", [r["symbol"] for r in python_path], native_path())
a(x.double()); a(x.half())
print("float64 after:", len(python_path), [r["symbol"] for r in native_path()])
assert native.wait(600)
c = a.serving_counts()
print("libraries:", len(c.rebuilds), c.rebuilds[0][1], "learned", c.learned, a.serving, c.python)
"""
    r = _run(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "float64 first: ['_Z1kIdEvPKT_iPS0_'] []" in r.stdout, r.stdout
    assert "float64 after: 1 ['_Z1kIdEvPKT_iPS0_', '_Z1kI6__halfEvPKT_iPS1_']" in r.stdout, r.stdout
    assert "libraries: 1 compiled learned 1 native {'a dtype the library lacks': 1}" in r.stdout, r.stdout
    r = _run(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "float64 after: 1 ['_Z1kIdEvPKT_iPS0_', '_Z1kI6__halfEvPKT_iPS1_']" in r.stdout, r.stdout
    assert "libraries: 1 from the cache learned 1 native" in r.stdout, r.stdout
    entries = [p for p in (tmp_path / "native").rglob("*") if p.is_file() and p.stat().st_size > 10_000]
    assert len(entries) == 1, entries
    for p in entries:  # flip bytes in the middle of the library: the cache's check must refuse it
        data = bytearray(p.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
        p.write_bytes(bytes(data))
    r = _run(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "libraries: 1 compiled learned 1 native" in r.stdout and "float64 after: 1" in r.stdout, r.stdout


@pytest.mark.slow
def test_a_miss_while_a_rebuild_is_under_way_queues_the_next(tmp_path):
    """A linked op's float64 queues a rebuild; an int32 call met while that build runs (it collected its kernels
    before) queues another, so after wait() both dtypes are native (the old code dropped the second miss)."""
    r = _run(
        _LINKED
        + """
assert native.wait(600)
a(x.double())
time.sleep(1.0)  # the float64 rebuild has started
a(x.int())
assert native.wait(600)
before = len(python_path)
a(x.double()); a(x.int())
print("python launches after wait:", len(python_path) - before, "native:", len(native_path()))
""",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "python launches after wait: 0 native: 2" in r.stdout, r.stdout


@pytest.mark.slow
def test_a_process_that_exits_first_leaves_its_library_for_the_next(tmp_path):
    """The compile runs in a session of its own: the registering process exits at once, the compile finishes,
    and the next process loads the library without compiling."""
    r = _run('print("exits while", a.serving_why)', tmp_path)
    assert r.returncode == 0 and "exits while the native library is being built" in r.stdout, r.stdout + r.stderr
    staged = tmp_path / "native-libs" / "staging"
    deadline = time.monotonic() + 300
    while not list(staged.glob("*.so")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert list(staged.glob("*.so")), list(staged.iterdir())
    r = _run("assert native.wait(600); print('then:', a.serving, a.serving_why)", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "then: native served-" in r.stdout and "(compiled by an earlier process in" in r.stdout, r.stdout


def _register(name: str, **kw):
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    return ok.cuda_kernel_op(f"t_serving::{name}", ok.KernelSpec(kernel_source=src, kernel_name="k",
                             inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                             extras=[ok.Numel("x")], geometry=ok.Elementwise()), **kw)  # fmt: skip


def test_the_off_switches_keep_the_python_path(monkeypatch):
    monkeypatch.setenv("OPSMITH_NATIVE", "off")
    op = _register("off_env")
    assert (op.serving, op.serving_why) == ("python", "OPSMITH_NATIVE=off")
    monkeypatch.setenv("OPSMITH_NATIVE", "dry-run")
    op = _register("off_keyword", native=False)
    assert (op.serving, op.serving_why) == ("python", "native=False at registration")
    assert not hasattr(torch.ops.opsmith_python_t_serving, "off_keyword")
    monkeypatch.setenv("OPSMITH_NATIVE", "sometimes")
    with pytest.raises(ValueError, match=r"OPSMITH_NATIVE=.sometimes. is not one of auto, off, dry-run\. Fix: set it"):
        _register("off_bad")


def test_no_compiler_keeps_the_python_path_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("OPSMITH_NATIVE", "dry-run")
    monkeypatch.setenv("OPSMITH_CXX", str(tmp_path / "no-such-c++"))
    op = _register("no_cxx")
    assert op.serving == "python"
    assert op.serving_why.startswith("OPSMITH_CXX=") and "is not an executable compiler. Fix:" in op.serving_why
    op(torch.randn(10))  # the Python path (its dry run here) serves
    assert len(op.cpu_kernel.launches) == 1


def test_an_op_that_cannot_be_native_says_why(monkeypatch):
    monkeypatch.setenv("OPSMITH_NATIVE", "dry-run")
    op = _register("eager", eager_fn=lambda x: x.clone())
    assert op.serving == "python"
    assert op.serving_why == "t_serving::eager cannot be native: its implementation is a Python eager_fn."


def test_without_a_gpu_auto_keeps_the_python_path(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: tests/test_gpu_serving.py covers auto there")
    monkeypatch.setenv("OPSMITH_NATIVE", "auto")
    op = _register("auto_cpu")
    assert op.serving_why == "no CUDA GPU in this process (the native library serves CUDA tensors)"


@pytest.mark.slow
def test_a_cache_dir_and_tmpdir_with_commas_spaces_and_quotes_still_serve_natively(tmp_path):
    """Compiler arguments never depend on a path's characters: ``-Wa,-I,<dir>`` split at the comma, so a cache
    directory (or TMPDIR) like this one broke every build and left every op on the Python path."""
    odd = tmp_path / "a,b c'd\"e,-Wa,--defsym,x=1"
    tmp = tmp_path / "t,m p'"
    odd.mkdir()
    tmp.mkdir()
    r = _run(
        """
assert native.wait(600)
a(x)
print("serving:", a.serving, "|", a.serving_why, "| native launches:", len(native_path()))
""",
        odd,
        TMPDIR=str(tmp),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "serving: native | served-" in r.stdout and "native launches: 1" in r.stdout, r.stdout + r.stderr[-2000:]


@pytest.mark.slow
def test_calls_first_met_after_the_rebuild_cap_stay_on_the_python_path(tmp_path):
    """The cap (here 1 rebuild per op): float64 rebuilds the library; int32, met after the cap, is served by the
    Python path on every call, and never by a library."""
    r = _run(
        _LINKED
        + """
from opsmith.native import serving
serving.REBUILDS = 1
assert native.wait(600)
a(x.double())
assert native.wait(600)
before = len(python_path)
a(x.double())
print("float64 rebuilt: python", len(python_path) - before, "native", len(native_path()),
      [w for _, _, w in a.serving_counts().rebuilds])
a(x.int())
assert native.wait(600)
before = len(python_path)
a(x.int()); a(x.int())
print("int32 after the cap: python", len(python_path) - before, "native", len(native_path()))
""",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "float64 rebuilt: python 0 native 1 ['registration', 'a linked kernel the last one lacked']" in r.stdout, (
        r.stdout
    )
    assert "int32 after the cap: python 2 native 0" in r.stdout, r.stdout
    assert "calls first met after 1 native rebuilds stay on the Python path" in r.stderr, r.stderr[-2000:]


@pytest.mark.slow
def test_a_served_tuned_op_meeting_a_new_tuning_key_runs_its_decision_not_the_default(tmp_path):
    """A tuning key the library holds no decision for goes to the Python path (which tunes it on a GPU; a dry run
    looks decisions up and never tunes), never to the library's default config: with no decision yet the Python
    path launches the default (0); once a decision (1) exists, the Python path launches it once and hands the
    decision and config 1's kernel to the library, which launches config 1 itself from the next call on."""
    r = _run(
        """
T = 'template <int BLOCK> __global__ void kt(const float* x, int n, float* y) {}'
t = ok.cuda_kernel_op("t_serving::tuned", ok.KernelSpec(kernel_source=T, kernel_name="kt<{BLOCK}>",
    inputs=[ok.InputDecl("x", torch.float32)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": b}) for b in (128, 256)],
    key=[ok.TuneDim("x", -1)])))
t_python = t.cpu_kernel.launches
assert native.wait(600) and t.serving == "native"
t(torch.randn(3000))
print("no decision: python configs", [r["config"] for r in t_python], "native", [r["config"] for r in native_path()])
t.tuner.decisions[(torch.float32, 4096)] = 1  # as if a tuning of this key chose config 1
t(torch.randn(3000))
print("decided: python configs", [r["config"] for r in t_python], "native", [r["config"] for r in native_path()])
t(torch.randn(3000))
print("learned: native configs", [r["config"] for r in native_path()], len(t.serving_counts().rebuilds))
# The launch is config 1's whole: its kernel (kt<256>), its block and its grid, not config 0's kernel on its grid
t(torch.randn(3000))
print("launched:", [(r["config"], "Li256E" in r["symbol"], r["grid"][0], r["block"][0]) for r in native_path()])
""",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no decision: python configs [0] native []" in r.stdout, r.stdout
    assert "decided: python configs [0, 1] native []" in r.stdout, r.stdout
    assert "learned: native configs [1] 1" in r.stdout, r.stdout
    assert "launched: [(1, True, 12, 256)]" in r.stdout, r.stdout


@pytest.mark.slow
def test_a_decision_made_while_the_first_library_builds_is_handed_over_at_its_load(tmp_path):
    """A tuning decision made after the build collected what it holds (a first call tuning while the library
    compiles) is handed to the library when it loads, which then launches the decided config (issue 49's audit: a
    decision counted nowhere left the first library, and its calls on the Python path, in place)."""
    r = _run(
        """
from opsmith.native import serving
T = 'template <int BLOCK> __global__ void kt(const float* x, int n, float* y) {}'
compile_library = serving._library_bytes
def meanwhile(*args, **kw):  # the library's compile: the collect is done; a call tunes its key now
    t.tuner.decisions[(torch.float32, 4096)] = 1
    return compile_library(*args, **kw)
serving._library_bytes = meanwhile
t = ok.cuda_kernel_op("t_serving::tuned_meanwhile", ok.KernelSpec(kernel_source=T, kernel_name="kt<{BLOCK}>",
    inputs=[ok.InputDecl("x", torch.float32)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": b}) for b in (128, 256)],
    key=[ok.TuneDim("x", -1)])))
t(torch.randn(3000))  # on the Python path: compiles config 0 (a dry run looks decisions up, never tunes)
assert native.wait(600)
serving._library_bytes = compile_library
c = t.serving_counts()
print("rebuilds:", len(c.rebuilds), [w for _, _, w in c.rebuilds], "learned", c.learned)
native_path()
t(torch.randn(3000))
t(torch.randn(3000))
print("launched:", [r["config"] for r in native_path()], t.serving_counts().python)
""",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # the decision handed over at the load, with config 1's kernel for the specializations the library holds
    # (compiled then: no call had compiled it), so the first call after the load launches config 1 natively
    assert "rebuilds: 1 ['registration'] learned 2" in r.stdout, r.stdout
    assert "launched: [1, 1] {}" in r.stdout, r.stdout


@pytest.mark.slow
def test_serving_counts_every_path_and_why_and_what_the_library_learned(tmp_path):
    """Counters of issue 39: calls the library ran, calls it handed to the Python path by why (a dtype, a
    compiled-in size, a tuning key), each kind logged once; what the Python path compiled is handed to the library
    (issue 62), so ``serving`` stays "native" and no library is rebuilt; the libraries and their times, the
    kernels and decisions learned; one table for the process."""
    r = _run(
        """
from opsmith.native import serving
serving.REBUILDS = 3
S = 'template <int N> __global__ void ks(const float* x, int n, float* y) {}'
sized = ok.cuda_kernel_op("t_serving::sized", ok.KernelSpec(kernel_source=S, kernel_name="ks<{N}>",
    inputs=[ok.InputDecl("x", torch.float32, ndim=2)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
    extras=[ok.Numel("x"), ok.DimSize("x", -1, name="N")], geometry=ok.Elementwise(block=(128,))))
T = 'template <int BLOCK> __global__ void kt(const float* x, int n, float* y) {}'
tuned = ok.cuda_kernel_op("t_serving::tuned_counts", ok.KernelSpec(kernel_source=T, kernel_name="kt<{BLOCK}>",
    inputs=[ok.InputDecl("x", torch.float32)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": b}) for b in (128, 256)],
    key=[ok.TuneDim("x", -1)])))
sized(torch.randn(4, 8)); tuned(torch.randn(100))  # first calls, on the Python path: compiled, decided
tuned.tuner.decisions[(torch.float32, 128)] = 0
assert native.wait(600)
print("first:", a.serving, sized.serving, tuned.serving)
for _ in range(3):
    a(x)
print("native only:", a.serving_counts().native, a.serving_counts().python)
a(x.double())
print("after a float64 call:", a.serving, "|", a.serving_counts().python)
sized(torch.randn(4, 16)); tuned(torch.randn(1000))
print("size and key:", sized.serving_counts().python, "|", tuned.serving_counts().python)
assert native.wait(600)
c = a.serving_counts()
print("learned:", a.serving, c.native, len(c.rebuilds), all(s > 0 for s, _, _ in c.rebuilds), [w for _, _, w in c.rebuilds],
      c.learned, sized.serving_counts().learned, tuned.serving_counts().learned)
a(x.double())
print("served now:", a.serving_counts().native - c.native, a.serving_counts().python_calls)
print("TABLE")
print(native.serving_table())
""",
        tmp_path,
        OPSMITH_LOG="info",
        COLUMNS="400",  # rich's log lines unwrapped
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "first: native native native" in out, out
    assert "native only: 3 {}" in out, out
    assert "after a float64 call: native | {'a dtype the library lacks': 1}" in out, out
    assert ("size and key: {'a compiled-in size the library lacks': 1} | {'a tuning key the library lacks': 1}"
            in out), out  # fmt: skip
    # a: the float64 kernel; sized: N=8 (before the load) and N=16; tuned: the decision set before the load (a dry
    # run never tunes: the key met after it has none to hand over)
    assert "learned: native 3 1 True ['registration'] 1 2 1" in out, out
    assert "served now: 1 1" in out, out
    table = out.split("TABLE\n")[1]
    assert table.splitlines()[0].split() == ["op", "serving", "native", "calls", "Python-path", "calls", "(why)",
                                             "libraries", "(s),", "kernels", "and", "decisions", "learned"]  # fmt: skip
    assert any(line.startswith("t_serving::a ") and " native " in line for line in table.splitlines()), table
    logged = [line for line in r.stderr.splitlines() if "a call went to the Python path" in line]
    assert len(logged) == 3 and sum("t_serving::a:" in line for line in logged) == 1, logged


@pytest.mark.slow
def test_the_serving_command_runs_a_script_and_prints_the_table(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(_PRELUDE + "assert native.wait(600)\nfor _ in range(5): a(x)\nprint('ran', a.serving)\n")
    env = dict(
        os.environ,
        PYTHONPATH=pythonpath(ROOT),
        OPSMITH_CACHE_DIR=str(seeded_cache(tmp_path / "cache")),
        OPSMITH_NATIVE="dry-run",
    )
    env.pop("OPSMITH_DISABLE_DISK_CACHE", None)
    r = subprocess.run([sys.executable, "-m", "opsmith", "serving", str(script)], capture_output=True, text=True,
                       env=env, timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ran native" in r.stdout
    row = next(line for line in r.stderr.splitlines() if line.startswith("t_serving::a "))
    assert row.split()[1:4] == ["native", "5", "0"], row


def test_the_table_on_a_machine_without_a_gpu_says_why_its_counts_are_zero(tmp_path, monkeypatch):
    """Without a CUDA GPU (and serving CUDA), every count is 0: the table says why instead of leaving 0/0 rows
    unexplained (issue 50, item 4)."""
    from opsmith.native import serving

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("OPSMITH_NATIVE", "auto")
    assert "(No CUDA GPU in this process: the counts are of kernel launches on CUDA tensors" in serving.table()
    monkeypatch.setenv("OPSMITH_NATIVE", "dry-run")  # the dry run counts CPU launches: nothing to explain
    assert "No CUDA GPU" not in serving.table()


@pytest.mark.slow
def test_what_the_python_path_compiled_during_the_first_build_is_in_the_library_wait_returns(tmp_path):
    """A float64 call made while the first library compiles (it had collected its kernels) compiles float64 on
    the Python path; the library is handed it when it loads, so after wait() the next float64 call is native (it
    was a miss in the middle of bench_host's timed rounds: every call of a row on the Python path)."""
    r = _run(
        """
time.sleep(1.5)  # the first build has collected its kernels and is compiling
a(x.double())
assert native.wait(600)
before = a.serving_counts()
a(x.double())
after = a.serving_counts()
print("after wait:", a.serving, after.native - before.native, after.python_calls - before.python_calls,
      len(after.rebuilds))
""",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "after wait: native 1 0 1" in r.stdout, r.stdout


@pytest.mark.slow
def test_an_op_whose_sizes_are_compiled_in_is_served_before_its_first_call(tmp_path):
    """A kernel with a size compiled in (a constexpr row length) has nothing compiled at registration: the first
    library serves the op anyway, handing its first call of a size to the Python path (a compiled-in size the
    library lacks), which hands the kernel it compiled to the library. Before, that build failed ("holds no compiled kernel") and the
    op stayed on the Python path for the process's life: on an H100, bench_host's CuTe DSL RMSNorm in the one
    process whose warm cache made the first build instant."""
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    (tmp_path / "rowsum_kernel.py").write_text(  # Triton reads a kernel's source from its file
        "import triton, triton.language as tl\n@triton.jit\ndef rowsum(x_ptr, y_ptr, N: tl.constexpr):\n"
        "    offs = tl.arange(0, N)\n"
        "    tl.store(y_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + tl.program_id(0) * N + offs), axis=0))\n"
    )
    r = _run(
        f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
from rowsum_kernel import rowsum
op = ok.triton_op("t_serving_static::rowsum", rowsum, inputs=[ok.InputDecl("x", dtype=torch.float32, ndim=2)],
    outputs=[ok.OutputDecl("y", ok.ReduceDims("x", (-1,)))], extras=[ok.DimSize("x", -1, name="N")],
    geometry=ok.Grid(grid=("size(x, 0)",)))
assert not op.variants.kernels
assert native.wait(600)
print("first library:", op.serving, "|", op.serving_why.split(" (")[0].startswith("served-"))
x = torch.randn(4, 64)
op(x)
print("first call:", sorted(op.serving_counts().python.items()))
op(x)
c = op.serving_counts()
print("then:", op.serving, c.native, len(c.rebuilds), len(native_path()), c.learned)
""",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "first library: native | True" in out, out
    assert "first call: [('a compiled-in size the library lacks', 1)]" in out, out
    assert "then: native 1 1 1 1" in out, out


@pytest.mark.slow
def test_a_failed_build_warns_naming_the_op_and_the_table_says_why(tmp_path):
    """Issue 49, item 3: a library that fails to build was one log line (the op then stayed on the Python path
    for the life of the process). Now it is a RuntimeWarning per op, naming the op and the cause, and the serving
    table lists the cause."""
    r = _run(
        """
import warnings
from opsmith.native import serving
def broken(*a, **k):
    raise RuntimeError("planted: the compiler said no")
serving.build_source = broken
S = 'template <typename T> __global__ void kb(const T* x, int n, T* y) {}'
b = ok.cuda_kernel_op("t_serving::broken", ok.KernelSpec(kernel_source=S, kernel_name="kb<{T_x}>",
    inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=(128,))))
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    assert native.wait(600)
    b(x); b(x); b(x)
print("warned:", [str(w.message) for w in seen if w.category is RuntimeWarning and "broken" in str(w.message)])
print("serving:", b.serving, "|", b.serving_why)
print("TABLE")
print(native.serving_table())
""",
        tmp_path,
        COLUMNS="400",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    cause = "the native build failed, the Python path serves: planted: the compiler said no"
    warned = (
        "t_serving::broken: its native library failed to build, so the Python path serves it (more host time per "
        "call): planted: the compiler said no. Fix: report the cause with the op's declaration; `opsmith serving` "
        "lists it meanwhile."
    )
    assert f"warned: [{warned!r}]" in r.stdout, r.stdout
    assert f"serving: python | {cause}" in r.stdout, r.stdout
    row = next(line for line in r.stdout.split("TABLE\n")[1].splitlines() if line.startswith("t_serving::broken "))
    assert f"python ({cause})" in row, row


def test_an_exit_while_kernels_compile_abandons_the_library_at_the_next_kernel(tmp_path):
    """At exit, a library still compiling its kernels (past EXIT_WAIT_S) stops before the next kernel and the
    exit waits for it: no thread is inside NVRTC while Python finalizes (on an H200, a script registering 140
    ops aborted at exit: "FATAL: exception not rethrown"). Each kernel's compile is slowed to 0.4 s here."""
    code = r"""
import importlib, time
b = importlib.import_module("opsmith.native.build")
from opsmith.native import serving as s
calls, inside = [], []
compile_one = b.variant_of
def slow(*args, **kw):
    calls.append(1); inside.append(1)
    time.sleep(0.4)
    try:
        return compile_one(*args, **kw)
    finally:
        inside.pop()
b.variant_of = slow
s.EXIT_WAIT_S = 0.3
import opsmith as ok
SRC = 'template <typename T> __global__ void k(const T* x, int n, T* y) {}'
a = ok.cuda_kernel_op("t_serving_exit::a", ok.KernelSpec(kernel_source=SRC, kernel_name="k<{T_x}>",
    inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=(128,))))
while not calls:
    time.sleep(0.01)
s._SERVER.at_exit()
print("inside", len(inside), "alive", s._SERVER._thread.is_alive(), "kernels", len(calls), "of", len(b.DEFAULT_DTYPES))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=pythonpath(ROOT), OPSMITH_NATIVE="dry-run",
                                OPSMITH_CACHE_DIR=str(tmp_path / "cache")))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    inside, alive, kernels, of = re.search(r"inside (\d+) alive (\w+) kernels (\d+) of (\d+)", r.stdout).groups()
    assert (inside, alive) == ("0", "False") and int(kernels) < int(of), r.stdout


def test_a_custom_grid_op_registers_under_the_dry_run_and_stays_on_the_python_path(monkeypatch):
    """A ``Custom`` geometry's grid is a Python function: the dry run cannot print it, and registration under
    ``OPSMITH_NATIVE=dry-run`` failed on an AssertionError. It registers, on the Python path, saying why."""
    monkeypatch.setenv("OPSMITH_NATIVE", "dry-run")
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    op = ok.cuda_kernel_op("t_serving::custom_grid", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x", torch.float32)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
        geometry=ok.Custom(lambda inputs, outputs: ((4,), (128,)))))  # fmt: skip
    assert op.serving == "python" and "cannot be native" in op.serving_why, op.serving_why
