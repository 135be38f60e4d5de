"""Regression tests for the third adversarial review (issue 22), on CPU: each op runs through the Python path
(the eager code's dry run on CPU tensors, the fake implementation on meta and fake tensors) and through a
native library built from the same record with ``-DOPSMITH_DRY_RUN``, loaded in a process without opsmith.
Each test names the item it pins down."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys

import pytest
import torch
from differential import Gen, native_outcomes, python_outcomes
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok
from opsmith import InputDecl as I
from opsmith import OutputDecl as O
from opsmith.plan.guards import bf16_bits, f16_bits, round_bits

NS = "t_hard3"
HALF = 1 + 2**-11 + 2**-40  # fp16: 0x3c01 rounded once, 0x3c00 through float32
BF16 = 1 + 2**-8 + 2**-40  # bf16: 0x3f81 rounded once, 0x3f80 through float32


def _t(shape, dtype="float32", device="cpu", view="plain"):
    return {"t": "tensor", "shape": list(shape), "dtype": dtype, "device": device, "view": view, "seed": 0}


def _s(v):
    return {"t": "scalar", "v": v}


def _op(name: str, src: str, kernel: str, backward: ok.Backward | None = None, **kw) -> ok.Op:
    decl = {"inputs": [I("x")], "outputs": [O("y", ok.SameAs("x"))], "extras": [ok.Numel("x")],
            "geometry": ok.Elementwise()}  # fmt: skip
    decl.update(kw)
    return ok.cuda_kernel_op(f"{NS}::{name}" if "::" not in name else name,
                             ok.KernelSpec(kernel_source=src, kernel_name=kernel, **decl), backward=backward)  # fmt: skip


def _ops() -> dict[str, tuple[ok.Op, list]]:
    """Each regression's op and its calls."""
    fp = '#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nextern "C" __global__ '
    out: dict[str, tuple[ok.Op, list]] = {}
    out["half"] = (_op("half", fp + "void k(const float* x, __half a, __nv_bfloat16 b, float f, int n, float* y) {}",
                       "k", inputs=[I("x"), ok.ScalarInput("a", float), ok.ScalarInput("b", float),
                                    ok.ScalarInput("f", float)]),
                   [[_t((4,)), _s(HALF), _s(BF16), _s(HALF)], [_t((4,)), _s(-65504.0), _s(float("nan")), _s(-0.0)]])  # fmt: skip
    grid = ok.Grid(grid=("size(x, 0) * 1073741824",), block=(32,))
    out["big_grid"] = (_op("big_grid", fp + "void k(const float* x, int n, float* y) {}", "k", geometry=grid,
                           index_dtype="int64"), [[_t((8,))], [_t((1,))]])  # fmt: skip
    floor = ok.Grid(grid=("(size(x, 0) - 10) // 4 + 5", "cdiv(size(x, 0) - 10, 4) + 5"), block=(32,))
    out["floor"] = (_op("floor", fp + "void k(const float* x, int n, float* y) {}", "k", geometry=floor),
                    [[_t((3,))], [_t((11,))], [_t((30,))]])  # fmt: skip
    rows = ok.Grid(grid=("numel(x) // size(x, -1)",), block=(32,))
    out["rows"] = (_op("rows", fp + "void k(const float* x, int n, float* y) {}", "k", geometry=rows),
                   [[_t((4, 0))], [_t((4, 0), device="meta")], [_t((4, 3))], [_t((0, 3), device="meta")]])  # fmt: skip
    out["grad_names"] = (_op("grad_names", fp + "void k(const float* y, const float* grad_y, int n, float* dx) {}",
                             "k", inputs=[I("y"), I("grad_y")], outputs=[O("dx", ok.SameAs("grad_y"))],
                             extras=[ok.Numel("grad_y", name="n")],
                             geometry=ok.Grid(grid=("cdiv(numel(grad_y), 128)",), block=(128,))),
                         [[_t((5,)), _t((300,))]])  # fmt: skip
    names = ["c", "x0", "a0", "dev", "op", "key"]
    src = fp + f"void k({', '.join(f'const float* p{k}' for k in range(6))}, double inf, double nan, float* y) {{}}"
    out["locals"] = (_op("locals", src, "k", inputs=[I(n) for n in names], outputs=[O("new", ok.SameAs("c"))],
                         extras=[ok.Const(math.inf), ok.Const(math.nan)]),
                     [[_t((3,))] * 6, [_t((3,)), _t((3,)), _t((3,)), _t((4,)), _t((3,)), _t((3,))]])  # fmt: skip
    out["u64"] = (_op("u64", fp + "void k(const float* x, unsigned long long c, int n, float* y) {}", "k",
                      inputs=[I("x"), ok.ScalarInput("c", int)]), [[_t((4,)), _s(-5)], [_t((4,)), _s(2**63 - 1)]])  # fmt: skip
    out["like"] = (_op("like", fp + "void k(const float* x, int n, float* y) {}", "k"),
                   [[_t((1, 5), view="slice")], [_t((3, 1), view="slice")]])  # fmt: skip
    sm = ok.Grid(grid=("max(size(x, 0), sm_count * 4)",), block=(1024,))  # its 32-bit extent is checked on meta
    out["sm"] = (_op("sm", fp + "void k(const float* x, int n, float* y) {}", "k", geometry=sm),
                 [[_t((2**20,), device="meta")], [_t((9,))], [_t((2**22,), device="meta")]])  # fmt: skip
    for name in ("t_hard3a__b::c", "t_hard3a::b__c"):  # one C++ identifier under the old mangling
        out[name] = (_op(name, fp + "void k(const float* x, int n, float* y) {}", "k",
                         geometry=ok.Elementwise(block=(128 if "__b" in name else 64,))), [[_t((300,))]])  # fmt: skip
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(the ops, the Python path's outcomes, the native library's outcomes), case ids ``<op>#<call>``."""
    ops = _ops()
    gens = [Gen(op.record.op_name, None, "", op, calls=calls) for op, calls in ops.values()]  # type: ignore[arg-type]
    py, cases = python_outcomes(gens)
    nat = native_outcomes(gens, cases, tmp_path_factory.mktemp("hard3"))
    return ops, py, nat


