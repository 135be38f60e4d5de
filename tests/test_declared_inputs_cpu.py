"""What a declaration says of its inputs, on every path: dtypes as a set (``InputDecl(dtype={...})``: a dtype
outside it is an InputError before launch, Python and native dry runs agreeing on the message, fake tensors too;
one inside it runs its own specialization; a set that excludes what the kernel's parameter fixes is refused at
registration), and an empty input of an op whose outputs declare ``init=`` (the outputs filled with it and the
kernel run: only an empty grid skips the launch)."""

import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import opsmith as ok

sys.path.insert(0, str(Path(__file__).parent))
from differential import Registered, both_dry_runs, tensor_call

NS = "t_dtype_sets"
SRC = r"""
template <typename T> __global__ void twice(const T* x, int n, T* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i];
}
extern "C" __global__ void twice_f(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i];
}
"""
FLOATS = {torch.float16, torch.bfloat16, torch.float32}


def _op(name, kernel, dtype):
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=SRC, kernel_name=kernel, inputs=[ok.InputDecl("x", dtype=dtype)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise()))  # fmt: skip


@pytest.mark.slow
def test_a_dtype_outside_the_set_is_refused_alike_on_both_paths():
    op = _op("twice", "twice<{T_x}>", FLOATS)
    assert op.record.tensor_inputs[0].dtypes == ("bfloat16", "float16", "float32")
    calls = [[tensor_call((8,), dt)] for dt in ("float16", "bfloat16", "float32", "int64", "float64")]
    py = both_dry_runs([Registered(op, calls)])
    outcomes = [py[f"{op.record.op_name}#{k}"] for k in range(5)]
    assert [r["ok"] for r in outcomes] == [True, True, True, False, False], outcomes
    assert len({r["launches"][0]["image"] for r in outcomes[:3]}) == 3  # one specialization per dtype
    msg = "expected one of the dtypes torch.bfloat16, torch.float16, torch.float32 (declared), got torch.int64"
    assert msg in str(outcomes[3]), outcomes[3]
    # the fix names the declared dtype losing least, not the first in sort order (issue 60: float64 -> bfloat16),
    # on both paths alike (both_dry_runs compared the texts)
    assert "Fix: pass x.to(torch.float32)." in outcomes[4]["error"], outcomes[4]
    assert "Fix: pass x.to(torch.float32)." in outcomes[3]["error"], outcomes[3]


def test_fake_tensors_are_refused_too():
    op = _op("twice_fake", "twice<{T_x}>", FLOATS)
    with FakeTensorMode():
        assert op(torch.empty(4, device="cuda", dtype=torch.float16)).dtype == torch.float16
        with pytest.raises(ok.InputError, match=r"argument 'x': expected one of the dtypes .* got torch.int64"):
            op(torch.empty(4, device="cuda", dtype=torch.int64))


def test_a_set_the_kernels_parameter_contradicts_is_refused_at_registration():
    assert _op("twice_f", "twice_f", FLOATS).record.tensor_inputs[0].dtype == "float32"  # float* in the set
    with pytest.raises(ok.SpecError, match=r"fixes 'x' to torch.float32, which is not in the declared"):
        _op("twice_f_half", "twice_f", {torch.float16, torch.bfloat16})
    with pytest.raises(ok.SpecError, match=r"is not a set of torch.dtypes"):
        _op("twice_bad", "twice<{T_x}>", {torch.float16, "float32"})


COLSUM = r"""
extern "C" __global__ void colsum(const float* x, int R, int C, float* out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.f;
    for (int r = 0; r < R; ++r) s += x[r * C + c];
    out[c] = s;
}
"""


