"""Triton launch parity (issue 49, item 1), on CPU: int scalars as Triton's launcher passes them (i32 while the
value fits, i64 past 32 bits, each its own compiled kernel), a constexpr dtype chosen per call from an input's
dtype, and dynamic shared memory written as a size expression. The kernels compile for sm_90 here (Triton needs
no GPU for that); the Python path's dry run and a native library's dry run must record the same launches; the
interpreter runs the values against Triton's own launch."""

from __future__ import annotations

import pytest
import torch

import opsmith as ok

triton = pytest.importorskip("triton", reason="Triton kernels (the test extra installs Triton)")

import triton.language as tl  # noqa: E402
from differential import Registered, both_dry_runs, tensor_call  # noqa: E402
from interpreted import run_interpreted  # noqa: E402
from styled_kernels import register_rms_norm_rows, register_seeded_dropout  # noqa: E402

NS = "t_parity"
SEEDS = [5, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 1_099_511_640_121, 2**63 - 1, -(2**63)]


@triton.jit
def cast_kernel(x_ptr, b_ptr, y_ptr, X_dtype: tl.constexpr):
    tl.store(y_ptr, tl.load(x_ptr).to(X_dtype))


@pytest.fixture(scope="module")
def dropout():
    return register_seeded_dropout(NS)


def test_a_seed_past_32_bits_compiles_an_i64_kernel_of_its_own(dropout):
    """The seed's width is part of the call's specialization: i32 while it fits, i64 past it, as Triton's
    ``specialize_impl``; the compiled kernels differ and take a 4- and an 8-byte parameter (build() checks the
    PTX entry's sizes against the signature)."""
    src = dropout.variants.sources[0]
    layout = dropout.variants.spec_layout
    seed = src.runtime_params.index("seed")
    assert ("wide", seed) in layout
    narrow = tuple(torch.float32 if k == "dtype" else k != "wide" for k, _ in layout)
    wide = tuple(torch.float32 if k == "dtype" else True for k, _ in layout)
    assert src._types(narrow)[0]["seed"] == "i32" and src._types(wide)[0]["seed"] == "i64"
    a, b = src.build("sm_90", narrow), src.build("sm_90", wide)
    assert a.data != b.data


@pytest.mark.slow
def test_python_and_native_dry_runs_launch_the_same_kernel_for_every_seed(dropout):
    """Each seed through the eager code's dry run and a native library's (built from the same record, run in a
    process without opsmith): the same kernel image and the same argument bytes per seed (``both_dry_runs``
    compares every launch), that image takes the seed as i32 while it fits and as i64 past it, and the seed's
    argument slot holds the seed itself. How many images Triton makes is Triton's business (3.9 specializes a
    seed divisible by 16, -2**31 among them); which width each seed is launched with is opsmith's."""
    from opsmith.torchlib.launch_code import fnv1a64

    calls = [[tensor_call((3000,)), {"t": "scalar", "v": 0.25}, {"t": "scalar", "v": s}] for s in SEEDS]
    py = both_dry_runs([Registered(dropout, calls)])
    src = dropout.variants.sources[0]
    width = {fnv1a64(kd.binary_for(dropout.record.arch).data): src._types(spec)[0]["seed"]
             for (_, spec), kd in list(dropout.variants.kernels.items())}  # fmt: skip
    at = [p.name for p in dropout.record.params].index("seed")
    for j, seed in enumerate(SEEDS):
        launch = py[f"{NS}::seeded_dropout#{j}"]["launches"][0]
        fits = -(2**31) <= seed < 2**31
        assert width[launch["image"]] == ("i32" if fits else "i64"), (seed, width)
        slot = bytes.fromhex(launch["args"][at])
        assert int.from_bytes(slot[: 4 if fits else 8], "little", signed=True) == seed, (seed, launch["args"])


def test_a_shipped_library_holds_both_widths(dropout, tmp_path):
    """``opsmith build`` serves a process without Python: both widths are compiled in ahead."""
    from opsmith.native.build import _specs

    specs, _ = _specs(dropout, [torch.float32])
    wide = [k for k, (kind, _) in enumerate(dropout.variants.spec_layout) if kind == "wide"]
    assert {s[wide[0]] for s in specs} == {False, True}


def test_the_interpreter_runs_64_bit_seeds_and_per_call_dtypes_as_tritons_own_launch():
    out = run_interpreted("launch_parity_interpreter_check.py")
    assert "checked 8 seeds" in out and "checked 5 dtypes" in out and "checked DyT with and without beta" in out


def test_a_seed_outside_int64_is_refused_naming_the_argument(dropout):
    """What no PyTorch int holds (Triton's u64) is refused before the launch, on the eager code's path."""
    from opsmith.torchlib.eager import make_dry_run

    dry, _ = make_dry_run(dropout)
    with pytest.raises(
        ok.InputError,
        match=r"argument 'seed': expected a value in \[-9223372036854775808, "
        r"9223372036854775807\] for the kernel's i64 parameter, got 9223372036854775808",
    ):
        dry(torch.randn(8), 0.5, 2**63)


@pytest.mark.slow
def test_a_dtype_constexpr_takes_each_calls_input_dtype_on_both_paths():
    """``constexprs={"X_dtype": DtypeOf("x")}``: a kernel per dtype, compiled with that dtype as the constexpr,
    and the native library launches the same kernels."""
    op = register_rms_norm_rows(NS)
    calls = [[tensor_call((4, 100), dt), tensor_call((100,), dt), {"t": "scalar", "v": 1e-6}]
             for dt in ("float32", "bfloat16", "float16")]  # fmt: skip
    py = both_dry_runs([Registered(op, calls)])
    assert len({py[f"{NS}::rms_norm_rows#{j}"]["launches"][0]["image"] for j in range(3)}) == 3
    src = op.variants.sources[0]
    by_dtype = {spec[0]: src.static_values(spec)["X_dtype"] for _, spec in op.variants.kernels}
    assert by_dtype == {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


@pytest.mark.parametrize("inputs, name, why", [
    ([ok.InputDecl("x")], "y", r"DtypeOf\('y'\) names no tensor input \(the tensor inputs: \['x', 'b'\]\)"),
    ([ok.InputDecl("x"), ok.InputDecl("b", optional=True)], "b",
     r"DtypeOf\('b'\) names no required tensor input \(the tensor inputs: \['x'\]\)"),
])  # fmt: skip
def test_a_dtype_constexpr_of_no_input_every_call_passes_is_refused_at_registration(inputs, name, why):
    if len(inputs) == 1:
        inputs = [*inputs, ok.InputDecl("b")]
    with pytest.raises(ok.SpecError, match=r"constexprs\['X_dtype'\]: " + why + r"\. Fix: name a tensor input"):
        ok.triton_op(f"{NS}::bad_dtype_of_{name}", cast_kernel, inputs=inputs, outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                     geometry=ok.Grid(grid=(1,)), constexprs={"X_dtype": ok.DtypeOf(name)})  # fmt: skip


def test_a_changed_dtype_constexpr_is_a_changed_declaration():
    decl = dict(inputs=[ok.InputDecl("x"), ok.InputDecl("b")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                geometry=ok.Grid(grid=(1,)))  # fmt: skip
    ok.triton_op(f"{NS}::redeclared", cast_kernel, **decl, constexprs={"X_dtype": ok.DtypeOf("x")})
    with pytest.raises(ok.RegistrationError, match="what differs: source"):
        ok.triton_op(f"{NS}::redeclared", cast_kernel, **decl, constexprs={"X_dtype": ok.DtypeOf("b")})
