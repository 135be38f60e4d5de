"""The mutation audit's survivors of issue 49 (item 6), on CPU: each test here failed with its bug planted (a
mutant of the code it names) and passes without it. The boundary table's written outcomes are in
``error_matrix_shapes.EXPECTED`` (a (3, 5) tensor for ("N", "N"), an fp16 view 2 bytes off an align=4 input);
the served tuned op's whole launch (kernel, grid and block of the decided config) in ``test_serving.py``."""

from __future__ import annotations

import pytest
import torch
from differential import Registered, both_dry_runs, tensor_call

import opsmith as ok
from opsmith.torchlib.eager import make_dry_run

NS = "t_audit49"


def _cuda(name: str, src: str, kernel: str, **decl) -> ok.Op:
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(kernel_source=src, kernel_name=kernel, **decl))


def test_a_tensor_declared_for_a_by_value_long_long_is_refused_at_registration():
    src = 'extern "C" __global__ void k(const float* x, long long n, float* y) {}'
    with pytest.raises(
        ok.SpecError,
        match=r"kernel signature: parameter 'long long n' \(for n \(tensor input\)\) is "
        r"not a pointer\. Fix: pass 'n' as a pointer, or declare it as a ScalarInput/extra instead\.",
    ):
        _cuda("ll", src, "k", inputs=[ok.InputDecl("x"), ok.InputDecl("n")],
              outputs=[ok.OutputDecl("y", ok.SameAs("x"))], geometry=ok.Elementwise())  # fmt: skip


def test_re_registering_with_one_more_extra_names_the_extras():
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    decl = dict(inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], geometry=ok.Elementwise())
    _cuda("again", src, "k", extras=[ok.Numel("x")], **decl)
    with pytest.raises(
        ok.RegistrationError,
        match=r"already registered with a different declaration; what "
        r"differs: extras\. Fix: use a new name",
    ):
        _cuda("again", src, "k", extras=[ok.Numel("x"), ok.Numel("x", name="m")], **decl)


@pytest.mark.slow
def test_a_size_expression_over_an_output_fills_its_parameter():
    """``Size("numel(y)")``: the output's element count, as the kernel receives it on both paths."""
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    op = _cuda("over_out", src, "k", inputs=[ok.InputDecl("x", shape=("R", "C"))],
               outputs=[ok.OutputDecl("y", shape=("C",))], extras=[ok.Size("numel(y)", name="n")],
               geometry=ok.Grid(grid=("cdiv(numel(y), 128)",), block=(128,)))  # fmt: skip
    py = both_dry_runs([Registered(op, [[tensor_call((3, 300))]])])
    launch = py[f"{NS}::over_out#0"]["launches"][0]
    assert launch["grid"] == [3, 1, 1] and launch["args"] == ["in0", (300).to_bytes(8, "little").hex(), "out0"]


def test_a_shared_stride_copies_a_row_sliced_input_so_the_kernel_stays_inside_the_output():
    """``Stride(("a", "b", "c"), 0)``: one stride for three tensors. ``a`` sliced to half its rows' width has
    twice c's stride; passed as it is, the kernel would step c by it and write past c's end. It reaches the
    kernel as a contiguous copy, and the stride is c's."""
    src = 'extern "C" __global__ void k(const float* a, const float* b, int stride, int n, float* c) {}'
    op = _cuda("shared_stride", src, "k", inputs=[ok.InputDecl("a", shape=("M", "N")), ok.InputDecl("b", shape=("M", "N"))],
               outputs=[ok.OutputDecl("c", shape=("M", "N"))],
               extras=[ok.Stride(("a", "b", "c"), 0, name="stride"), ok.Dim("N", name="n")],
               geometry=ok.Grid(grid=("M",), block=(32,)))  # fmt: skip
    dry, _ = make_dry_run(op)
    wide = torch.randn(4, 16)
    out = dry(wide[:, :8], torch.randn(4, 8))
    args = bytes.fromhex(dry.launches[0]["args"])
    assert int.from_bytes(args[0:8], "little") != wide.data_ptr()  # a copy
    assert int.from_bytes(args[16:20], "little") == out.stride(0) == 8


SHARED_T = "template <typename T> __global__ void k(const float* x, const T* a, const T* b, int n, float* y) {}"


@pytest.mark.slow
@pytest.mark.parametrize("slot", ["a", "b"])
def test_a_template_type_of_optional_inputs_comes_from_whichever_is_given(slot):
    """``{T_a}`` typing two optional inputs: the one given decides T, either one; both absent, the kernel reads
    neither and float stands in; two given with different dtypes are refused. (All absent raised SpecError at
    the call after registration accepted the op; with ``a`` absent, ``b`` of another dtype reached a kernel of
    the wrong type.) The Python path and a native library agree."""
    op = _cuda(f"shared_t_{slot}", SHARED_T, f"k<{{T_{slot}}}>",
               inputs=[ok.InputDecl("x"), ok.InputDecl("a", optional=True), ok.InputDecl("b", optional=True)],
               outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise())  # fmt: skip
    none = {"t": "none"}
    calls = [[tensor_call((4,)), tensor_call((4,), "float64"), tensor_call((4,), "float64")],
             [tensor_call((4,)), tensor_call((4,), "float64"), none],
             [tensor_call((4,)), none, tensor_call((4,), "float64")],
             [tensor_call((4,)), none, none],
             [tensor_call((4,)), tensor_call((4,), "float64"), tensor_call((4,), "float32")]]  # fmt: skip
    py = both_dry_runs([Registered(op, calls)])
    got = [py[f"{NS}::shared_t_{slot}#{j}"] for j in range(len(calls))]
    assert ["IdE" in g["launches"][0]["symbol"] for g in got[:3]] == [True, True, True]  # k<double>
    assert "IfE" in got[3]["launches"][0]["symbol"]  # k<float>
    assert not got[4]["ok"] and "(the kernel types both with one template parameter)" in got[4]["error"], got[4]


@pytest.mark.slow
def test_a_tuning_decision_for_a_call_without_its_optional_input_builds_natively(tmp_path):
    """A tuned op with an optional in-place input (a published backward's z-loss buffer): the decision of a call
    that passed it as None has None for its dtype in the key, which the native build wrote as int(None) and
    failed ("int() argument must be ... not 'NoneType'"); it is written as -1, the value the library computes
    for an absent input's dtype."""
    from opsmith import native

    src = "template <int BLOCK> __global__ void k(const float* x, float* acc, int n, float* y) {}"
    op = _cuda("tuned_optional", src, "k<{BLOCK}>",
               inputs=[ok.InputDecl("x"), ok.InputDecl("acc", shape=ok.SameAs("x"), optional=True, mutates=True)],
               outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
               geometry=ok.Elementwise(block=("BLOCK",)),
               autotune=ok.Autotune([ok.Config({"BLOCK": b}) for b in (128, 256)], key=[ok.TuneDim("x", -1)]))  # fmt: skip
    dry, _ = make_dry_run(op)
    dry(torch.randn(3000), None)  # compiles config 0 for this call; the dry run never tunes
    op.tuner.decisions[(torch.float32, None, 4096)] = 1  # as if tuning this call's key chose config 1
    dry(torch.randn(3000), None)
    report = native.build([op], tmp_path / "tuned_optional.so", dry_run=True)
    assert report.ops == [op.record.op_name]
    assert "-1LL" in report.source and "4096LL" in report.source
