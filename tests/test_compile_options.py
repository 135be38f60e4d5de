"""Compiler options (``KernelSpec(options=...)``, ``ptx_op(options=...)``) on CPU: the spellings accepted and
refused (each naming the fix), what NVRTC builds with them (the cubins differ; a register limit holds), the
compile cache keyed by them, the record and the native library carrying them (PTX: the driver JIT's options
where the kernel loads), and ``-G`` refused in release builds."""

import struct
from importlib import resources

import pytest
import torch

import opsmith as ok
from opsmith import native
from opsmith.declare.record import KernelRecord
from opsmith.flavors.options import parse_options
from opsmith.native.build import NativeBuildError

NS = "t_copts"

# Sixteen values kept live across an unrolled loop (bounded: exp(-|a|) <= 1): over 24 registers unless limited.
HUNGRY = r"""
extern "C" __global__ void hungry(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) a[k] = x[(i + 97 * k) % n];
#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int k = 0; k < 16; ++k) a[k] = expf(-fabsf(a[k])) * a[(k + r + 1) % 16] + 0.25f * a[(k * 7 + r) % 16];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 16; ++k) s += a[k] * (k + 1);
  y[i] = s;
}
"""


def _op(name: str, options: list[str]) -> ok.Op:
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=HUNGRY, kernel_name="hungry", inputs=[ok.InputDecl("x", dtype=torch.float32)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
        geometry=ok.Elementwise(block=(128,)),
        options=options))  # fmt: skip


def _regcount(cubin: bytes) -> int:
    """The kernel's registers, from the cubin's ``.nv.info`` (EIATTR_REGCOUNT: symbol index, count)."""
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + k * shentsize) for k in range(shnum)]
    names_at = heads[shstrndx][4]
    for name, _t, _f, _a, off, size, *_ in heads:
        if cubin[names_at + name : cubin.index(b"\0", names_at + name)] != b".nv.info":
            continue
        p = off
        while p + 4 <= off + size:
            fmt, attr, length = cubin[p], cubin[p + 1], struct.unpack_from("<H", cubin, p + 2)[0]
            if fmt == 4 and attr == 0x2F:
                return struct.unpack_from("<II", cubin, p + 4)[1]
            p += 4 + (length if fmt == 4 else 0)
    raise AssertionError("no EIATTR_REGCOUNT in the cubin")


def test_spellings_are_canonical():
    o = parse_options("t::a", ["--use_fast_math", "-generate-line-info", "--maxrregcount=64", "-ftz=true"], "cuda")
    assert o.canonical == ("-ftz=true", "-lineinfo", "-maxrregcount=64", "-use_fast_math")
    assert dict(o.nvrtc) == {"use_fast_math": True, "lineinfo": True, "max_register_count": 64, "ftz": True}
    assert o.jit == (("line_info", 1), ("max_registers", 64))
    assert parse_options("t::a", [], "cuda").canonical == ()


@pytest.mark.parametrize("options, flavor, says, fix", [
    (["-O3"], "cuda", "'-O3' is not an option opsmith passes", "-use_fast_math"),
    (["-DN=4"], "cuda", "set by another field", "defines={...}"),
    (["-I/usr/include"], "cuda", "set by another field", "include_paths=[...]"),
    (["-arch=sm_90"], "cuda", "set by another field", "arch_override"),
    (["--std=c++20"], "cuda", "set by another field", "compile_std"),
    (["-maxrregcount=8"], "cuda", "from 16 to 255", "-maxrregcount=64"),
    (["-maxrregcount=32", "-maxrregcount=64"], "cuda", "set one option twice", "keep one"),
    (["-ftz"], "cuda", "needs =true or =false", "-ftz=true"),
    ("-use_fast_math", "cuda", "one string, not a list", "options=['-use_fast_math']"),
    (["use_fast_math"], "cuda", "not an option string", "options=["),
    (["-G"], "cuda", "refused in release builds", "OPSMITH_DEVICE_DEBUG=1"),
    (["-use_fast_math"], "ptx", "PTX is compiled already", "options=['-use_fast_math']"),
    (["-prec-div=false"], "ptx", "PTX is compiled already", "nvcc -ptx"),
    (["-lineinfo"], "cubin", "a cubin is machine code", "register the PTX"),
])  # fmt: skip
def test_refusals_name_the_field_and_the_fix(options, flavor, says, fix):
    with pytest.raises(ok.SpecError) as e:
        parse_options("t::a", options, flavor)
    msg = str(e.value)
    assert "options" in msg and says in msg and fix in msg, msg