def _case(both, key: str, j: int) -> tuple[dict, dict]:
    ops, py, nat = both
    cid = f"{ops[key][0].record.op_name}#{j}"
    return py[cid], nat[cid]


def _arg(out: dict, k: int) -> bytes:
    return bytes.fromhex(out["launches"][0]["args"][k])


@pytest.mark.slow
def test_1_half_and_bf16_scalars_round_once_from_the_double_on_both_paths(both):
    py, nat = _case(both, "half", 0)
    assert py == nat
    assert _arg(py, 1)[:2] == struct.pack("<H", 0x3C01) and _arg(py, 2)[:2] == struct.pack("<H", 0x3F81)
    assert _arg(py, 3)[:4] == struct.pack("<f", HALF)
    py, nat = _case(both, "half", 1)
    assert py == nat and _arg(py, 1)[:2] == struct.pack("<H", 0xFBFF) and _arg(py, 3)[:4] == struct.pack("<f", -0.0)


def _ties() -> st.SearchStrategy[float]:
    """Values exactly half-way between two neighbours of fp16 or bf16 (the ones ties-to-even decides)."""

    def tie(fmt: str, bits: int) -> float:
        frac, emax = (10, 15) if fmt == "f16" else (7, 127)
        e = (bits >> frac) & ((1 << ((emax + 1).bit_length())) - 1)
        m = bits & ((1 << frac) - 1)
        if e == 0 or e == (1 << ((emax + 1).bit_length())) - 1:
            return 1.0 + 2.0 ** -(frac + 1)
        value = (1 + m / 2**frac) * 2.0 ** (e - emax)
        return value + 2.0 ** (e - emax - frac - 1)  # half a unit in the last place above it

    return st.builds(tie, st.sampled_from(["f16", "bf16"]), st.integers(0, 0x7FFF)).map(lambda v: v)


@settings(max_examples=examples(100, 1000), deadline=None)
@given(v=st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), _ties()))
def test_1_round_bits_is_the_exact_round_to_nearest_even(v):
    """Against exact rational arithmetic (and struct's 'e', CPython's own fp16 packing)."""
    for frac, emin, emax in ((10, -14, 15), (7, -126, 127)):
        assert round_bits(v, frac, emin, emax) == _exact(v, frac, emin, emax), (v, frac)
    if abs(v) <= 65504:
        assert f16_bits(v) == struct.unpack("<H", struct.pack("<e", v))[0]


@pytest.mark.parametrize(("v", "half", "bf16"), [(1 + 2**-11, 0x3C00, 0x3F80), (1 + 3 * 2**-11, 0x3C02, 0x3F80),
                                                 (1 + 2**-8, 0x3C04, 0x3F80), (1 + 3 * 2**-8, 0x3C0C, 0x3F82)])  # fmt: skip
