"""Kernel signatures, PTX entries, cubin symbols, launch expressions and the kernel record (CPU)."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import opsmith as ok
from opsmith.geometry import evaluate, lower_geometry
from opsmith.record import KernelRecord
from opsmith.signature import cubin_symbols, parse_cuda_signature, parse_ptx_entry


def test_cuda_signature_types_qualifiers_and_launch_bounds():
    src = """
    // __global__ void k(int decoy)
    extern "C" __global__ void __launch_bounds__(256, 2) k(const float* __restrict__ x, const __nv_bfloat16 *b,
        unsigned int u, long long n, size_t m, bool flag, double* d, void* raw, float4* v) {}
    """
    got = [(p.name, p.pointer, p.ctype) for p in parse_cuda_signature(src, "k")]
    assert got == [("x", True, "f32"), ("b", True, "bf16"), ("u", False, "u32"), ("n", False, "i64"),
                   ("m", False, "u64"), ("flag", False, "bool"), ("d", True, "f64"), ("raw", True, "void"),
                   ("v", True, "f32")]  # fmt: skip


def test_template_parameters_are_substituted():
    src = "template <typename T, int N> __global__ void s(const T* x, T a, T* y) {}"
    got = [(p.pointer, p.ctype) for p in parse_cuda_signature(src, "s<__half, 4>")]
    assert got == [(True, "f16"), (False, "f16"), (True, "f16")]
    assert parse_cuda_signature(src, "missing") is None


def test_ptx_entry_sizes():
    ptx = ".visible .entry q(.param .u64 .ptr .global .align 4 q_param_0, .param .f32 a, .param .u32 n)"
    assert [(p.ctype, p.pointer) for p in parse_ptx_entry(ptx, "q")] == [("u64", True), ("f32", False), ("u32", False)]


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
    from opsmith.catalog import register_all

    ex = register_all("t_record")
    for e in ex.values():
        text = e.op.record.to_json()
        assert KernelRecord.from_json(text) == e.op.record
    bad = ex["relu"].op.record.to_json().replace('"binary_sha256": "', '"binary_sha256": "0')
    with pytest.raises(ValueError, match="checksum"):
        KernelRecord.from_json(bad)
    rec = ex["add_bias_2d"].op.record
    assert rec.launch.grid[2] == ["lead", "o0", 2] and rec.param_ctypes() == ["ptr", "ptr", "i32", "i32", "ptr"]
