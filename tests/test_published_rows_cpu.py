"""Published row kernels, round two (issue 40, items 3, 4 and 7), on CPU: activations of any rank given to a
kernel that takes one row stride (``("*R", "N")`` with ``Stride(x, -2)``), a heuristic over a declared
constexpr (unsloth's ``GEMMA``), fake tracing, the interpreter against PyTorch, and the Python and native dry
runs making the same launches (a row-sliced input passed as it is, an input whose leading strides do not
flatten copied first), on every path."""

import sys
from pathlib import Path

import pytest
import torch
from interpreted import run_interpreted
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok

triton = pytest.importorskip("triton")

from examples.catalog.rows import register_rows  # noqa: E402

NS = "t_rowscpu"
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def ops():
    return register_rows(NS)


def test_a_group_before_the_strided_axis_registers_and_a_leading_axis_does_not():
    """("*R", "N") with the stride of axis -2 registers (the group flattens into it); a stride counted from the
    front of a tensor whose rank the group leaves open is still refused, naming the fix."""
    from examples.catalog.kernels.rows_triton import rms_rows_forward

    def reg(name, axis):
        return ok.triton_op(f"{NS}::{name}", rms_rows_forward,
                            inputs=[ok.InputDecl("X", shape=("*R", "N")), ok.InputDecl("W", shape=("N",)),
                                    ok.ScalarInput("eps", float)],
                            outputs=[ok.OutputDecl("Y", ok.SameAs("X")), ok.OutputDecl("RSTD", shape=("*R",), dtype=torch.float32)],
                            extras=[ok.Stride("Y", -2, name="Y_row_stride"), ok.Stride("X", axis, name="X_row_stride"),
                                    ok.Dim("N", name="n_cols"), ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
                            geometry=ok.Reduction(reduce_dims=(-1,)), constexprs={"GEMMA": False})  # fmt: skip

    assert reg("group_ok", -2).record.op_name.endswith("group_ok")
    with pytest.raises(ok.SpecError, match=r"its rank is not declared.*strides counted from the end"):
        reg("group_front", 0)


def test_fake_tracing_takes_every_rank(ops):
    with FakeTensorMode():
        for shape in ((7, 96), (2, 3, 96), (2, 2, 2, 96)):
            y, rstd = ops["forward"](torch.empty(shape), torch.empty(96), 1e-6)
            assert tuple(y.shape) == shape and tuple(rstd.shape) == shape[:-1] and rstd.dtype == torch.float32


def test_a_heuristic_reads_the_declared_constexpr_it_then_sets(ops):
    """unsloth's backward: @triton.heuristics({"GEMMA": lambda args: bool(args["GEMMA"])}) with
    constexprs={"GEMMA": ...}: the heuristic sees the declared value, as Triton's sees the caller's keyword."""
    for tag, want in (("", False), ("_gemma", True)):
        (h,) = ops[f"backward{tag}"].record.heuristics
        assert h["name"] == "GEMMA" and h["exprs"] == [want]


def test_the_interpreter_runs_the_row_kernels_on_every_rank():
    stdout = run_interpreted("rows_interpreter_check.py")
    assert "checked 21 cases" in stdout


@pytest.mark.slow
def test_python_and_native_dry_runs_flatten_and_copy_alike(ops):
    """The differential harness over ranks 2-4: a row-sliced input passes as it is (its row stride in the
    launch), an input broadcast along its first axis (a stride 0 no row stride describes) is copied first;
    the generated Python and the native library record the same launches."""
    sys.path.insert(0, str(HERE))
    from differential import Registered as G
    from differential import both_dry_runs, tensor_call

    def t(shape, view="plain"):
        return tensor_call(shape, view=view)

    calls = [[t(s, v), t(s[-1:]), {"t": "scalar", "v": 1e-6}]
             for s in ((5, 96), (2, 3, 96), (2, 2, 2, 100)) for v in ("plain", "slice", "expand")]  # fmt: skip
    gens = [G(ops["forward"], calls), G(ops["forward_gemma"], calls[:3])]
    py = both_dry_runs(gens)
    assert all(r["ok"] for r in py.values()), py
    kinds = {}
    for k, r in py.items():
        (launch,) = r["launches"]
        kinds[k] = launch["args"][2]  # X: "i0" as passed, "fresh" when copied
    # (5, 96) broadcast has row stride 0, which the kernel reads as it is; at ranks 3 and 4 the broadcast first
    # axis does not flatten into the row stride, so that input alone is copied
    fwd = [kinds[f"{NS}::rms_rows_forward#{k}"] for k in range(9)]
    assert fwd == ["in0"] * 5 + ["fresh"] + ["in0"] * 2 + ["fresh"], kinds


@pytest.mark.slow
def test_heuristics_choose_the_block_and_the_warps_per_call_on_both_paths(ops):
    """The layer-norm tutorial's host choices as stacked heuristics: BLOCK_SIZE = min(8192, next_power_of_2(N))
    (a cap; longer rows loop) then num_warps = min(max(BLOCK_SIZE // 256, 1), 8), a launch option compiled per
    value. The Python and native dry runs launch 2, 4 and 8 warps for rows of 300, 1,000 and 10,000."""
    sys.path.insert(0, str(HERE))
    from differential import Registered, both_dry_runs, tensor_call

    op = ops["layer_norm"]
    assert [h["name"] for h in op.record.heuristics] == ["BLOCK_SIZE", "num_warps"]
    shapes = ((2, 3, 300), (4, 1000), (2, 10000))
    calls = [[tensor_call(s), tensor_call(s[-1:]), tensor_call(s[-1:]), {"t": "scalar", "v": 1e-5}] for s in shapes]
    gens = [Registered(op, calls)]
    py = both_dry_runs(gens)
    blocks = [py[f"{op.record.op_name}#{k}"]["launches"][0]["block"] for k in range(3)]
    assert [b[0] for b in blocks] == [64, 128, 256], blocks


def test_an_op_whose_float_scalars_inductor_would_widen_reaches_it_through_an_fp32_entry():
    """Inductor compiles a user-defined Triton kernel's Python-float arguments as fp64 (its
    ``_use_fp64_for_unbacked_floats``), where Triton's JIT and every opsmith path pass fp32: the tutorial-style
    attention would then fail in ``tl.dot`` (its accumulator turns fp64), and other kernels compute in fp64. The
    op decomposes into a generated entry kernel that casts the scale to fp32 and calls the attention kernel
    (``opsmith/inductor/floats.py``; until 2026-11-27 it stayed whole); with the widening off, into the kernel
    itself."""
    import contextlib

    from torch._functorch.aot_autograd import aot_function
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional
    from torch._inductor import config

    from examples.catalog.attention import register_attention
    from opsmith.inductor.donated import _jit_function

    op = register_attention(NS)

    def trace():
        launched = []

        def note(gm, _):
            launched.extend(_jit_function(kernel_side_table.get_kernel(n.kwargs["kernel_idx"])).fn.__name__
                            for n in gm.graph.nodes if n.target is triton_kernel_wrapper_functional)  # fmt: skip
            return gm

        f = aot_function(lambda q, k, v: op(q, k, v, 0.125), fw_compiler=note)
        with FakeTensorMode(), contextlib.suppress(RuntimeError):  # running the captured graph needs a GPU
            q = torch.empty(2, 3, 128, 64, device="cuda", dtype=torch.float16)
            f(q, q.clone(), q.clone())
        return launched

    [entry] = trace()
    assert entry.endswith("__fp32_entry"), entry
    with config.patch(_use_fp64_for_unbacked_floats=False):
        assert trace() == [entry.removesuffix("__fp32_entry")]


@pytest.mark.slow
def test_a_scalar_named_like_a_constexpr_is_compiled_in_per_value(ops):
    """Issue 40, item 2: Liger's label_smoothing is a tl.constexpr callers set per call. Declared as a
    ScalarInput it is no runtime parameter; each distinct value (a float by its bits: -0.0 is not 0.0) is its own
    kernel, the Python path and the native library choosing the same one for the same call."""
    sys.path.insert(0, str(HERE))
    from differential import Registered, both_dry_runs, tensor_call

    op = ops["smooth"]
    assert [p.name for p in op.record.params] == ["Y", "X", "n_cols"] and op.record.static_scalars == (1,)
    calls = [[tensor_call((4, 100)), {"t": "scalar", "v": v}] for v in (0.0, 0.1, 0.25, -0.0, 0.1)]
    gens = [Registered(op, calls)]
    py = both_dry_runs(gens)
    images = [py[f"{op.record.op_name}#{k}"]["launches"][0]["image"] for k in range(5)]
    # the same value, the same kernel; values that change the computation, other kernels (whether Triton emits
    # the same code for -0.0 as for 0.0 is Triton's business: not asserted)
    assert images[4] == images[1] and len({images[0], images[1], images[2]}) == 3, images
    from opsmith.flavors.base import scalar_key

    at = op.variants.spec_layout.index(("scalar", 1))
    compiled = {spec[at] for _, spec in op.variants.kernels}
    assert compiled == {scalar_key("float", v) for v in (0.0, 0.1, 0.25, -0.0)}  # but are two specializations


def test_a_scalar_compiled_in_warns_then_refuses_past_the_limit(ops, monkeypatch):
    monkeypatch.setenv("OPSMITH_SPECIALIZE_WARN", "3")
    monkeypatch.setenv("OPSMITH_SPECIALIZE_LIMIT", "4")
    import opsmith as ok
    from opsmith.torchlib.eager import make_dry_run

    op = register_rows(f"{NS}_limit")["smooth"]

    fn, _ = make_dry_run(op)
    x = torch.randn(2, 16)
    with pytest.warns(UserWarning, match=r"scalar 'label_smoothing' has taken 3 values.*0\.1"):
        for v in (0.0, 0.1, 0.2):
            fn(x, v)
    fn(x, 0.3)
    with pytest.raises(ok.InputError, match=r"scalar 'label_smoothing'.*OPSMITH_SPECIALIZE_LIMIT=4.*0\.5"):
        fn(x, 0.5)


@pytest.mark.slow
def test_an_int_or_bool_scalar_named_like_a_template_argument_is_compiled_in_and_a_float_refused():
    """CUDA C++: an int ScalarInput named like a ``{NAME}`` placeholder is a template argument per call value,
    the same on the Python path and in the native library; a float one is refused with the fix (C++17 has no
    float template arguments)."""
    import opsmith as ok

    sys.path.insert(0, str(HERE))
    from differential import Registered, both_dry_runs, tensor_call

    src = ("template <int SCALE> __global__ void scale_by(const float* x, float* y, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] * SCALE; }")  # fmt: skip

    def spec(py_type):
        return ok.KernelSpec(kernel_source=src, kernel_name="scale_by<{SCALE}>",
                             inputs=[ok.InputDecl("x"), ok.ScalarInput("SCALE", py_type)],
                             outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                             geometry=ok.Elementwise())  # fmt: skip

    with pytest.raises(ok.SpecError, match=r"scalar inputs \['SCALE'\].*int or bool CUDA C\+\+ template arguments"):
        ok.cuda_kernel_op(f"{NS}::cuda_float_template", spec(float))
    op = ok.cuda_kernel_op(f"{NS}::cuda_int_template", spec(int))
    assert [p.name for p in op.record.params] == ["x", "y", "n"] and op.record.static_scalars == (1,)
    gens = [Registered(op, [[tensor_call((300,)), {"t": "scalar", "v": v}] for v in (2, 3, 2)])]
    py = both_dry_runs(gens)
    images = [py[f"{op.record.op_name}#{k}"]["launches"][0]["image"] for k in range(3)]
    assert images[0] != images[1] and images[0] == images[2], images
    # a bool one is true/false (an int would not convert to a bool template argument)
    neg = ("template <bool NEG> __global__ void maybe_neg(const float* x, float* y, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = NEG ? -x[i] : x[i]; }")  # fmt: skip
    op = ok.cuda_kernel_op(f"{NS}::cuda_bool_template", ok.KernelSpec(
        kernel_source=neg, kernel_name="maybe_neg<{NEG}>", inputs=[ok.InputDecl("x"), ok.ScalarInput("NEG", bool)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise()))  # fmt: skip
    gens = [Registered(op, [[tensor_call((300,)), {"t": "scalar", "v": v}] for v in (True, False)])]
    py = both_dry_runs(gens)
    assert len({py[f"{op.record.op_name}#{k}"]["launches"][0]["image"] for k in range(2)}) == 2


@pytest.mark.slow
def test_a_heuristic_reads_an_int_scalar_and_refuses_a_float_one(ops):
    """Issue 40, item 4: ``WRAP = shift % n_cols != 0`` over the int scalar ``shift``: one kernel for shifts that are
    whole rows (0, 100, 200), another for the rest, chosen alike on the Python path and in the native library; a
    heuristic over a float scalar is refused with the reason."""
    import triton
    import triton.language as tl

    sys.path.insert(0, str(HERE))
    from differential import Registered, both_dry_runs, tensor_call

    op = ops["roll"]
    assert op.record.heuristics[0]["exprs"] == [["ne", ["mod", ["var", "s1"], ["size", "i0", 1]], 0]]
    calls = [[tensor_call((4, 100)), {"t": "scalar", "v": v}] for v in (0, 3, 100, -7, 200)]
    py = both_dry_runs([Registered(op, calls)])
    images = [py[f"{op.record.op_name}#{k}"]["launches"][0]["image"] for k in range(5)]
    assert images[0] == images[2] == images[4] != images[1] == images[3], images

    @triton.heuristics({"POS": lambda args: args["eps"] > 0})
    @triton.jit
    def by_eps(Y, X, eps, n, POS: tl.constexpr, BLOCK: tl.constexpr):
        pass

    with pytest.raises(ok.SpecError, match=r"heuristics\['POS'\].*reads the float argument 'eps'.*int and bool"):
        ok.triton_op(f"{NS}::by_eps", by_eps, inputs=[ok.InputDecl("X"), ok.ScalarInput("eps", float)],
                     outputs=[ok.OutputDecl("Y", ok.SameAs("X"))], extras=[ok.Numel("X", name="n")],
                     geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": 128})]))  # fmt: skip
