"""NVRTC compiles (sm_90 cubins, no driver needed) and the on-disk cache (CPU)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from opsmith.cache import MAGIC, DiskCache, make_key
from opsmith.flavors.cuda_cpp import CudaSource

SRC = 'extern "C" __global__ void k(const float* x, int n, float* y) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }'


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(d))
    return d


def entries(d):
    return sorted(p for p in (d / "kernels").glob("*.bin"))


def test_compile_hits_the_cache_second_time(cache_dir):
    src = CudaSource("t_cache::a", SRC, "k")
    first, second = src.build("sm_90"), src.build("sm_90")
    assert not first.from_cache and second.from_cache
    assert first.data == second.data and first.data[:4] == b"\x7fELF"
    assert len(entries(cache_dir)) == 1
    assert (os.stat(cache_dir).st_mode & 0o777) == 0o700


@pytest.mark.parametrize(
    "change",
    ["source", "arch", "std", "define", "kernel"],
)
def test_each_key_input_makes_a_new_entry(cache_dir, change):
    base = dict(source=SRC, kernel_name="k", std="c++17", defines=None, arch="sm_90")
    CudaSource("t_cache::b", base["source"], "k").build("sm_90")
    kw = dict(std="c++17", defines=None)
    src, arch, name = SRC, "sm_90", "k"
    if change == "source":
        src = SRC + "\n// changed"
    elif change == "arch":
        arch = "sm_80"
    elif change == "std":
        kw["std"] = "c++20"
    elif change == "define":
        kw["defines"] = {"FOO": 1}
    elif change == "kernel":
        src, name = SRC + '\nextern "C" __global__ void k2() {}', "k2"
    b = CudaSource("t_cache::b", src, name, **kw).build(arch)
    assert not b.from_cache
    assert len(entries(cache_dir)) == 2


def test_header_contents_are_part_of_the_key(cache_dir, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "val.h").write_text("#define VAL 1.0f\n")
    src = '#include "val.h"\nextern "C" __global__ void k(float* y) { y[0] = VAL; }'
    s = CudaSource("t_cache::h", src, "k", include_paths=[str(inc)])
    assert not s.build("sm_90").from_cache and s.build("sm_90").from_cache
    (inc / "val.h").write_text("#define VAL 2.0f  // edited\n")
    assert not s.build("sm_90").from_cache


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip_payload", "empty", "wrong_key"])
def test_damaged_entry_is_a_miss_and_gets_rewritten(cache_dir, damage):
    s = CudaSource("t_cache::c", SRC, "k")
    good = s.build("sm_90").data
    (path,) = entries(cache_dir)
    blob = path.read_bytes()
    if damage == "truncate":
        blob = blob[: len(blob) - 100]
    elif damage == "garbage":
        blob = os.urandom(len(blob))
    elif damage == "flip_payload":
        blob = blob[:-1] + bytes([blob[-1] ^ 0xFF])
    elif damage == "empty":
        blob = b""
    elif damage == "wrong_key":
        blob = blob.replace(path.stem.encode(), b"0" * 64, 1)
    path.write_bytes(blob)
    again = s.build("sm_90")
    assert not again.from_cache and again.data == good
    assert s.build("sm_90").from_cache  # rewritten


def test_symlinked_entry_is_never_followed(cache_dir, tmp_path):
    s = CudaSource("t_cache::d", SRC, "k")
    s.build("sm_90")
    (path,) = entries(cache_dir)
    target = tmp_path / "elsewhere.bin"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)
    b = s.build("sm_90")
    assert not b.from_cache
    assert not path.is_symlink() and target.read_bytes()  # replaced the link, left the target alone


def test_unsafe_cache_directory_is_refused_with_a_warning(cache_dir):
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    s = CudaSource("t_cache::e", SRC, "k")
    with pytest.warns(UserWarning, match="writable by group or others"):
        b = s.build("sm_90")
    assert b.data[:4] == b"\x7fELF" and not (cache_dir / "kernels").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a directory away needs root")
def test_cache_directory_of_another_user_is_refused_and_compiles_still_work(cache_dir):
    """A cache directory someone else owns could hold their kernels: refused with a warning, never read."""
    cache_dir.mkdir(mode=0o700)
    os.chown(cache_dir, 12345, 12345)
    with pytest.warns(UserWarning, match="belongs to uid 12345"):
        b = CudaSource("t_cache::owner", SRC, "k").build("sm_90")
    assert b.data[:4] == b"\x7fELF" and not b.from_cache and not (cache_dir / "kernels").exists()


def test_disk_cache_primitives(tmp_path):
    c = DiskCache(tmp_path / "root", "ns")
    key = make_key({"x": 1})
    assert c.get(key) is None
    assert c.put(key, {"symbol": "k"}, b"payload")
    meta, payload = c.get(key)
    assert payload == b"payload" and meta["symbol"] == "k"
    assert c.path_for(key).read_bytes().startswith(MAGIC)
    assert make_key({"x": 1}) == key != make_key({"x": 2})


def test_eight_processes_cold_compiling_into_one_empty_cache(cache_dir):
    """Eight processes released together compile the same kernel into one empty cache: all get the same
    cubin, one verified entry remains, no temp file is left, and a later build hits it."""
    start = cache_dir.parent / "go"
    code = textwrap.dedent(f"""
        import os, sys, time
        from opsmith.flavors.cuda_cpp import CudaSource
        while not os.path.exists({str(start)!r}):
            time.sleep(0.01)
        b = CudaSource("t_cache::p", {SRC!r}, "k").build("sm_90")
        sys.stdout.write(b.data.hex())
    """)
    env = dict(os.environ, OPSMITH_CACHE_DIR=str(cache_dir))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env) for _ in range(8)]
    start.write_text("")
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1 and outs[0]
    (entry,) = entries(cache_dir)
    assert DiskCache(cache_dir, "kernels").get(entry.stem) is not None  # verified: size and sha256
    assert not [p for p in (cache_dir / "kernels").iterdir() if p.name.startswith(".tmp-")]
    hit = CudaSource("t_cache::p", SRC, "k").build("sm_90")
    assert hit.from_cache and hit.data.hex().encode() == outs[0]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_writer_killed_while_publishing_leaves_no_entry_and_the_next_run_recovers(cache_dir):
    """SIGKILL between writing the temp file and the atomic rename: no entry appears (readers never see a
    partial one), the next build compiles and publishes, and the dead writer's temp file is swept once stale."""
    code = textwrap.dedent(f"""
        import os, sys, time
        real = os.replace
        def stall(a, b):
            sys.stdout.write("written\\n"); sys.stdout.flush(); time.sleep(120); real(a, b)
        os.replace = stall
        from opsmith.flavors.cuda_cpp import CudaSource
        CudaSource("t_cache::kill", {SRC!r}, "k").build("sm_90")
    """)
    env = dict(os.environ, OPSMITH_CACHE_DIR=str(cache_dir))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "written"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert entries(cache_dir) == []
    (tmp,) = [q for q in (cache_dir / "kernels").iterdir() if q.name.startswith(".tmp-")]
    again = CudaSource("t_cache::kill", SRC, "k").build("sm_90")
    assert not again.from_cache and len(entries(cache_dir)) == 1
    assert CudaSource("t_cache::kill", SRC, "k").build("sm_90").from_cache
    assert tmp.exists()  # a fresh temp file may belong to a live writer: kept
    old = time.time() - 2 * 3600
    os.utime(tmp, (old, old))
    CudaSource("t_cache::kill2", SRC + "// another", "k").build("sm_90")  # any publish sweeps stale temps
    assert not tmp.exists()


def test_eight_threads_needing_the_same_new_kernel_compile_it_once(cache_dir):
    """The first calls of an op from eight threads at once: one compile of each kernel, one shared object
    (Variants.kernel holds a lock around the build; the GPU suite checks the launches)."""
    import threading

    import torch

    import opsmith as ok

    src = "template <typename T> __global__ void k(const T* x, long long n, T* y) {}"
    op = ok.cuda_kernel_op("t_cache::threads", ok.KernelSpec(
        kernel_source=src, kernel_name="k<{T_x}>", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", "int64")], geometry=ok.Elementwise()))  # fmt: skip
    v = op.variants
    builds = []
    real = v.sources[0].build

    def counting(arch, spec=(), *a, **k):
        builds.append(spec)
        time.sleep(0.2)  # a slow compile widens the race
        return real(arch, spec, *a, **k)

    v.sources[0].build = counting
    got = []
    barrier = threading.Barrier(8)

    def first_call():
        barrier.wait()
        got.append(v.kernel(0, (torch.float64,)))

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == [(torch.float64,)] and len({id(k) for k in got}) == 1 and len(got) == 8
