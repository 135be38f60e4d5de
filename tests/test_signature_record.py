"""The kernel's parameters as the compiler compiled them (the probe's lowered name, the cubin's parameter
sizes), their names from the source text, PTX entries, cubin symbols, launch expressions and the kernel
record (CPU: NVRTC compiles for sm_90 without a driver)."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import opsmith as ok
from opsmith.declare.cubin import cubin_param_layout, cubin_symbols
from opsmith.declare.expr import evaluate
from opsmith.declare.geometry import lower_geometry
from opsmith.declare.mangling import ProbeError, probe_parameters
from opsmith.declare.record import KernelRecord
from opsmith.declare.signature import name_params, params_from_probe, parse_ptx_entry
from opsmith.flavors.cuda_cpp import CudaSource

NS = "t_sig"


def _params(src: str, name: str):
    """The kernel's parameters as one compile reports them: (spelled, pointer, ctype, size, name)."""
    s = CudaSource(f"{NS}::probe", src, name)
    params, why = s.params(s.build("sm_90"), "sm_90")
    return [(p.spelled, p.pointer, p.ctype, p.size, p.name) for p in params], why


def test_types_come_from_the_compiler_after_the_preprocessor_typedefs_and_namespaces():
    src = r"""
    #include <cuda_fp16.h>
    namespace mylib {
    typedef long long idx_t;
    template <typename T = float>
    __global__ void axpy(const T* x, double a, idx_t n, T* __restrict__ y, float2 v) {}
    }
    #ifdef USE_HALF
    __global__ void scale2(const __half* x, int n, __half* y) {}
    #else
    __global__ void scale2(const float* xs, int n, float* ys) {}
    #endif
    #if 0
    extern "C" __global__ void dead(const double* q) {}
    #endif
    """
    got, why = _params(src, "mylib::axpy<>")
    assert got == [("float const*", True, "f32", 8, "x"), ("double", False, "f64", 8, "a"),
                   ("long long", False, "i64", 8, "n"), ("float*", True, "f32", 8, "y"),
                   ("float2", False, "?", 8, "v")] and why == ""  # fmt: skip
    got, why = _params(src, "scale2")  # the #else branch NVRTC compiled, with that branch's names
    assert got == [
        ("float const*", True, "f32", 8, "xs"),
        ("int", False, "i32", 4, "n"),
        ("float*", True, "f32", 8, "ys"),
    ]


def test_a_template_default_is_not_taken_for_a_name():
    """``template <typename T = float>``: a plain ``const float* w`` stays float in ``mul_w<__half>``."""
    src = "#include <cuda_fp16.h>\ntemplate <typename T = float> __global__ void mul_w(const T* x, const float* w, T* y) {}"
    got, _ = _params(src, "mul_w<__half>")
    assert [(g[0], g[2]) for g in got] == [("__half const*", "f16"), ("float const*", "f32"), ("__half*", "f16")]


def test_struct_parameters_get_their_size_from_the_cubin():
    src = "struct S { int a; double b; };\n#include <cuda_fp16.h>\n" \
          "template <typename T, int N> __global__ void st(S s, const T* p, T* q, unsigned char c, bool b, __half h) {}"  # fmt: skip
    got, _ = _params(src, "st<__half, 4>")
    assert [(g[0], g[2], g[3]) for g in got] == [("S", "?", 16), ("__half const*", "f16", 8), ("__half*", "f16", 8),
                                                 ("unsigned char", "u8", 1), ("bool", "bool", 1), ("__half", "f16", 2)]  # fmt: skip


def test_cubin_layout_matches_what_cuobjdump_reports():
    from cuda.core import Program, ProgramOptions

    src = 'extern "C" __global__ void k(const float* x, float a, long long n, char c, double* y) {}'
    obj = Program(src, "c++", ProgramOptions(arch="sm_90")).compile("cubin")
    assert cubin_param_layout(bytes(obj.code), "k") == [(0, 8), (8, 4), (16, 8), (24, 1), (32, 8)]
    assert cubin_param_layout(bytes(obj.code), "missing") is None
    assert cubin_param_layout(b"not an elf", "k") is None


def test_probe_names_decode_substitutions_and_refuse_what_they_do_not_know():
    ps = probe_parameters("_Z17opsmith_sig_probeIPFv1SPK10opsmith_T0PS1_hb6__halfEEvT_")
    assert [p.spelled() for p in ps] == ["S", "opsmith_T0 const*", "opsmith_T0*", "unsigned char", "bool", "__half"]
    ns = params_from_probe("_Z17opsmith_sig_probeIPFvPKN5mylib4HalfEPS1_EEvT_")
    assert [(p.spelled, p.ctype) for p in ns] == [("mylib::Half const*", "?"), ("mylib::Half*", "?")]
    with pytest.raises(ProbeError):
        probe_parameters("_Z3fooIiEvT_")


