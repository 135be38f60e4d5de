"""One convention for dtypes and tolerances: ``torch.int32``/``torch.int64`` wherever an index type is asked for
(the names still accepted, with the same record), and ``CheckCase.tol`` as one float or assert_close's keywords."""

import pytest
import torch

import opsmith as ok

NS = "t_conv"
SRC = 'extern "C" __global__ void k(const float* x, float* y, long long n) {}'


def _op(name: str, dtype: object, index_dtype: object = "int32") -> ok.Op:
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=SRC, kernel_name="k", inputs=[ok.InputDecl("x", dtype=torch.float32)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x", name="n", dtype=dtype)],
        geometry=ok.Elementwise(block=(128,)), index_dtype=index_dtype))  # fmt: skip


def test_index_types_take_torch_dtypes_and_their_names_alike():
    a, b = _op("by_name", "int64", "int64"), _op("by_dtype", torch.int64, torch.int64)
    assert a.record.extras[0].ctype == b.record.extras[0].ctype == "i64"
    assert a.record.index_dtype == b.record.index_dtype == "int64"
    with pytest.raises(ok.SpecError, match=r"extras\[0\]\.dtype: torch\.float32 is not an index type.*torch\.int64"):
        _op("bad", torch.float32)
    with pytest.raises(ok.SpecError, match=r"index_dtype: torch\.int16 is not an index width"):
        _op("bad_width", None, torch.int16)


def test_check_case_tolerance_is_a_float_or_assert_close_keywords():
    case = ok.CheckCase(op=torch.neg, inputs=lambda s, d, dev: (torch.randn(s, dtype=d),), reference=torch.neg,
                        tol=1e-4, lowp_tol={"atol": 3e-2, "rtol": 1e-2})  # fmt: skip
    assert case.tolerance(torch.float32) == {"atol": 1e-4, "rtol": 1e-4}
    assert case.tolerance(torch.bfloat16) == {"atol": 3e-2, "rtol": 1e-2}
    with pytest.raises(ok.SpecError, match=r"tol: 'tight' is neither a tolerance nor a dict.*tol=1e-4"):
        ok.CheckCase(op=torch.neg, inputs=None, reference=torch.neg, tol="tight")
    with pytest.raises(ok.SpecError, match=r"lowp_tol: -1"):
        ok.CheckCase(op=torch.neg, inputs=None, reference=torch.neg, lowp_tol=-1)