def test_1_ties_go_to_the_even_neighbour(v, half, bf16):
    assert (f16_bits(v), bf16_bits(v)) == (half, bf16)


def _exact(v: float, frac: int, emin: int, emax: int) -> int:
    """The reference: find the binade, round |v| / ulp to the nearest integer, ties to even, in fractions."""
    from fractions import Fraction

    eb = (emax + 1).bit_length()
    inf = ((1 << eb) - 1) << frac
    sign = (1 << (frac + eb)) if math.copysign(1.0, v) < 0 else 0
    if math.isnan(v):
        return sign | inf | (1 << (frac - 1))
    if math.isinf(v):
        return sign | inf
    a = abs(Fraction(v))
    e = emin
    while a >= Fraction(2) ** (e + 1):
        e += 1
    q = a / Fraction(2) ** (e - frac)
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2):
        n += 1
    if n == 2 ** (frac + 1):
        e, n = e + 1, n // 2
    if e > emax:
        return sign | inf
    if n < 2**frac:
        return sign | n
    return sign | ((e + emax) << frac) | (n - 2**frac)


def test_1_bf16_bits_of_torch_would_round_twice():
    """Why the rounding is ours: torch converts a double to bf16 through float32."""
    through_float = torch.tensor(BF16, dtype=torch.float64).to(torch.bfloat16).view(torch.int16).item() & 0xFFFF
    assert (through_float, bf16_bits(BF16)) == (0x3F80, 0x3F81)


@pytest.mark.slow
def test_2_a_strided_view_spanning_past_2_31_is_refused_by_a_32_bit_kernel(tmp_path):
    """numel 2^30 but ``row * stride + col`` reaches 2^32: eager (fake CUDA), fake, and the native Meta kernel."""
    src = 'extern "C" __global__ void k(const float* x, int s, int n, float* y) {}'
    op = _op(
        "span",
        src,
        "k",
        inputs=[I("x", shape=("M", "N"))],
        extras=[ok.Stride("x", 0), ok.DimSize("x", -1)],
        geometry=ok.Elementwise(),
    )
    want = (r"argument 'x': expected a view spanning at most 2147483647 elements \(the kernel declares 32-bit "
            r"indexing and addresses it with its strides\), got shape \(67108864, 16\) with strides \(64, 1\), "
            r"spanning 4294967248 elements")  # fmt: skip
    with FakeTensorMode():
        big = torch.empty_strided((2**26, 16), (64, 1), device="cuda")  # x[:, :16] of a (2^26, 64) tensor
        for call in (op, op.eager):
            with pytest.raises(ok.InputError, match=want):
                call(big)
        assert op(torch.empty_strided((2**20, 16), (64, 1), device="cuda")).shape == (2**20, 16)  # spans less
    with pytest.raises(ok.InputError, match=want):
        op(torch.empty(2**26, 64, device="meta")[:, :16])
    from opsmith import native

    native.build([op], tmp_path / "span.so", dry_run=True)
    code = (f"import torch; torch.ops.load_library({str(tmp_path / 'span.so')!r})\n"
            "try:\n    torch.ops.t_hard3.span(torch.empty(2**26, 64, device='meta')[:, :16])\n"
            "except ValueError as e:\n    print(str(e).splitlines()[0])")  # fmt: skip
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300).stdout.strip()
    assert got.startswith("t_hard3::span: argument 'x': expected a view spanning at most 2147483647"), got


@pytest.mark.slow
def test_scalar_ranges_outputs_and_sm_count_agree(both):
    """A u64 scalar's range is the C type's within int64 (a schema int) on both paths; an output allocated like
    a view with a size-1 axis has the same strides on both; sm_count reads the same on meta tensors."""
    py, nat = _case(both, "u64", 0)
    assert py == nat and py["error"].endswith("expected a value in [0, 9223372036854775807] for the kernel's u64 "
                                              "parameter, got -5.")  # fmt: skip
    assert _case(both, "u64", 1)[0] == _case(both, "u64", 1)[1]
    for j in range(2):
        py, nat = _case(both, "like", j)
        assert py == nat and py["ok"], (py, nat)
    py, nat = _case(both, "sm", 0)
    assert py == nat and py["outputs"] == [[[2**20], "torch.float32", [1]]]
    py, nat = _case(both, "sm", 1)
    assert py == nat and py["launches"][0]["grid"] == [528, 1, 1]  # 132 SMs without a GPU, on both paths
    py, nat = _case(both, "sm", 2)
    assert py == nat and "expected max(size(x, 0), sm_count * 4) * 1024 at most 2147483648" in py["error"]


