"""Bringing a kernel unchanged (issue 14), on CPU: binding by name, C++ names and overloads, strides,
constants, sizes compiled in, the override paths, and the ported public kernels' declarations."""

import sys
import warnings
from importlib import resources
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok
from opsmith import InputDecl as I
from opsmith import OutputDecl as O
from opsmith.plan.layout import addressable

sys.path.insert(0, str(Path(__file__).parent))
import styled_kernels as pk

NS = "t_bind"


def _cuda(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="cuda", dtype=dtype)


def _params(op):
    return [(p.name, p.role, p.index, p.ctype) for p in op.record.params]


def test_outputs_first_with_cpp_linkage_binds_by_name():
    op = pk.register_gelu(NS)
    assert _params(op) == [("out", "output", 0, "ptr"), ("inp", "input", 0, "ptr"), ("N", "extra", 0, "i32")]
    assert op.record.symbol == "_Z17gelu_tanh_forwardPfPKfi"  # found by its C++ name
    assert "x_ptr" not in op.impl_source and "_pack(_pb, 0, _o0.data_ptr(), inp.data_ptr(), _n0)" in op.impl_source
    with FakeTensorMode():
        assert op(_cuda(3, 5)).shape == (3, 5)


def test_a_template_over_the_data_type_binds_by_name_and_writes_in_place():
    op = pk.register_norm(NS)
    assert _params(op) == [("out", "input", 0, "ptr"), ("data", "input", 1, "ptr"), ("count", "extra", 0, "u64")]
    assert op.schema == f"{NS}::llmc_norm(Tensor(a!) out, Tensor data) -> ()"
    assert op.record.tensor_inputs[0].dtype == "float32" and op.record.tensor_inputs[1].dtype is None


def test_triton_kernel_with_ptr_suffixes_a_shared_stride_and_sizes_compiled_in():
    pytest.importorskip("triton")
    op = pk.register_swiglu(NS)
    assert _params(op) == [("a_ptr", "input", 0, "ptr"), ("b_ptr", "input", 1, "ptr"), ("c_ptr", "output", 0, "ptr"),
                           ("stride", "extra", 0, "i32"), ("gate_multiplier", "input", 2, "f32")]  # fmt: skip
    assert op.record.static_extras == (1, 2) and op.record.extras[2].expr == ["pow2", ["size", "i0", -1]]
    assert ("static", 1) in op.variants.spec_layout and ("static", 2) in op.variants.spec_layout
    with FakeTensorMode():
        a = _cuda(4, 96)
        assert op(a, _cuda(4, 96), 1.0).shape == (4, 96)


def test_liger_kernels_own_swiglu_from_its_package_binds_the_same_way():
    """The published kernel itself, from the installed liger-kernel package: the declaration that binds the
    kernel written in its style binds it too, every parameter by name."""
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    pytest.importorskip("liger_kernel", reason="liger-kernel is not installed here: pip install '.[test]'")
    mine, theirs = pk.register_swiglu(f"{NS}_styled"), pk.register_liger_swiglu(NS)
    assert _params(theirs) == _params(mine) == [
        ("a_ptr", "input", 0, "ptr"), ("b_ptr", "input", 1, "ptr"), ("c_ptr", "output", 0, "ptr"),
        ("stride", "extra", 0, "i32"), ("gate_multiplier", "input", 2, "f32")]  # fmt: skip
    with FakeTensorMode():
        assert theirs(_cuda(4, 96), _cuda(4, 96), 1.0).shape == (4, 96)


def test_positional_convention_still_binds_kernels_whose_names_only_partly_match():
    from examples.catalog.basic import register_all

    relu = register_all(f"{NS}_cat")["relu"].op  # my_relu(const float* x, int n, float* y), Numel unnamed
    assert _params(relu) == [("x", "input", 0, "ptr"), ("n", "extra", 0, "i32"), ("y", "output", 0, "ptr")]