def test_names_are_unknown_when_the_text_cannot_say_them():
    params = params_from_probe("_Z17opsmith_sig_probeIPFvPKfiPfEEvT_")
    src = '#define K(n) extern "C" __global__ void n(const float* x, int n_, float* y)\nK(k) {}'
    named, why = name_params(src, "k", params)
    assert [p.name for p in named] == ["", "", ""] and "no definition of 'k'" in why
    two = "__global__ void k(const float* a, int n, float* b) {}\n__global__ void k(const float* c, int n, float* d);"
    named, why = name_params(two, "k", params)
    assert "2 definitions" in why


def test_cuda_signature_types_qualifiers_and_launch_bounds():
    src = """
    // __global__ void k(int decoy)
    extern "C" __global__ void __launch_bounds__(256, 2) k(const float* __restrict__ x, const __nv_bfloat16 *b,
        unsigned int u, long long n, size_t m, bool flag, double* d, void* raw, float4* v) {}
    """
    got, _why = _params("#include <cuda_bf16.h>\n" + src, "k")
    assert [(g[4], g[1], g[2]) for g in got] == [
        ("x", True, "f32"), ("b", True, "bf16"), ("u", False, "u32"), ("n", False, "i64"), ("m", False, "u64"),
        ("flag", False, "bool"), ("d", True, "f64"), ("raw", True, "void"), ("v", True, "f32")]  # fmt: skip


def test_ptx_entry_sizes():
    ptx = ".visible .entry q(.param .u64 .ptr .global .align 4 q_param_0, .param .f32 a, .param .u32 n, .param .align 8 .b8 s[16])"
    assert [(p.ctype, p.pointer, p.size) for p in parse_ptx_entry(ptx, "q")] == \
        [("u64", True, 8), ("f32", False, 4), ("u32", False, 4), ("?", False, 16)]  # fmt: skip


def test_cubin_symbols_without_a_driver():
    from cuda.core import Program, ProgramOptions

    src = 'extern "C" __global__ void a(int* p) {} template <class T> __global__ void b(T* p) {}'
    obj = Program(src, "c++", ProgramOptions(arch="sm_90")).compile("cubin", name_expressions=("b<float>",))
    syms = cubin_symbols(bytes(obj.code))
    assert "a" in syms and obj.symbol_mapping["b<float>"].decode() in syms


def _shape(draw_dims):
    return torch.empty(draw_dims, device="meta")


@given(st.lists(st.integers(0, 40), min_size=3, max_size=5), st.sampled_from([(256,), (16, 16), (8, 4, 2)]))
def test_nd_grid_covers_every_output_element(dims, block):
    o = torch.empty(dims, device="meta")
    plan = lower_geometry(ok.Elementwise(block=block, layout="nd" if len(block) > 1 else "flat"))
    grid = [evaluate(g, {"o0": o}) for g in plan.grid]
    if len(block) == 1:
        assert grid[0] * block[0] >= o.numel()
        return
    assert grid[0] * block[0] >= dims[-1] and grid[1] * block[1] >= dims[-2]
    lead = math.prod(dims[: -len(block)])
    z = lead * (-(-dims[-3] // block[2])) if len(block) == 3 else lead
    assert grid[2] == z


def test_reduction_rows():
    plan = lower_geometry(ok.Reduction(reduce_dims=(-1, -2), block_size=128))
    assert evaluate(plan.grid[0], {"i0": torch.empty(3, 5, 7, 11, device="meta")}) == 15
    assert plan.block == (128, 1, 1)


def test_record_round_trips_through_json_and_detects_corruption():
    from examples.catalog.basic import register_all

    ex = register_all("t_record")
    for e in ex.values():
        text = e.op.record.to_json()
        assert KernelRecord.from_json(text) == e.op.record
    bad = ex["relu"].op.record.to_json().replace('"binary_sha256": "', '"binary_sha256": "0')
    with pytest.raises(ValueError, match="checksum"):
        KernelRecord.from_json(bad)
    rec = ex["add_bias_2d"].op.record
    assert rec.launch.grid[2] == ["lead", "o0", 2] and rec.param_ctypes() == ["ptr", "ptr", "i32", "i32", "ptr"]