def test_device_debug_is_accepted_only_for_a_debugging_session(monkeypatch):
    monkeypatch.setenv("OPSMITH_DEVICE_DEBUG", "1")
    o = parse_options("t::a", ["-G"], "cuda")
    assert o.debug and dict(o.nvrtc) == {"debug": True} and o.jit == (("debug", 1),)


def test_nvrtc_compiles_with_the_options_and_a_register_limit_holds():
    plain, limited, fast = _op("plain", []), _op("limited", ["-maxrregcount=24"]), _op("fast", ["-use_fast_math"])
    assert plain.record.compile_options == () and limited.record.compile_options == ("-maxrregcount=24",)
    assert _regcount(plain.record.binary) > 24 >= _regcount(limited.record.binary)
    assert len({plain.record.binary, limited.record.binary, fast.record.binary}) == 3
    # The options are part of the record's JSON, which round-trips.
    assert KernelRecord.from_json(fast.record.to_json()).compile_options == ("-use_fast_math",)


def test_the_compile_cache_keys_on_the_options(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    from opsmith.flavors.cuda_cpp import CudaSource

    def build(options):
        return CudaSource("t::c", HUNGRY, "hungry", options=parse_options("t::c", options, "cuda")).build("sm_90")

    a, b = build(["-lineinfo"]), build([])
    assert not a.from_cache and not b.from_cache and a.data != b.data
    assert build(["--generate-line-info"]).data == a.data  # one option, two spellings: one entry
    assert len(list((tmp_path / "kernels").glob("*.bin"))) == 2


def test_ptx_options_are_the_jit_s_in_the_record_and_the_native_library():
    ptx = resources.files("examples.catalog.kernels").joinpath("scale.ptx").read_bytes()
    decl = dict(inputs=[ok.InputDecl("x", dtype=torch.float32), ok.ScalarInput("alpha", float)],
                outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                geometry=ok.Elementwise(block=(256,)))  # fmt: skip
    op = ok.ptx_op(f"{NS}::scale_jit", ptx, "scale_f32", options=["-maxrregcount=40", "-lineinfo"], **decl)
    bare = ok.ptx_op(f"{NS}::scale_bare", ptx, "scale_f32", **decl)
    assert op.record.compile_options == ("-lineinfo", "-maxrregcount=40")
    assert op.variants.first.binary_for("sm_90").jit == (("line_info", 1), ("max_registers", 40))
    src = native.source([op, bare])
    assert 'opsmith::Kernel kernel0("t_copts::scale_jit", "scale_f32", {{0, ' in src
    assert src.count(", {40, 1, 0});") == 1  # max registers, line info, no debug info
    assert "// Compiled with -lineinfo -maxrregcount=40." in src
    bare_part = src[src.index("// ---- t_copts::scale_bare") :]
    assert "Jit" not in bare_part.split("struct Variant")[0] and ", {40, 1, 0})" not in bare_part


def test_native_build_refuses_a_device_debug_op(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSMITH_DEVICE_DEBUG", "1")
    op = _op("debug", ["-G"])
    with pytest.raises(NativeBuildError) as e:
        native.build([op], tmp_path / "debug.so")
    assert "compiled with -G" in str(e.value) and "drop '-G'" in str(e.value)
    assert not (tmp_path / "debug.so").exists()


def test_a_batch_of_ops_that_cannot_be_native_is_reported_whole(tmp_path, monkeypatch):
    """Several ops failing together: one error lists each with its reason and fix (not the first alone), the
    ops that could be native among them are named nowhere, and nothing is built."""
    monkeypatch.setenv("OPSMITH_DEVICE_DEBUG", "1")
    bad = [_op("debug_a", ["-G"]), _op("debug_b", ["-G", "-lineinfo"])]
    good = _op("plain_c", [])
    with pytest.raises(NativeBuildError) as e:
        native.build([bad[0], good, bad[1]], tmp_path / "batch.so")
    assert [r[0] for r in e.value.refusals] == [f"{NS}::debug_a", f"{NS}::debug_b"], e.value.refusals
    text = str(e.value)
    assert "2 op(s) cannot be native; nothing was built" in text and "plain_c" not in text
    assert text.count("compiled with -G") == 2 and text.count("drop '-G'") == 2
    assert not (tmp_path / "batch.so").exists()