def test_a_kernel_reached_only_by_its_overload_signature():
    src = "__global__ void ov(const float* x, int n, float* y) {}\n__global__ void ov(const double* x, int n, double* y) {}"
    op = ok.cuda_kernel_op(f"{NS}::ov", ok.KernelSpec(
        kernel_source=src, kernel_name="ov(const double*, int, double*)", inputs=[I("x")],
        outputs=[O("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()))  # fmt: skip
    assert op.record.tensor_inputs[0].dtype == "float64" and op.record.symbol == "_Z2ovPKdiPd"


def test_ptx_binds_by_an_explicit_parameter_order():
    ptx = resources.files("examples.catalog.kernels").joinpath("scale.ptx").read_bytes()  # scale_f32(x, alpha, n, y)
    op = ok.ptx_op(f"{NS}::ptx_order", ptx, "scale_f32", inputs=[ok.ScalarInput("alpha", float), I("x", torch.float32)],
                   outputs=[O("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise(),
                   param_order=["x", "alpha", "n", "y"])  # fmt: skip
    assert _params(op) == [
        ("", "input", 1, "ptr"),
        ("", "input", 0, "f32"),
        ("", "extra", 0, "u32"),
        ("", "output", 0, "ptr"),
    ]
    assert op.schema == f"{NS}::ptx_order(float alpha, Tensor x) -> Tensor"


def test_constants_fill_parameters_the_call_does_not():
    src = 'extern "C" __global__ void k(const float* x, int n, float scale, long long seed, float* y) {}'
    op = ok.cuda_kernel_op(f"{NS}::consts", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[I("x")], outputs=[O("y", ok.SameAs("x"))],
        extras=[ok.Numel("x", name="n"), ok.Const(0.5, name="scale"), ok.Const(1234, name="seed")],
        geometry=ok.Elementwise()))  # fmt: skip
    assert [p.ctype for p in op.record.params] == ["ptr", "i32", "f32", "i64", "ptr"]
    assert "_x1 = 0.5" in op.impl_source and "_x2 = 1234" in op.impl_source


def test_a_template_argument_bound_to_a_size_is_compiled_per_value():
    src = "template <int N> __global__ void rowsum(const float* x, float* y) {}"
    op = ok.cuda_kernel_op(f"{NS}::per_size", ok.KernelSpec(
        kernel_source=src, kernel_name="rowsum<{N}>", inputs=[I("x", ndim=2)],
        outputs=[O("y", ok.ReduceDims("x", (-1,)))], extras=[ok.DimSize("x", -1, name="N")],
        geometry=ok.Reduction((-1,))))  # fmt: skip
    assert op.record.static_extras == (0,) and op.variants.spec_layout == [("static", 0)]
    assert op.variants.kernel(0, (64,)).binary_for("sm_90").symbol == "_Z6rowsumILi64EEvPKfPf"
    assert op.variants.kernel(0, (128,)).binary_for("sm_90").symbol == "_Z6rowsumILi128EEvPKfPf"


def test_too_many_compiled_in_values_warn_then_refuse(monkeypatch):
    monkeypatch.setenv("OPSMITH_SPECIALIZE_WARN", "2")
    monkeypatch.setenv("OPSMITH_SPECIALIZE_LIMIT", "3")
    src = "template <int N> __global__ void rowsum(const float* x, float* y) {}"
    op = ok.cuda_kernel_op(f"{NS}::limit", ok.KernelSpec(
        kernel_source=src, kernel_name="rowsum<{N}>", inputs=[I("x", ndim=2)],
        outputs=[O("y", ok.ReduceDims("x", (-1,)))], extras=[ok.DimSize("x", -1, name="N")],
        geometry=ok.Reduction((-1,))))  # fmt: skip
    op.variants.kernel(0, (8,))
    with pytest.warns(UserWarning, match=r"size\(x, -1\) has taken 2 values"):
        op.variants.kernel(0, (16,))
    op.variants.kernel(0, (32,))
    with pytest.raises(ok.InputError, match=r"one of the 3 values already compiled in"):
        op.variants.kernel(0, (64,))
    op.variants.kernel(0, (16,))  # a value already compiled is fine


def test_strided_layouts_the_kernel_can_address():
    wide = torch.randn(6, 10)
    assert addressable(wide[:, :4], (0,))  # rows at stride 10, columns dense: no copy needed
    assert not addressable(wide[:, ::2], (0,))  # columns strided: the kernel assumes them dense
    assert not addressable(wide.t(), (0,))
    assert addressable(wide.t(), (0, 1))
    b = torch.randn(2, 3, 10)[:, :, :4]  # the leading axes fold into rows at stride 10: addressable
    assert addressable(b, (-2,)) and addressable(b, (0, 1))
    folded_wrong = torch.randn(3, 2, 10).transpose(0, 1)[:, :, :4]  # rows do not fold: axis 0 strides by 10
    assert not addressable(folded_wrong, (-2,)) and addressable(folded_wrong, (0, 1))
    assert addressable(torch.randn(0, 5), ())


def test_a_stride_declares_which_inputs_may_arrive_strided():
    src = 'extern "C" __global__ void k(const float* x, long long stride, int rows, int cols, float* y) {}'
    op = ok.cuda_kernel_op(f"{NS}::stride", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[I("x", ndim=2)], outputs=[O("y", ok.SameAs("x"))],
        extras=[ok.Stride("x", 0, name="stride"), ok.DimSize("x", 0, name="rows"), ok.DimSize("x", 1, name="cols")],
        geometry=ok.Elementwise()))  # fmt: skip
    assert op.record.tensor_inputs[0].strided == (0,)
    assert "not _fits(x, (0,))" in op.impl_source and "x.is_contiguous()" not in op.impl_source
    assert "memory_format=torch.contiguous_format" in op.impl_source  # the output stays dense


def test_meta_fn_allocates_outputs_for_a_declared_launch():
    """Seed 002: with meta_fn, outputs may be omitted; the generated launch allocates them with meta_fn."""
    src = 'extern "C" __global__ void transpose(const float* x, int rows, int cols, float* y) {}'

    def meta(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.shape[1], x.shape[0])

    op = ok.cuda_kernel_op(f"{NS}::transpose", ok.KernelSpec(
        kernel_source=src, kernel_name="transpose", inputs=[I("x", ndim=2)], outputs=None,
        extras=[ok.DimSize("x", 0, name="rows"), ok.DimSize("x", 1, name="cols")],
        geometry=ok.Elementwise(block=(16, 16), layout="nd")), meta_fn=meta)  # fmt: skip
    assert op.schema == f"{NS}::transpose(Tensor x) -> Tensor" and op.record.outputs[0].shape == {"meta": True}
    assert "_r = _meta(x)" in op.impl_source
    with FakeTensorMode():
        assert op(_cuda(3, 5)).shape == (5, 3)


def test_the_kernel_for_a_declared_output_dtype_is_checked_against_meta_fn():
    src = 'extern "C" __global__ void k(const float* x, int n, double* y) {}'

    def meta(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)  # float32, but the kernel writes doubles

    op = ok.cuda_kernel_op(f"{NS}::meta_dtype", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[I("x")], outputs=None, extras=[ok.Numel("x")],
        geometry=ok.Elementwise()), meta_fn=meta)  # fmt: skip
    assert op.record.outputs[0].dtype == "float64"
    with FakeTensorMode(), pytest.raises(ok.InputError, match=r"meta_fn output 0.*dtype torch.float64"):
        op.eager(_cuda(8))


def test_binding_by_name_keeps_a_warning_free_registration():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pk.register_gelu(f"{NS}_quiet")


def test_ported_triton_kernel_runs_in_the_interpreter_with_strided_inputs():
    pytest.importorskip("triton")
    import os
    import subprocess

    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    out = subprocess.run([sys.executable, str(Path(__file__).parent / "binding_interpreter_check.py")],
                         capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "checked 12 cases" in out.stdout


# -- blind spots of the third review: pointer vs value, names inside names, kernels among comments ----------


def test_a_tensor_for_a_value_parameter_and_a_scalar_for_a_pointer_are_refused():
    src = 'extern "C" __global__ void k(const float* x, float a, int n, float* y) {}'

    def reg(name, inputs):
        return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(kernel_source=src, kernel_name="k", inputs=inputs,
                                 outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
                                 geometry=ok.Elementwise()))  # fmt: skip

    with pytest.raises(ok.SpecError, match=r"parameter 'float a' \(for a \(tensor input\)\) is not a pointer"):
        reg("tensor_for_value", [ok.InputDecl("x"), ok.InputDecl("a", dtype=torch.float32)])
    with pytest.raises(ok.SpecError, match=r"parameter 'float const\* x' \(for x \(scalar input\)\) is a pointer but "
                       r"x \(scalar input\) is passed by value"):  # fmt: skip
        ok.cuda_kernel_op(f"{NS}::value_for_pointer", ok.KernelSpec(
            kernel_source=src, kernel_name="k", inputs=[ok.ScalarInput("x", float), ok.InputDecl("a", dtype=torch.float32)],
            outputs=[ok.OutputDecl("y", ok.SameAs("a"))], extras=[ok.Numel("a", name="n")], param_order=["x", "a", "n", "y"],
            geometry=ok.Elementwise()))  # fmt: skip


def test_a_name_that_begins_another_binds_to_its_own_parameter():
    """``x`` and ``x_scale`` (``x_ptr`` and ``x_scale_ptr`` in the kernel, in another order): exact names only."""
    src = 'extern "C" __global__ void k(const float* x_scale_ptr, const float* x_ptr, int n, float* y) {}'
    op = ok.cuda_kernel_op(f"{NS}::prefix_names", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x"), ok.InputDecl("x_scale")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise()))  # fmt: skip
    assert _params(op) == [("x_scale_ptr", "input", 1, "ptr"), ("x_ptr", "input", 0, "ptr"), ("n", "extra", 0, "i32"),
                           ("y", "output", 0, "ptr")]  # fmt: skip


def test_a_kernel_between_block_comments_is_read_from_the_code_not_the_comments():
    src = r"""
    /* an older version: __global__ void k(const double* z, int q, double* w) {} */
    extern "C" __global__ void k(const float* x, /* the count */ int n, float* y) {}
    /* a note after it, with __global__ void k(float* a, float* b, float* c) */
    """
    op = ok.cuda_kernel_op(f"{NS}::between_comments", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise()))  # fmt: skip
    assert _params(op) == [("x", "input", 0, "ptr"), ("n", "extra", 0, "i32"), ("y", "output", 0, "ptr")]


def test_a_close_name_is_suggested_and_a_kernel_in_another_order_gets_its_param_order():
    """Issue 40, item 7. An extra named 'N' for the kernel's 'n' says "did you mean 'n'"; a kernel with outputs
    first (llm.c's style) whose names the declaration does not use gets the param_order that binds it, paired by
    kind (a const pointer takes an input, another pointer an output, a value an extra); a pointer met by a value
    says the names did not bind before it says "fix the kernel"; a name is never suggested for a parameter of
    the other kind (the extra 'outs' is not the pointer 'out')."""
    src = 'extern "C" __global__ void k(const float* x, float* y, int n) {}'

    def spec(extra, source=src, name="k"):
        return ok.KernelSpec(kernel_source=source, kernel_name=name, inputs=[ok.InputDecl("x")],
                             outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[extra], geometry=ok.Elementwise())  # fmt: skip

    with pytest.raises(ok.SpecError, match=r"named 'N': did you mean 'n'\?.*param_order=\['x', 'y', 'N'\]"):
        ok.cuda_kernel_op(f"{NS}::close_name", spec(ok.Numel("x", name="N")))
    llmc = 'extern "C" __global__ void attn(float* preatt, const float* inp, int B, int T) {}'
    with pytest.raises(ok.SpecError, match=r"param_order=\['out', 'x', 'B', 'T'\]"):
        ok.cuda_kernel_op(f"{NS}::llmc_order", ok.KernelSpec(
            kernel_source=llmc, kernel_name="attn", inputs=[ok.InputDecl("x", shape=("B", "T"))],
            outputs=[ok.OutputDecl("out", ok.SameAs("x"))], extras=[ok.Dim("B"), ok.Dim("T")], geometry=ok.Elementwise()))  # fmt: skip
    outs_first = 'extern "C" __global__ void k2(float* out, const float* inp, int n) {}'
    with pytest.raises(ok.SpecError) as e:
        ok.cuda_kernel_op(f"{NS}::value_met_pointer", spec(ok.Numel("x", name="outs"), outs_first, "k2"))
    text = str(e.value)
    assert "is a pointer but" in text and "do not bind the declaration by name" in text and "did you mean" not in text
    assert "param_order=['y', 'x', 'outs']" in text and text.index("param_order") < text.index("fix the kernel")
    # the order as given binds: the same declaration with param_order registers
    ok.cuda_kernel_op(f"{NS}::value_met_pointer_fixed", ok.KernelSpec(
        kernel_source=outs_first, kernel_name="k2", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x", name="outs")], geometry=ok.Elementwise(), param_order=["y", "x", "outs"]))  # fmt: skip


def test_a_triton_kernels_close_name_is_suggested():
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pass

    with pytest.raises(ok.SpecError, match=r"named 'N': did you mean 'n'\?"):
        ok.triton_op(f"{NS}::triton_close", k, inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                     extras=[ok.Numel("x", name="N")], geometry=ok.Elementwise(block=("BLOCK",)),
                     constexprs={"BLOCK": 256})  # fmt: skip
