"""Issue 60 (published kernels, round four) on CPU: the forms those kernels are written in, each declared as
published code writes it. Values come from the interpreter check (``round_four_interpreter_check.py``, a process
of its own under TRITON_INTERPRET=1); registration, the fake and the native library's dry run are checked here."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok

triton = pytest.importorskip("triton", reason="the round-four kernels are Triton's (the test extra installs Triton)")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import round_four_kernels as K  # noqa: E402
from differential import Registered, both_dry_runs, tensor_call  # noqa: E402
from interpreted import run_interpreted  # noqa: E402
from round_four_cuda import GLU_SRC  # noqa: E402
from round_four_ops import cuda_ops, glu_reference  # noqa: E402

NS = "t_r4cpu"
NONE = {"t": "none"}


def _with_flag(name, kernel, extras=None):
    return ok.triton_op(f"{NS}::{name}", kernel,
                        inputs=[ok.InputDecl("x", torch.float32), ok.InputDecl("b", torch.float32, optional=True)],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=extras or [ok.Numel("x", name="n"), ok.Present("b", name="HAS_B")],
                        geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), constexprs={"BLOCK": 64})  # fmt: skip


def test_a_present_flag_a_heuristic_also_sets_is_the_flag_where_both_agree():
    """Item 3: unsloth's RoPE reads back the flag its host passes; another kernel derives it from the pointer.
    Both agree with ``Present`` on every call: the heuristic is dropped and the flag compiles each kernel (it
    was refused as "set twice"). Values: the interpreter check."""
    for name in ("add_readback", "add_derived"):
        assert _with_flag(name, getattr(K, name)).record.heuristics == ()


@pytest.mark.slow
def test_the_native_library_compiles_the_flag_as_the_python_path_does():
    for name in ("add_readback", "add_derived"):
        op = _with_flag(f"{name}_native", getattr(K, name))
        calls = [[tensor_call((100,)), tensor_call((100,))], [tensor_call((100,)), NONE]]
        py = both_dry_runs([Registered(op, calls)])
        launches = [py[f"{op.record.op_name}#{k}"]["launches"][0] for k in range(2)]
        assert launches[0]["image"] != launches[1]["image"]  # HAS_B=1 and HAS_B=0: two kernels


def test_a_heuristic_that_can_disagree_with_the_present_flag_is_refused_naming_both():
    with pytest.raises(
        ok.SpecError,
        match=r"heuristics\['HAS_B'\].*set by present\(b\) and by the heuristic, which "
        r"gives \['gt', \['numel', 'i0'\], 4\] where 'b' is given: the two can disagree",
    ):
        _with_flag("by_size", K.add_by_size)
    with pytest.raises(ok.SpecError, match=r"'HAS_B' is set twice: by the extra numel\(x\) and by the heuristic"):
        _with_flag("twice", K.add_derived, [ok.Numel("x", name="n"), ok.Numel("x", name="HAS_B")])


def test_the_interpreter_gives_pytorchs_values_for_every_round_four_form():
    out = run_interpreted("round_four_interpreter_check.py")
    for line in ("present beside heuristic: add_readback", "present beside heuristic: add_derived",
                 "dummy when absent: shifted_rows", "shape expressions: glu_rows, add_flat",
                 "pow2 hint: exact refused with the fix", "pow2 hint: pow2 ran"):  # fmt: skip
        assert line in out, out
    assert "liger jsd: label given and absent" in out or "liger-kernel not installed" in out, out


def _labelled(name, kernel, absent="dummy", dtype=torch.int64):
    return ok.triton_op(f"{NS}::{name}", kernel,
                        inputs=[ok.InputDecl("x", torch.float32, shape=("R", "N")),
                                ok.InputDecl("label", dtype, shape=("R",), optional=True, absent=absent)],
                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                        extras=[ok.Dim("N", name="n_cols"), ok.Present("label", name="HAS_LABEL")],
                        geometry=ok.Grid(grid=("R",)), constexprs={"BLOCK": 64})  # fmt: skip


def test_an_absent_form_that_cannot_be_compiled_or_means_nothing_is_refused_naming_the_fix():
    with pytest.raises(
        ok.SpecError,
        match=r"inputs\[1\].absent.*dtype is a set: the dummy has no pointer type"
        r".*InputDecl\('label', torch.int64, optional=True, absent='dummy'\)",
    ):
        _labelled("set", K.shifted_rows, dtype={torch.int64, torch.int32})
    with pytest.raises(ok.SpecError, match=r"absent.*'null' is not an absent form.*use 'none'"):
        _labelled("word", K.shifted_rows, absent="null")
    with pytest.raises(ok.SpecError, match=r"absent.*'dummy' is the absent form of a required input"):
        ok.triton_op(f"{NS}::required", K.shifted_rows,
                     inputs=[ok.InputDecl("x", torch.float32), ok.InputDecl("label", torch.int64, absent="dummy")],
                     outputs=[ok.OutputDecl("y", ok.SameAs("x"))], geometry=ok.Grid(grid=("size(x, 0)",)),
                     constexprs={"BLOCK": 64, "HAS_LABEL": 1})  # fmt: skip


@pytest.mark.slow
def test_the_dummy_is_the_first_inputs_pointer_on_the_python_path_and_in_the_native_library(cuda):
    """Item 2, every launching path: CUDA C++ (a null pointer before) and Triton (None compiled in before, its
    ``label_ptr += row`` does not compile on None): both dry runs pass x's pointer where label is None, and the
    label's own where given; a Triton kernel is compiled with a pointer in both cases (no None specialization)."""
    cpp = cuda["rows_cpp"]
    tri = _labelled("rows_triton", K.shifted_rows)
    assert ("none", 1) not in tri.variants.spec_layout
    x = tensor_call((4, 40))
    calls = [[x, tensor_call((4,), "int64")], [x, NONE], [x, tensor_call((5,), "int64")]]
    py = both_dry_runs([Registered(cpp, calls), Registered(tri, calls)])
    for op in (cpp, tri):
        name = op.record.op_name
        given, absent = (py[f"{name}#{k}"]["launches"][0]["args"] for k in range(2))
        assert given[:2] == ["in0", "in1"] and absent[:2] == ["in0", "in0"], (given, absent)
        assert "argument 'label': expected shape (R,) where R = 4 from 'x', got shape (5,)" in py[f"{name}#2"]["error"]