@pytest.mark.slow
def test_4_a_grid_past_2_32_blocks_is_refused_not_wrapped(both):
    py, nat = _case(both, "big_grid", 0)
    assert py == nat == {"ok": False, "error": "ValueError: t_hard3::big_grid: argument 'x': expected a launch of 1 to "
                         "2147483647 blocks along x (size(x, 0) * 1073741824), got 8589934592. Fix: launch fewer blocks "
                         "per axis (a larger block, or a persistent grid such as min(..., sm_count * 8)), or pass "
                         "inputs the grid expression covers."}  # fmt: skip
    py, nat = _case(both, "big_grid", 1)
    assert py == nat and py["launches"][0]["grid"] == [1073741824, 1, 1]


def test_4_division_floors_on_both_paths(both):
    """``//`` floors and ``cdiv`` is the ceiling for negative intermediates too (C++ ``/`` truncates)."""
    for j, n in enumerate((3, 11, 30)):
        py, nat = _case(both, "floor", j)
        want = [(n - 10) // 4 + 5, -((10 - n) // 4) + 5, 1]
        assert py == nat and py["launches"][0]["grid"] == want, (n, py, nat)


def test_8_an_empty_input_returns_empty_outputs_on_every_path(both):
    """``numel(x) // size(x, -1)`` on a (4, 0) input: no ZeroDivisionError (fake) and no SIGFPE (native Meta)."""
    for j, shape in enumerate([(4, 0), (4, 0), (4, 3), (0, 3)]):
        py, nat = _case(both, "rows", j)
        assert py == nat and py["ok"] and py["outputs"][0][0] == list(shape), (py, nat)
        assert py.get("launches", []) == ([] if 0 in shape else py["launches"])


def test_9_a_name_inside_another_is_printed_from_the_tree(both):
    py, nat = _case(both, "grad_names", 0)
    assert py == nat and py["ok"] and py["launches"][0]["grid"] == [3, 1, 1]
    assert py["launches"][0]["args"][2] == struct.pack("<i", 300).hex() + "00000000"  # numel(grad_y), not y's


def test_10_names_like_generated_locals_and_float_constants_build_and_agree(both):
    for j in range(2):
        py, nat = _case(both, "locals", j)
        assert py == nat, (py, nat)
    py, _ = _case(both, "locals", 0)
    assert _arg(py, 6) == struct.pack("<d", math.inf) and math.isnan(struct.unpack("<d", _arg(py, 7))[0])
    assert "failed" not in _case(both, "locals", 1)[0].get("error", "")
    a = _case(both, "t_hard3a__b::c", 0)
    b = _case(both, "t_hard3a::b__c", 0)
    assert a[0] == a[1] and b[0] == b[1] and a[0]["launches"][0]["block"] != b[0]["launches"][0]["block"]


def test_10_a_constant_that_does_not_fit_its_parameter_is_refused_at_registration():
    src = 'extern "C" __global__ void k(const float* x, unsigned int c, float f, int n, float* y) {}'
    with pytest.raises(ok.SpecError, match=r"extras\[0\].value: -3 does not fit the kernel's u32 parameter"):
        _op("bad_const", src, "k", extras=[ok.Const(-3), ok.Const(1.0), ok.Numel("x")])
    with pytest.raises(ok.SpecError, match=r"extras\[1\].value: 1e\+300 is beyond a float's range"):
        _op("bad_const2", src, "k", extras=[ok.Const(3), ok.Const(1e300), ok.Numel("x")])


def test_11_grid_threads_past_2_31_are_refused_eagerly_as_while_tracing():
    """The same limit and message on every path, naming the argument (not 'x.shape[0] * 1024')."""
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    op = _op("wide_grid", src, "k", geometry=ok.Grid(grid=("size(x, 0)",), block=(1024,)))
    want = (r"t_hard3::wide_grid: argument 'x': expected size\(x, 0\) \* 1024 at most 2147483648: the launch covers "
            r"it with more than 2\^31 threads")  # fmt: skip
    with FakeTensorMode():
        x = torch.empty(2**21 + 1, device="cuda")
        for call in (op, op.eager):
            with pytest.raises(ok.InputError, match=want):
                call(x)
        assert op(torch.empty(2**21, device="cuda")).shape == (2**21,)  # 2^31 threads: their top index fits


def test_5_backward_program_names_are_identifiers():
    """A name with a newline would have been written into the C++ library as code."""
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    fwd = _op("bw_fwd", src, "k")
    bad = ok.Backward(fn=(ok.Buffer("p\n} evil(); //", like="x"),), args=("grad_y",), grads=("x",),
                      returns=("p\n} evil(); //",))  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"backward.fn\[0\].name: 'p\\n} evil\(\); //' is not a usable argument"):
        _op("bw_bad", src, "k", backward=bad)
    step_out = ok.Backward(fn=(ok.Step(fwd, ("grad_y",), ("d x",)),), args=("grad_y",), grads=("x",),
                           returns=("d x",))  # fmt: skip
    with pytest.raises(ok.SpecError, match=r"backward.fn\[0\].outputs\[0\]: 'd x' is not a usable argument"):
        _op("bw_bad2", src, "k", backward=step_out)


