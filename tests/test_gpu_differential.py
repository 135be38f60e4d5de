"""On the GPU: the Python path and the native library launch alike (issue 22). Generated declarations and
calls (``differential.py`` in GPU mode: each kernel writes a digest of what its launch gave it, so the bytes
compared are what the driver passed: grid, block, every by-value parameter, pointer alignment), and the
review's items 1, 2, 4 and 8 as ops whose kernels write their whole outputs, compared bit for bit."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from differential import Gen, compare, native_outcomes, python_outcomes, run_batch, summary
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import opsmith as ok
from opsmith import InputDecl as I
from opsmith import OutputDecl as O

pytestmark = pytest.mark.gpu
NS = "t_gpu_diff"
HALF = 1 + 2**-11 + 2**-40
BF16 = 1 + 2**-8 + 2**-40
_N = [0]


@settings(max_examples=2, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(data=st.data())
def test_generated_ops_launch_alike_on_both_paths(data):
    _N[0] += 1
    with tempfile.TemporaryDirectory() as tmp:
        gens, py, nat = run_batch(data, f"dfgpu{_N[0]}", 12, Path(tmp), gpu=True)
    bad = compare(gens, py, nat)
    assert not bad, f"{len(bad)} disagreements of {len(py)} calls:\n" + "\n\n".join(bad[:6])
    s = summary(gens, py)
    assert s["accepted"] >= 6, s
    launched = [o for o in py.values() if o["ok"] and o.get("written") and any(w.strip("0") for w in o["written"])]
    assert len(launched) >= 4, s  # digests were written: real launches happened


def _t(shape, dtype="float32", view="plain"):
    return {"t": "tensor", "shape": list(shape), "dtype": dtype, "device": "cuda", "view": view, "seed": 0}


FP = '#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nextern "C" __global__ '
WRITE = "if (blockIdx.x + threadIdx.x != 0) return; for (long long i = 0; i < n; ++i) y[i] = "


def _op(name, src, **kw):
    decl = {"inputs": [I("x")], "outputs": [O("y", ok.SameAs("x"))], "extras": [ok.Numel("x")],
            "geometry": ok.Elementwise()}  # fmt: skip
    decl.update(kw)
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(kernel_source=FP + src, kernel_name="k", **decl))


def test_items_1_2_4_8_on_the_device(tmp_path):
    ops = {
        "scalars": (_op("scalars", "void k(const short* x, __half a, __nv_bfloat16 b, long long n, short* y) {"
                        f"{WRITE}0; memcpy(&y[0], &a, 2); memcpy(&y[1], &b, 2); }}",
                        inputs=[I("x"), ok.ScalarInput("a", float), ok.ScalarInput("b", float)],
                        extras=[ok.Numel("x", "int64")]),
                    [[_t((4,), "int16"), {"t": "scalar", "v": HALF}, {"t": "scalar", "v": BF16}]]),
        # a strided copy through the 32-bit stride and row length it is given, its whole output written (an
        # unwritten output compared uninitialized memory, which once differed between the paths on an H200)
        "span": (_op("span", "void k(const unsigned char* x, int s, int n, long long numel, unsigned char* y) {"
                     " long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;"
                     " if (i < numel) y[i] = x[(i / n) * s + i % n]; }",
                     inputs=[I("x", ndim=2)], extras=[ok.Stride("x", 0), ok.DimSize("x", -1), ok.Numel("x", "int64")]),
                 [[_t((2**26, 16), "uint8", "wide")], [_t((2**20, 16), "uint8", "wide")]]),
        "big_grid": (_op("big_grid", "void k(const int* x, long long n, int* y) {}", extras=[ok.Numel("x", "int64")],
                         geometry=ok.Grid(grid=("size(x, 0) * 1073741824",), block=(32,)), index_dtype="int64"),
                     [[_t((8,), "int32")]]),
        "floor": (_op("floor", f"void k(const int* x, long long n, int* y) {{ {WRITE}i == 0 ? gridDim.x : i == 1 ? "
                      "gridDim.y : 7; }", extras=[ok.Numel("x", "int64")],
                      geometry=ok.Grid(grid=("(size(x, 0) - 10) // 4 + 5", "cdiv(size(x, 0) - 10, 4) + 5"),
                                       block=(32,))),
                  [[_t((3,), "int32")], [_t((11,), "int32")]]),
        "rows": (_op("rows", f"void k(const float* x, long long n, float* y) {{ {WRITE}1.5f; }}",
                     extras=[ok.Numel("x", "int64")], geometry=ok.Grid(grid=("numel(x) // size(x, -1)",), block=(32,))),
                 [[_t((4, 0))], [_t((4, 3))]]),
    }  # fmt: skip
    gens = [Gen(op.record.op_name, None, "", op, calls=calls) for op, calls in ops.values()]  # type: ignore[arg-type]
    py, cases = python_outcomes(gens, values=True)
    nat = native_outcomes(gens, cases, tmp_path, gpu=True)
    assert compare(gens, py, nat) == [], compare(gens, py, nat)

    def got(key, j=0):
        return py[f"{ops[key][0].record.op_name}#{j}"]

    y = bytes.fromhex(got("scalars")["values"][0])
    assert struct.unpack("<HH", y[:4]) == (0x3C01, 0x3F81)  # rounded once, on both paths
    assert "expected a view spanning at most 2147483647 elements" in got("span")["error"]
    assert got("span", 1)["ok"]  # 2^20 rows of a 64-wide row: spans less than 2^31
    assert "expected a launch of 1 to 2147483647 blocks along x" in got("big_grid")["error"]
    for j, n in enumerate((3, 11)):
        g = struct.unpack(f"<{n}i", bytes.fromhex(got("floor", j)["values"][0]))
        assert g[:2] == ((n - 10) // 4 + 5, -((10 - n) // 4) + 5), (n, g)
    assert got("rows")["ok"] and got("rows")["outputs"][0][0] == [4, 0]
    assert bytes.fromhex(got("rows", 1)["values"][0]) == struct.pack("<12f", *[1.5] * 12)