@pytest.fixture(scope="module")
def cuda():
    return cuda_ops(NS)


def test_size_expressions_in_input_shapes_bind_and_check_like_names(cuda):
    """Item 4: ``("M", "2 * N")`` binds N = size // 2 and refuses an odd size; ``("B * S", "H")`` is checked
    against B and S from x. The reference runs under the op's guards on CPU; the fake checks alike."""
    glu, flat = cuda["glu"], cuda["flat"]
    x = torch.randn(3, 10)
    torch.testing.assert_close(glu(x), glu_reference(x))
    with pytest.raises(
        ok.InputError,
        match=r"argument 'x': expected shape \(M, 2 \* N\) where N = 3 from 'x', "
        r"got shape \(4, 7\)",
    ):
        glu(torch.randn(4, 7))
    with FakeTensorMode():
        assert glu(torch.empty(4, 10)).shape == (4, 5)
        with pytest.raises(ok.InputError, match=r"expected shape \(M, 2 \* N\)"):
            glu(torch.empty(4, 7))
        assert flat(torch.empty(2, 3, 4), torch.empty(6, 4)).shape == (2, 3, 4)
    with pytest.raises(
        ok.InputError,
        match=r"argument 'w': expected shape \(B \* S, H\) where B = 2 from 'x', "
        r"S = 3 from 'x', H = 4 from 'x', got shape \(5, 4\)",
    ):
        flat(torch.randn(2, 3, 4), torch.randn(5, 4))


@pytest.mark.parametrize(("shape", "match"), [
    (("B * S", "H"), r"'B \* S' reads dimensions no required input's shape binds.*name each of them as an axis"),
    (("N * N",), r"'N \* N' cannot be solved for 'N'.*a \* N \+ b"),
    (("N // 2",), r"'N // 2' cannot be solved for 'N'"),
    (("2 *",), r"'2 \*' does not parse"),
])  # fmt: skip
def test_an_input_size_expression_that_cannot_bind_its_names_is_refused(shape, match):
    with pytest.raises(ok.SpecError, match=match):
        ok.cuda_kernel_op(f"{NS}::bad_{len(shape)}", ok.KernelSpec(
            kernel_source=GLU_SRC, kernel_name="glu", inputs=[ok.InputDecl("x", shape=shape)],
            outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
            geometry=ok.Elementwise()))  # fmt: skip


@pytest.mark.slow
def test_size_expressions_are_checked_alike_by_the_python_path_and_the_native_library(cuda):
    glu, flat = cuda["glu"], cuda["flat"]
    gcalls = [[tensor_call((3, 10))], [tensor_call((4, 7))], [tensor_call((0, 6))], [tensor_call((2, 0))]]
    fcalls = [[tensor_call((2, 3, 4)), tensor_call((6, 4))], [tensor_call((2, 3, 4)), tensor_call((5, 4))]]
    py = both_dry_runs([Registered(glu, gcalls), Registered(flat, fcalls)])
    g = glu.record.op_name
    assert py[f"{g}#0"]["outputs"][0][0] == [3, 5] and "where N = 3 from 'x'" in py[f"{g}#1"]["error"]
    assert not py[f"{flat.record.op_name}#1"]["ok"]


