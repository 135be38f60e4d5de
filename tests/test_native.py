"""Native op libraries on CPU: code generation, the compile against the installed torch, the cache, the
refusals, and a library loaded in a process that never imports opsmith (schemas, Meta kernels, guards on
CPU tensors, autograd through backward programs on meta tensors), and the bad-input matrix through native
kernels. GPU behaviour (launches, bit-identical outputs, compile, export, CUDA graphs, deployment) is in
test_gpu_native.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath

import opsmith as ok
from examples.catalog.basic import FLAT, register_all
from examples.catalog.tuned import register_tuned, triton_available
from opsmith import native
from opsmith.ops.rmsnorm import rmsnorm_ops

HERE = Path(__file__).resolve().parent
NS = "natcpu"


def _run(*args: str, timeout: int = 600) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath(str(HERE.parent)))
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """The shipped example ops and both RMSNorms, built."""
    cases = {**register_all(NS), **register_tuned(NS)}
    cases["twice"] = _twice()
    ops = [c.op for _, c in sorted(cases.items())] + [rmsnorm_ops("cuda")[0]]
    if triton_available():
        ops.append(rmsnorm_ops("triton")[0])
    path = tmp_path_factory.mktemp("native") / "libcatalog.so"
    report = native.build(ops, path)
    return {"cases": cases, "ops": ops, "path": path, "report": report}


def _twice() -> ok.CheckCase:
    """y = 2x, whose backward is one more op (not a program): a library must carry and call it."""
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    decl = {"inputs": [ok.InputDecl("x")], "outputs": [ok.OutputDecl("y", ok.SameAs("x"))], "extras": [ok.Numel("x")],
            "geometry": ok.Elementwise()}  # fmt: skip
    bwd = ok.cuda_kernel_op(f"{NS}::twice_backward", ok.KernelSpec(kernel_source=src, kernel_name="k", **{
        **decl, "inputs": [ok.InputDecl("grad_y")], "outputs": [ok.OutputDecl("dx", ok.SameAs("grad_y"))],
        "extras": [ok.Numel("grad_y")]}))  # fmt: skip
    op = ok.cuda_kernel_op(f"{NS}::twice", ok.KernelSpec(kernel_source=src, kernel_name="k", **decl),
                           backward=ok.Backward(bwd, args=("grad_y",), grads=("x",)))  # fmt: skip
    return ok.CheckCase(op, inputs=lambda s, d, dev: (torch.randn(s, device=dev, dtype=d),), reference=lambda x: 2 * x,
                        shapes=[(7, 3)])  # fmt: skip


@pytest.mark.slow
def test_build_embeds_every_op_and_its_backward_ops(catalog):
    r = catalog["report"]
    assert r.path.is_file() and not r.cached
    names = set(r.ops)
    assert {op.record.op_name for op in catalog["ops"]} <= names
    # RMSNorm's backward program calls two more ops, which the library carries too.
    assert {"opsmith::rmsnorm_cuda_backward", "opsmith::rmsnorm_cuda_dweight", f"{NS}::twice_backward"} <= names
    assert all(n >= 1 for n in r.kernels.values()), r.kernels
    assert "compiled in" in r.summary()


@pytest.mark.slow
def test_second_build_is_a_cache_hit(catalog, tmp_path):
    again = native.build(catalog["ops"], tmp_path / "again.so")
    assert again.cached
    assert again.path.read_bytes() == catalog["path"].read_bytes()
    assert again.seconds < catalog["report"].seconds


def test_source_is_deterministic_and_names_each_op(catalog):
    a = native.source(catalog["ops"][:3])
    assert a == native.source(catalog["ops"][:3])
    for op in catalog["ops"][:3]:
        assert f"// ---- {op.record.op_name} " in a
    assert "TORCH_LIBRARY_FRAGMENT(natcpu, m)" in a and "TORCH_LIBRARY_IMPL(natcpu, Meta, m)" in a


def test_unservable_ops_are_refused_together_and_nothing_is_built(catalog, tmp_path):
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) {}'
    custom = ok.cuda_kernel_op(f"{NS}::custom", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Custom(lambda i, o: ((1,), (32,)))))  # fmt: skip
    pyback = ok.cuda_kernel_op(f"{NS}::pyback", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,))),
        backward=ok.Backward(lambda g: g, args=("grad_y",), grads=("x",)))  # fmt: skip
    eager = ok.cuda_kernel_op(f"{NS}::eager", ok.KernelSpec(
        kernel_source=src, kernel_name="k", inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x")]), eager_fn=lambda x: x.clone())  # fmt: skip
    out = tmp_path / "refused.so"
    with pytest.raises(native.NativeBuildError) as e:
        native.build([catalog["ops"][0], eager, custom, pyback], out)
    text = str(e.value)
    assert "3 op(s) cannot be native; nothing was built" in text
    assert f"{NS}::eager: its implementation is a Python eager_fn." in text
    assert f"{NS}::custom: its Custom geometry is a Python function. Fix: write the launch as Grid(" in text
    assert f"{NS}::pyback: its backward is a Python function." in text
    assert [r[0] for r in e.value.refusals] == [f"{NS}::eager", f"{NS}::custom", f"{NS}::pyback"]
    assert not out.exists()


def _meta_cases(cases: dict) -> list[dict]:
    """One call per op, as input specs (meta tensors in the probe)."""
    out = []
    for _name, c in sorted(cases.items()):
        shape = c.shapes[0] if c.shapes else FLAT[0]
        dtype = c.dtypes[0] if c.dtypes else torch.float32
        args = c.inputs(shape, dtype, "meta")
        out.append({"op": c.op.record.op_name, "args": [{"shape": list(a.shape), "dtype": str(a.dtype)[6:]}
                                                        if isinstance(a, torch.Tensor) else a for a in args],
                    "grad": c.op.record.op_name.endswith("::twice")})  # fmt: skip
    return out


def test_library_alone_serves_schemas_meta_guards_and_autograd(catalog, tmp_path):
    """A process that only loads the library: the same schemas, Meta outputs as the Python fake gives, the
    Python path's CPU-tensor error, and RMSNorm's backward program on meta tensors."""
    specs = _meta_cases(catalog["cases"])
    (tmp_path / "cases.json").write_text(json.dumps(specs))
    got = _run(str(HERE / "native_probe.py"), str(catalog["path"]), "meta", str(tmp_path / "cases.json"))
    assert got["opsmith_imported"] is False
    for spec in specs:
        op = next(o for o in catalog["ops"] if o.record.op_name == spec["op"])
        args = [torch.empty(a["shape"], dtype=getattr(torch, a["dtype"]), device="meta") if isinstance(a, dict) else a
                for a in spec["args"]]  # fmt: skip
        want = op(*args)
        want = want if isinstance(want, tuple) else () if want is None else (want,)
        row = got["ops"][spec["op"]]
        assert row["schema"] == op.schema
        assert row["outputs"] == [[list(t.shape), str(t.dtype)] for t in want], spec["op"]
        assert row["cpu"] == f"ValueError: {spec['op']}: argument '{op.record.tensor_inputs[0].name}': expected a CUDA " \
            f"tensor, got a tensor on cpu. Fix: pass {op.record.tensor_inputs[0].name}.cuda()."  # fmt: skip
        if spec["grad"]:
            x = args[0].detach().requires_grad_()
            (g,) = torch.autograd.grad(op(x).sum(), (x,))
            assert row["grads"] == [[list(g.shape), str(g.dtype)]]
            assert row["double"].startswith(f"RuntimeError: {spec['op']}: double backward (create_graph=True) reached")
    for impl in ("cuda", "triton") if triton_available() else ("cuda",):
        g = got["grads"][f"opsmith::rmsnorm_{impl}"]
        assert g["dx"] == [[6, 64], "torch.bfloat16"] and g["dw"] == [[64], "torch.bfloat16"]
        assert g["only_x"] == [6, 64]
        assert g["double"] == (f"RuntimeError: opsmith::rmsnorm_{impl}: double backward (create_graph=True) reached "
                               "its backward, which is not declared differentiable. Fix: declare Backward(..., "
                               "double_backward=True) if fn is differentiable, or call backward without create_graph.")  # fmt: skip


@pytest.mark.slow
def test_bad_input_matrix_through_native_kernels():
    """Every call-time row of docs/errors.md that can run here gets the documented error from the native
    kernels too (their Meta kernels, through ``native.use``): the same opsmith class and text, through the error
    bridge. The CUDA kernels' own guards are walked by test_error_contract.py."""
    import error_matrix as em

    doc = em.parse(em.DOC.read_text())
    got = _run(str(HERE / "native_matrix.py"))
    walked = 0
    for cid, text in got.items():
        if text in ("not native", "not here"):
            continue
        cls, msg = doc[cid]
        assert text == f"{cls}: {msg}", cid
        walked += 1
    assert got["custom-float-grid"] == "not native" and got["double-backward"] == "not native"
    assert walked >= 11 + (2 if torch.cuda.device_count() >= 2 else torch.cuda.is_available())


