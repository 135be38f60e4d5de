"""Declarations that state every shape, on CPU: torch.compile(fullgraph=True, dynamic=True) and torch.export
trace named dimensions, groups and preconditions on meta tensors and keep them as guards (a call that breaks
a relation after compiling is refused, not run on a graph specialized for another); the examples' dry runs in
the Python path and in a native dry-run library agree; a transposed weight reaches the matmul without a copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opsmith as ok
from examples.catalog.shapes import register_shapes
from opsmith import InputDecl as I
from opsmith import OutputDecl as O
from opsmith.torchlib.eager import make_dry_run

NS = "t_shapes_cpu"
HERE = Path(__file__).resolve().parent
SRC = r"""
extern "C" __global__ void mm(const float* a, const float* b, int M, int N, int K, float* c) {}
extern "C" __global__ void ax(const float* x, const float* y, long long n, float* out) {}
"""


@pytest.fixture(scope="module")
def ops():
    mm = ok.cuda_kernel_op(f"{NS}::mm", ok.KernelSpec(
        kernel_source=SRC, kernel_name="mm", inputs=[I("a", shape=("M", "K")), I("b", shape=("K", "N"))],
        outputs=[O("c", shape=("M", "N"))], extras=[ok.Dim("M"), ok.Dim("N"), ok.Dim("K")],
        geometry=ok.Grid(grid=("cdiv(M, 16)", "cdiv(N, 16)"), block=(16, 16)),
        requires=[ok.Divisible("K", 4, why="float4 loads along K")]))  # fmt: skip
    ax = ok.cuda_kernel_op(f"{NS}::ax", ok.KernelSpec(
        kernel_source=SRC, kernel_name="ax", inputs=[I("x", shape=("*S",)), I("y", shape=("*S",))],
        outputs=[O("out", shape=("*S",))], extras=[ok.Numel("x", "int64")], geometry=ok.Elementwise()))  # fmt: skip
    return {"mm": mm, "ax": ax}


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


def test_compile_dynamic_keeps_the_named_relations(ops):
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: ops["mm"](a, b) * 2, fullgraph=True, dynamic=True, backend="aot_eager")
    assert f(_meta(8, 12), _meta(12, 5)).shape == (8, 5)
    assert f(_meta(9, 16), _meta(16, 7)).shape == (9, 7)  # the same graph, other sizes
    with pytest.raises(Exception, match=r"argument 'b': expected shape \(K, N\) where K = 16 from 'a', got shape "
                                        r"\(12, 7\)"):  # fmt: skip
        f(_meta(9, 16), _meta(12, 7))
    with pytest.raises(Exception, match=r"expected K divisible by 4 \(float4 loads along K\), got K = 6"):
        f(_meta(9, 6), _meta(6, 7))


def test_compile_dynamic_keeps_a_group(ops):
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: ops["ax"](x, y) + 1, fullgraph=True, dynamic=True, backend="aot_eager")
    assert f(_meta(4, 6), _meta(4, 6)).shape == (4, 6)
    assert f(_meta(5, 3), _meta(5, 3)).shape == (5, 3)
    with pytest.raises(Exception, match=r"argument 'y': expected shape \(\*S,\) where S = \(5, 3\) from 'x'"):
        f(_meta(5, 3), _meta(5, 4))
    with pytest.raises(Exception, match=r"argument 'y': expected shape \(\*S,\)"):  # a group of another rank
        f(_meta(5, 3), _meta(15))


def test_export_records_the_relation_as_one_symbol(ops):
    class M(torch.nn.Module):
        def forward(self, a, b):
            return ops["mm"](a, b)

    dyn = ({0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO}, {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO})
    ep = torch.export.export(M(), (_meta(8, 12), _meta(12, 5)), dynamic_shapes=dyn)
    a, b = (n for n in ep.graph.nodes if n.op == "placeholder")
    k_a, k_b = a.meta["val"].shape[1], b.meta["val"].shape[0]
    assert str(k_a) == str(k_b), (k_a, k_b)  # K of a and K of b are one symbol in the exported program
    out = next(n for n in ep.graph.nodes if n.op == "output").args[0][0]
    assert str(out.meta["val"].shape[0]) == str(a.meta["val"].shape[0])
    with pytest.raises(AssertionError, match=r"Guard failed: b.size\(\)\[0\] == a.size\(\)\[1\]"):  # K, a guard
        ep.module()(_meta(8, 12), _meta(13, 5))


def test_sameas_of_a_declared_input_is_its_whole_shape():
    """``SameAs("x")`` where x declares ("M", None): y must match x on the free axis too."""
    op = ok.cuda_kernel_op(f"{NS}::sameas", ok.KernelSpec(
        kernel_source=SRC, kernel_name="ax", inputs=[I("x", shape=("M", None)), I("y", shape=ok.SameAs("x"))],
        outputs=[O("out", shape=ok.SameAs("x"))], extras=[ok.Numel("x", "int64")], geometry=ok.Elementwise()))  # fmt: skip
    dry, _ = make_dry_run(op)
    assert dry(torch.randn(3, 5), torch.randn(3, 5)).shape == (3, 5)
    with pytest.raises(ok.InputError, match=r"argument 'y': expected the shape of 'x', \(3, 5\), got shape \(3, 4\)"):
        dry(torch.randn(3, 5), torch.randn(3, 4))
    with pytest.raises(ok.InputError, match=r"argument 'y': expected the shape of 'x', \(3, 5\), got shape \(3, 4\)"):
        op(_meta(3, 5), _meta(3, 4))


def test_fake_keeps_guards_with_a_meta_fn():
    """An op whose outputs a meta_fn allocates still refuses, while tracing, what its eager call refuses."""
    calls = []

    def meta(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x.new_empty(x.shape)

    op = ok.cuda_kernel_op(f"{NS}::metafn", ok.KernelSpec(
        kernel_source='extern "C" __global__ void k(const float* x, const float* w, int n, float* y) {}',
        kernel_name="k", inputs=[I("x", shape=("*B", "C")), I("w", shape=("C",))], outputs=None,
        extras=[ok.Numel("x")], geometry=ok.Elementwise()), meta_fn=meta)  # fmt: skip
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        assert op(torch.empty(3, 4, device="cuda"), torch.empty(4, device="cuda")).shape == (3, 4)
        with pytest.raises(ok.InputError, match=r"argument 'w': expected shape \(C,\) where C = 4"):
            op(torch.empty(3, 4, device="cuda"), torch.empty(5, device="cuda"))
        with pytest.raises(ok.InputError, match=r"argument 'x': expected dtype torch.float32"):
            op(torch.empty(3, 4, device="cuda", dtype=torch.float64), torch.empty(4, device="cuda"))
    assert len(calls) == 1  # the meta_fn ran only for the call the guards let through


def test_matmul_reads_a_transposed_weight_in_place():
    pytest.importorskip("triton")
    ex = register_shapes(NS)
    if "matmul" not in ex:
        pytest.skip("Triton is not importable")
    dry, _ = make_dry_run(ex["matmul"].op)
    a, w = torch.randn(64, 32, dtype=torch.float16), torch.randn(48, 32, dtype=torch.float16)
    c = dry(a, w.t())
    (launch,) = dry.launches
    pointers = [int.from_bytes(bytes.fromhex(launch["args"])[8 * k : 8 * k + 8], "little") for k in range(3)]
    assert pointers == [a.data_ptr(), w.data_ptr(), c.data_ptr()]  # w.t() as it is: no copy
    assert c.shape == (64, 48) and c.dtype == torch.float16
    with pytest.raises(ok.InputError, match=r"argument 'b': expected dtype torch.float16, the dtype of 'a'"):
        dry(a, w.t().float())


@pytest.mark.slow
def test_examples_agree_between_the_python_path_and_a_native_library(tmp_path):
    """The new examples' calls (accepted and refused) on CPU tensors: the Python dry run and the CUDA kernels
    of a dry-run native library give the same outputs and the same refusal texts."""
    from opsmith import native

    ex = {k: v for k, v in register_shapes(NS).items() if k != "matmul"}  # (Triton: test_native.py builds one)
    calls = {
        "embedding_float32": [((4, 9), (50, 33), torch.int64), ((7,), (10, 4), torch.int32), ((7,), (10,), torch.int64)],
        "axpby_vec4": [((1024,), (1024,), None), ((1001,), (1001,), None), ((8, 4), (4, 8), None)],
    }  # fmt: skip
    cases, want = [], {}
    for name, rows in calls.items():
        op = ex[name].op
        dry, _ = make_dry_run(op)
        for j, (s0, s1, dt) in enumerate(rows):
            if name.startswith("embedding"):
                args = [torch.randint(0, 5, s0).to(dt), torch.randn(s1)]
            else:
                args = [torch.randn(s0), torch.randn(s1), 0.5, 2.0]
            try:
                got = dry(*args)
                want[f"{name}#{j}"] = f"ok {tuple(got.shape)} {got.dtype}"
            except ok.InputError as e:
                want[f"{name}#{j}"] = f"ValueError: {e}".splitlines()[0]
            cases.append({"id": f"{name}#{j}", "op": op.record.op_name, "shapes": [s0, s1],
                          "dtype": str(dt).removeprefix("torch.") if dt else None})  # fmt: skip
    lib = tmp_path / "shapes.so"
    native.build([c.op for c in ex.values()], lib, dry_run=True)
    code = (
        "import json, sys, torch\n"
        f"torch.ops.load_library({str(lib)!r})\nout = {{}}\n"
        f"for c in json.loads({json.dumps(json.dumps(cases))}):\n"
        "    ns, name = c['op'].split('::')\n"
        "    s0, s1 = c['shapes']\n"
        "    if name.startswith('embedding'):\n"
        "        args = [torch.randint(0, 5, s0).to(getattr(torch, c['dtype'])), torch.randn(s1)]\n"
        "    else:\n"
        "        args = [torch.randn(s0), torch.randn(s1), 0.5, 2.0]\n"
        "    try:\n"
        "        got = getattr(getattr(torch.ops, ns), name)(*args)\n"
        "        out[c['id']] = f'ok {tuple(got.shape)} {got.dtype}'\n"
        "    except Exception as e:\n"
        "        out[c['id']] = f'{type(e).__name__}: {e}'.splitlines()[0]\n"
        "print(json.dumps(out))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=""))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == want
    assert sum(v.startswith("ok") for v in want.values()) == 2 and len(want) == 6  # 4 refusals, 4 kinds


def test_torch_export_keeps_every_declared_precondition():
    """An exported program refuses what the op refuses: Divisible and AtMost become guards on the dynamic size
    (traced on fake CUDA tensors), so a program exported at N = 64 refuses N = 66 and N = 8192 and takes 128."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.export import Dim
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    op = ok.cuda_kernel_op("t_shapes_export::v4", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x", shape=("N",))],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise(),
        requires=[ok.Divisible("N", 4), ok.AtMost("N", 4096), ok.AtLeast("N", 8)]))  # fmt: skip

    class M(torch.nn.Module):
        def forward(self, x):
            return op(x)

    fake = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    with fake:
        ep = torch.export.export(M(), (torch.empty(64, device="cuda"),), dynamic_shapes=({0: Dim.AUTO},))
        run = ep.module()
        assert run(torch.empty(128, device="cuda")).shape == (128,)
        for n, guard in ((66, "% 4 == 0"), (8192, "<= 4096"), (4, ">= 8")):
            with pytest.raises(AssertionError, match=f"Guard failed: .*{guard}"):
                run(torch.empty(n, device="cuda"))