@pytest.mark.slow
def test_an_empty_input_gives_the_declared_init_on_both_paths():
    """A column sum over zero rows launches its kernel over outputs holding their init (the kernel decides what
    no data gives), on the Python path, in a native library and on fake tensors; without an init the op keeps
    refusing, alike on both paths, and the refusal names ``init=`` as a fix."""

    def op(name, init):
        return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
            kernel_source=COLSUM, kernel_name="colsum", inputs=[ok.InputDecl("x", shape=("R", "C"))],
            outputs=[ok.OutputDecl("out", shape=("C",), init=init)], extras=[ok.Dim("R"), ok.Dim("C")],
            geometry=ok.Grid(grid=("cdiv(C, 128)",), block=(128,))))  # fmt: skip

    filled, bare = op("colsum_init", 0), op("colsum_bare", None)
    calls = [[tensor_call((0, 5))], [tensor_call((3, 5))]]
    py = both_dry_runs([Registered(filled, calls), Registered(bare, calls)])
    f0, f1 = py[f"{NS}::colsum_init#0"], py[f"{NS}::colsum_init#1"]
    b0 = py[f"{NS}::colsum_bare#0"]
    assert f0["ok"] and len(f0["launches"]) == 1 and f1["ok"] and len(f1["launches"]) == 1, (f0, f1)
    assert f0["launches"][0]["grid"] == [1, 1, 1], f0
    assert not b0["ok"] and "the kernel cannot fill them from no data" in str(b0), b0
    assert "OutputDecl(..., init=value)" in str(b0), b0
    with FakeTensorMode():
        assert filled(torch.empty(0, 5, device="cuda")).shape == (5,)


_EMPTY_STRIDES = """
import json, sys, torch
from torch._subclasses.fake_tensor import FakeTensorMode
import opsmith as ok
from opsmith import native
SRC = 'extern "C" __global__ void rs(const float* x, const float* b, int R, int C, int sx, float* out) {}'
def op(name):
    return ok.cuda_kernel_op(f"t_empty_strides::{name}", ok.KernelSpec(
        kernel_source=SRC, kernel_name="rs",
        inputs=[ok.InputDecl("x", shape=("R", "C"), contiguous="require"), ok.InputDecl("b", shape=("R", "C"))],
        outputs=[ok.OutputDecl("out", shape=("R",), init=0)],
        extras=[ok.Dim("R"), ok.Dim("C"), ok.Stride(("x", "b"), 0, name="sx")],
        geometry=ok.Grid(grid=("R",), block=(32,))))
py, nat = op("py"), op("nat")
if sys.argv[-1] == "native":
    native.use([nat], dry_run=True)
def outcome(f, *args):
    try:
        return ["ok", list(f(*args).shape)]
    except Exception as e:
        return [type(e).__name__, str(e)[:160]]
# zero rows at strides (0, 0) (opcheck's empty samples), beside a contiguous empty b: nothing is addressed
x, b = torch.empty_strided((0, 5), (0, 0)), torch.empty(0, 5)
from opsmith.torchlib.eager import make_dry_run
dry, _ = make_dry_run(py)  # the Python path's call plan on CPU tensors, recording its launch
out = {"python": outcome(dry, x, b), "native": outcome(nat, x, b)}
with FakeTensorMode():
    fx, fb = torch.empty_strided((0, 5), (0, 0), device="cuda"), torch.empty(0, 5, device="cuda")
    out["fake"] = outcome(py, fx, fb)
# a non-empty transposed x is still refused (contiguous='require')
t = torch.randn(5, 3).t()
out["refused"] = [outcome(dry, t, torch.randn(3, 5))[0], outcome(nat, t, torch.randn(3, 5))[0]]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_an_empty_input_is_accepted_at_any_strides_on_every_path():
    """Issue 60, item 7: an empty input at strides (0, 0) was refused by contiguous='require' and by a shared
    Stride (zero elements address nothing); the Python path, the fake and a native library accept it now, and a
    non-empty layout the op requires is still refused."""
    from interpreted import child_json

    got = child_json(_EMPTY_STRIDES.replace('sys.argv[-1] == "native"', "True"))
    assert got == {"python": ["ok", [0]], "native": ["ok", [0]], "fake": ["ok", [0]],
                   "refused": ["InputError", "InputError"]}, got  # fmt: skip