@pytest.mark.slow
def test_cli_builds_a_library_and_lists_refusals(tmp_path):
    """`python -m opsmith build MODULE:NAME -o lib.so`: the matrix ops build (a cache hit after the matrix
    test built the same library); with an op of Custom geometry beside them, nothing is built and the refusal is
    listed."""
    env = dict(os.environ, PYTHONPATH=pythonpath(str(HERE), str(HERE.parent)))
    ok_run = subprocess.run([sys.executable, "-m", "opsmith", "build", "native_matrix:ops", "-o", str(tmp_path / "m.so")],
                            capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert ok_run.returncode == 0, ok_run.stderr[-3000:]
    # 20 ops; the three dtype-generic ones hold float32, float16 and bfloat16 kernels
    assert f"{tmp_path / 'm.so'}: 20 ops, 26 kernels," in ok_run.stdout and (tmp_path / "m.so").is_file()
    refused = subprocess.run([sys.executable, "-m", "opsmith", "build", "native_matrix:with_refusals", "-o",
                              str(tmp_path / "s.so")], capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert refused.returncode == 1
    assert "errm::ok_floatgrid: its Custom geometry is a Python function" in refused.stderr
    assert not (tmp_path / "s.so").exists()


@pytest.mark.slow
def test_a_library_built_for_another_torch_refuses_at_the_first_call(catalog, tmp_path):
    from opsmith.native.build import build_source, compile_library

    relu = next(op for op in catalog["ops"] if op.record.op_name == f"{NS}::relu")
    text, images, _, _ = build_source([relu], ["sm_90"])
    built_for = torch.__version__.split("+")[0]
    assert f'#define OPSMITH_BUILT_FOR_TORCH "{built_for}"' in text
    text = text.replace(f'#define OPSMITH_BUILT_FOR_TORCH "{built_for}"', '#define OPSMITH_BUILT_FOR_TORCH "1.0.0"')
    compile_library(text, images, tmp_path / "old.so")
    code = (f"import torch; torch.ops.load_library({str(tmp_path / 'old.so')!r})\n"
            f"try:\n    torch.ops.{NS}.relu(torch.empty(4, device='meta'))\n"
            "except RuntimeError as e:\n    print(str(e).splitlines()[0])")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == (f"this opsmith op library was built for torch 1.0.0, but this process runs torch "
                                   f"{built_for}. Fix: rebuild it against the installed torch (python -m opsmith "
                                   "build ..., or opsmith.native.build).")  # fmt: skip


def test_a_missing_compiler_is_a_clear_error(catalog, tmp_path, monkeypatch):
    monkeypatch.setenv("OPSMITH_CXX", "/nonexistent/g++")
    monkeypatch.setenv("OPSMITH_DISABLE_DISK_CACHE", "1")
    with pytest.raises(ok.ToolchainError, match=r"OPSMITH_CXX='/nonexistent/g\+\+' is not an executable compiler"):
        native.build(catalog["ops"][:1], tmp_path / "x.so")