def test_5_comments_and_strings_of_generated_cpp_cannot_end_early():
    from opsmith.native.cpp import comment, cpp_str

    assert "\n" not in comment("a\n} evil(); /* x */") and "*/" not in comment("*/")
    lit = cpp_str('a"b\\c\nd?é')
    assert lit == '"a\\"b\\\\c\\nd\\x3f""\\xc3""\\xa9"""' and "\n" not in lit


def test_dry_run_records_the_launch_of_a_shipped_op():
    """A launch's size asserted on CPU: RMSNorm's persistent backward launches min(rows, sm_count * MINB) blocks."""
    from opsmith.ops.rmsnorm import rmsnorm_ops
    from opsmith.torchlib.eager import make_dry_run

    _, bwd = rmsnorm_ops("cuda", ns="t_hard3_rms")
    run, _ = make_dry_run(bwd)
    for rows in (3, 100000):
        x = torch.randn(rows, 64)
        partial = torch.empty(min(rows, 132 * 8), 64)
        run(x, x, torch.randn(64), 1e-6, partial)
        launch = run.launches[-1]
        config = bwd.record.configs[launch["config"]]["params"]
        assert launch["grid"][0] == max(1, min(partial.shape[0], 132 * config["MINB"])), (rows, launch)
        assert launch["grid"][0] == (3 if rows == 3 else 264)  # config 0 (the default): MINB 2
    assert json.dumps(run.launches)  # plain data


# -- boundaries, tested at the edge ------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "usable"), [(0o700, True), (0o750, True), (0o720, False), (0o702, False),
                                              (0o710, True), (0o770, False)])  # fmt: skip
def test_a_cache_directory_is_refused_exactly_when_group_or_others_can_write(tmp_path, mode, usable):
    import os
    import warnings

    from opsmith.cache import DiskCache

    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "ns").mkdir()
    os.chmod(root / "ns", mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert DiskCache(root, "ns").usable(create=False) is usable


def test_a_stored_winner_must_name_one_of_the_configs():
    from opsmith.tuning.autotune import Tuner

    configs = [{"params": {"B": b}} for b in (1, 2, 3)]
    t = Tuner(f"{NS}::edge", {"op": "edge"}, configs, 0)
    assert t.winner_of({"winner": 2, "config": configs[2]}) == 2  # the last one
    assert t.winner_of({"winner": 3, "config": configs[2]}) is None  # one past the configs
    assert t.winner_of({"winner": -1, "config": configs[2]}) is None
    assert t.winner_of({"winner": True, "config": configs[1]}) is None  # a bool is not an index
    assert t.winner_of({"winner": 1, "config": configs[2]}) is None  # another config's entry


def test_4_tuning_where_every_config_refuses_the_inputs_raises_the_defaults_refusal():
    """What a native library without a decision raises (it launches the default): found on the H100, where the
    Python path said "no tuning config could run" and the native path named the grid."""
    from opsmith.errors import InputError
    from opsmith.tuning.autotune import Tuner

    t = Tuner(f"{NS}::all_refused", {"op": "all_refused"}, [{"params": {"T": 1}}, {"params": {"T": 2}}], 1,
              timer=lambda run, restore: [1.0])  # fmt: skip

    def run(c):
        raise InputError(f"{NS}::all_refused", "x", f"config {c}'s grid in range", "0")

    with pytest.raises(InputError, match="config 1's grid"):
        t.decide(("k",), None, run)