def test_jax_traces_the_same_refusal_and_shapes(cuda):
    jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsmith[jax]'")
    from opsmith.jax import jax_op

    f = jax_op(cuda["glu"], platform="cuda")
    out = jax.eval_shape(f, jax.ShapeDtypeStruct((4, 10), jax.numpy.float32))
    assert out.shape == (4, 5)
    with pytest.raises(ok.InputError) as jx:
        jax.jit(f).trace(jax.ShapeDtypeStruct((4, 7), jax.numpy.float32))
    with pytest.raises(ok.InputError) as py:
        cuda["glu"](torch.randn(4, 7))
    assert str(jx.value) == str(py.value)


def test_the_c_headers_published_cuda_includes_compile_under_nvrtc(cuda):
    """Item 6: <float.h>, <math.h>, <cstdint>, <climits> and the rest, which NVRTC does not ship ("cannot open
    source file"), each checked at compile time against its C value (round_four_cuda.STD_HEADERS); llm.c's style of
    classifier (FLT_MAX with cooperative groups) compiles unchanged. NVRTC runs here without a GPU; values:
    tests/test_gpu_round_four.py."""
    assert cuda["every_header"].record.binary and cuda["fused_classifier"].record.binary


def test_a_triton_input_without_a_dtype_takes_floats_only_unless_it_says_any():
    """Item 8: the README's ``scale`` took an int32 tensor and truncated its result silently; floats only now,
    refused before launch on the Python path and the fake alike; ``dtype="any"`` keeps every dtype."""
    from opsmith.declare.resolve import FLOATS

    def reg(name, dtype):
        return ok.triton_op(f"{NS}::{name}", K.row_sums, inputs=[ok.InputDecl("x", dtype=dtype, shape=("R", "N"))],
                            outputs=[ok.OutputDecl("y", ("R",))],
                            extras=[ok.Dim("N", name="n"), ok.DimSize("x", -1, name="BLOCK", bucket="pow2")],
                            geometry=ok.Grid(grid=("R",)))  # fmt: skip

    floats, anything = reg("floats", None), reg("anything", "any")
    assert floats.record.tensor_inputs[0].dtypes == FLOATS and anything.record.tensor_inputs[0].dtypes == ()
    with FakeTensorMode():
        assert floats(torch.empty(3, 8, dtype=torch.bfloat16)).shape == (3,)
        assert anything(torch.empty(3, 8, dtype=torch.int32)).shape == (3,)
        for dt in (torch.int32, torch.bool):
            with pytest.raises(ok.InputError, match=rf"argument 'x': expected one of the dtypes .*got {dt}"):
                floats(torch.empty(3, 8, dtype=dt))


def test_the_sweep_registers_and_runs_in_the_interpreter():
    """Issue 60's sweep (tests/sweep_ops.py): every kernel registers; the Triton ones run against PyTorch in the
    interpreter on each check shape, but the two whose libdevice.rsqrt the interpreter returns None for (checked to
    fail that way only); the CUDA C++ ones run on the device (test_gpu_sweep.py)."""
    from sweep_ops import SWEEP

    stdout = run_interpreted("sweep_interpreter_check.py")
    said = dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line and line.split(": ", 1)[0] in SWEEP)
    assert set(said) == set(SWEEP), stdout
    installed = {"liger": importlib.util.find_spec("liger_kernel") is not None,
                 "fla": importlib.util.find_spec("fla") is not None, "": True}  # fmt: skip
    for name, what in said.items():
        if not installed[SWEEP[name].package]:
            assert what.startswith("skipped"), (name, what)
        elif name in ("liger_poly_norm", "liger_modulated_rms_norm"):
            assert what.startswith("interpreter limit"), (name, what)
        elif name.startswith("llmc_"):
            assert what.startswith("registered (cuda"), (name, what)
        else:
            assert what.startswith("ran"), (name, what)


@pytest.mark.slow
def test_opsmith_check_over_the_sweep_in_the_interpreter():
    """Every row of opsmith check over the sweep's Triton kernels on CPU: no FAIL that sweep_check.EXPLAINED does not
    explain."""
    from interpreted import run_interpreted_args

    stdout = run_interpreted_args("sweep_check.py", ["--examples", "3"], timeout=2400)
    assert "unexplained FAIL" not in stdout, stdout[-5000:]
    assert "liger_softmax: 7 passed, 0 failed" in stdout or "liger_softmax: skipped" in stdout, stdout[-3000:]
